package failure

import (
	"encoding/json"
	"testing"

	"harness/schemas"
)

func TestDecide(t *testing.T) {
	code := func(n int64) *int64 { return &n }
	exit := func(n int) *int { return &n }
	for _, tc := range []struct {
		name         string
		e            schemas.ErrorInfo
		stage        string
		owner, stg   string
		limit, about string
	}{
		{"crash of its own", schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Message: "the agent exited during turn 1", ExitCode: exit(3), Stderr: "panic: simulated crash"}, schemas.StageTurn,
			schemas.OwnerAgent, schemas.StageTurn, "", "the agent exited (exit status 3)"},
		{"hang past the limit", schemas.ErrorInfo{Class: schemas.ErrTimeout, Message: "turn 1 exceeded its 2s timeout"}, schemas.StageTurn,
			schemas.OwnerAgent, schemas.StageTurn, "timeout", "its turn ran past its time limit"},
		{"cap", schemas.ErrorInfo{Class: schemas.ErrResourceLimit, Message: "memory over the 64 MiB cap (--memory)"}, schemas.StageTurn,
			schemas.OwnerAgent, schemas.StageTurn, "memory", "the sandbox ended it at its cap"},
		{"provider 503 as a JSON-RPC error", schemas.ErrorInfo{Class: schemas.ErrAgentError, Code: code(-32603), Message: "Internal error (JSON-RPC error -32603)", Data: json.RawMessage(`{"error":"API Error: 503 Service Unavailable"}`)}, schemas.StageTurn,
			schemas.OwnerInfra, schemas.StageTurn, "", "provider answered 503"},
		{"provider 429 in stderr", schemas.ErrorInfo{Class: schemas.ErrAgentCrash, ExitCode: exit(1), Stderr: "Error: status code 429\n"}, schemas.StageTurn,
			schemas.OwnerInfra, schemas.StageTurn, "", "provider answered 429"},
		{"overloaded", schemas.ErrorInfo{Class: schemas.ErrAgentError, Message: `{"type":"overloaded_error"}`}, schemas.StageTurn,
			schemas.OwnerInfra, schemas.StageTurn, "", "provider answered overloaded_error"},
		{"lost connection", schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Stderr: "Error: read ECONNRESET"}, schemas.StageTurn,
			schemas.OwnerInfra, schemas.StageTurn, "", "connection to the provider failed (ECONNRESET)"},
		{"OOM killer", schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Signal: "killed"}, schemas.StageTurn,
			schemas.OwnerInfra, schemas.StageTurn, "", "killed by SIGKILL with no cap set"},
		{"no key", schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Stderr: "Error: ANTHROPIC_API_KEY not set"}, schemas.StageTurn,
			schemas.OwnerConfig, schemas.StageTurn, "", "configuration: API_KEY not set"},
		{"missing binary", schemas.ErrorInfo{Class: schemas.ErrAgentStart, Message: `exec: "nope": executable file not found in $PATH`}, "",
			schemas.OwnerConfig, schemas.StageAgentStart, "", "the agent's command: executable file not found"},
		{"auth", schemas.ErrorInfo{Class: schemas.ErrAuthRequired}, schemas.StageTurn,
			schemas.OwnerConfig, schemas.StageAgentStart, "", "the agent asked for authentication"},
		{"workspace", schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup}, "",
			schemas.OwnerInfra, schemas.StageSetup, "", "the workspace or image could not be made"},
		{"grader", schemas.ErrorInfo{Class: schemas.ErrGraderTimeout}, "",
			schemas.OwnerGrader, schemas.StageGrading, "", schemas.ErrGraderTimeout},
		{"agent's own JSON-RPC error", schemas.ErrorInfo{Class: schemas.ErrAgentError, Code: code(-32603), Message: "simulated failure"}, schemas.StageTurn,
			schemas.OwnerAgent, schemas.StageTurn, "", "the agent answered JSON-RPC error -32603"},
		{"protocol at start", schemas.ErrorInfo{Class: schemas.ErrProtocol, Message: "protocol version 2"}, schemas.StageAgentStart,
			schemas.OwnerConfig, schemas.StageAgentStart, "", "the agent does not speak the protocol"},
	} {
		e := tc.e
		Decide(&e, tc.stage)
		if e.Owner != tc.owner || e.Stage != tc.stg || e.Limit != tc.limit || e.Evidence != tc.about {
			t.Errorf("%s: owner %q stage %q limit %q evidence %q, want %q %q %q %q", tc.name, e.Owner, e.Stage, e.Limit, e.Evidence, tc.owner, tc.stg, tc.limit, tc.about)
		}
	}
	// An interrupted unit has no owner; an owner already decided stays.
	e := schemas.ErrorInfo{Class: schemas.ErrInterrupted}
	if Decide(&e, schemas.StageTurn); e.Owner != "" {
		t.Errorf("interrupted: owner %q", e.Owner)
	}
	e = schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Owner: schemas.OwnerInfra}
	if Decide(&e, schemas.StageTurn); e.Owner != schemas.OwnerInfra {
		t.Errorf("decided twice: %q", e.Owner)
	}
}

func TestRetryable(t *testing.T) {
	rec := func(class, owner string) *schemas.CaptureRecord {
		return &schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: class, Owner: owner}}
	}
	for _, tc := range []struct {
		r       *schemas.CaptureRecord
		classes map[string]bool
		want    bool
	}{
		{rec(schemas.ErrAgentError, schemas.OwnerInfra), nil, true},
		{rec(schemas.ErrAgentCrash, schemas.OwnerAgent), nil, false},
		{rec(schemas.ErrAgentCrash, schemas.OwnerAgent), map[string]bool{schemas.ErrAgentCrash: true, schemas.OwnerAgent: true}, false},
		{rec(schemas.ErrAuthRequired, schemas.OwnerConfig), nil, false},
		{rec(schemas.ErrAuthRequired, schemas.OwnerConfig), map[string]bool{schemas.OwnerConfig: true}, true},
		{rec(schemas.ErrWorkspaceSetup, schemas.OwnerInfra), map[string]bool{schemas.ErrAgentError: true}, false},
		{rec(schemas.ErrInterrupted, ""), nil, false},
		{rec(schemas.ErrReplayMiss, schemas.OwnerInfra), nil, false},
		{rec(schemas.ErrReplayMiss, schemas.OwnerInfra), map[string]bool{schemas.ErrReplayMiss: true}, true},
		{rec(schemas.ErrAgentCrash, ""), nil, false},
		{&schemas.CaptureRecord{}, nil, false},
	} {
		if got := Retryable(tc.r, tc.classes); got != tc.want {
			t.Errorf("%+v under %v: %v, want %v", tc.r.Error, tc.classes, got, tc.want)
		}
	}
}

// TestDecideRecordLedger: with the model gateway's ledger, the provider's
// failure on the last calls makes the record the infrastructure's with
// the provider's status and kind as evidence (whatever the agent made of
// it); a ledger whose last call answered means the agent's text is not
// read for the provider's failures; without a ledger it still is.
func TestDecideRecordLedger(t *testing.T) {
	exit := func(n int) *int { return &n }
	ok := []schemas.ModelCall{{Status: 200}}
	overloaded := &schemas.ProviderFailure{Kind: schemas.ModelErrOverloaded, Message: "overloaded_error", Status: 529, Calls: 3}
	lost := &schemas.ProviderFailure{Kind: schemas.ModelErrConnection, Message: "read: connection reset\nmore", Calls: 1}
	crash := func() *schemas.ErrorInfo {
		return &schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Message: "the agent exited during turn 1 (exit status 1)", ExitCode: exit(1), Stderr: "API Error: 503 Service Unavailable"}
	}
	for _, tc := range []struct {
		name                string
		rec                 schemas.CaptureRecord
		class, owner, stage string
		limit, evidence     string
	}{
		{"crash on a provider's 529s", schemas.CaptureRecord{Error: crash(), ModelCalls: ok, ProviderFailure: overloaded},
			schemas.ErrAgentCrash, schemas.OwnerInfra, schemas.StageTurn, "", "provider answered 529 (overloaded); 3 failed model calls"},
		{"turn ended after the provider failed", schemas.CaptureRecord{ModelCalls: ok, ProviderFailure: lost},
			schemas.ErrProviderError, schemas.OwnerInfra, schemas.StageTurn, "", "provider failed (connection: read: connection reset); 1 failed model call"},
		{"hang while the provider failed", schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrTimeout, Message: "turn 1 exceeded its 2s timeout"}, ModelCalls: ok, ProviderFailure: overloaded},
			schemas.ErrTimeout, schemas.OwnerInfra, schemas.StageTurn, "", "provider answered 529 (overloaded); 3 failed model calls"},
		{"a cap stays the agent's", schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrResourceLimit, Message: "memory over the 64 MiB cap"}, ModelCalls: ok, ProviderFailure: overloaded},
			schemas.ErrResourceLimit, schemas.OwnerAgent, schemas.StageTurn, "memory", "the sandbox ended it at its cap"},
		{"ledger answered: a 503 in stderr is the agent's own", schemas.CaptureRecord{Error: crash(), ModelCalls: ok},
			schemas.ErrAgentCrash, schemas.OwnerAgent, schemas.StageTurn, "", "the agent exited (exit status 1)"},
		{"no ledger: stderr is the evidence", schemas.CaptureRecord{Error: crash()},
			schemas.ErrAgentCrash, schemas.OwnerInfra, schemas.StageTurn, "", "provider answered 503"},
		{"replay without a recording", schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrReplayMiss, Message: "model call 1: no recording"}, ModelCalls: ok},
			schemas.ErrReplayMiss, schemas.OwnerInfra, schemas.StageTurn, "", "the model replay has no recording of a call"},
		{"a simulated user that failed is the case's configuration", schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrUserError, Message: "user: exit status 1"}},
			schemas.ErrUserError, schemas.OwnerConfig, schemas.StageTurn, "", "the case's simulated user failed"},
	} {
		r := tc.rec
		DecideRecord(&r, schemas.StageTurn)
		e := r.Error
		if e == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if e.Class != tc.class || e.Owner != tc.owner || e.Stage != tc.stage || e.Limit != tc.limit || e.Evidence != tc.evidence {
			t.Errorf("%s: class %q owner %q stage %q limit %q evidence %q, want %q %q %q %q %q", tc.name, e.Class, e.Owner, e.Stage, e.Limit, e.Evidence,
				tc.class, tc.owner, tc.stage, tc.limit, tc.evidence)
		}
	}
	// A trial that ended with no error gets one, listed with its errors,
	// and is retried as the infrastructure's.
	r := schemas.CaptureRecord{ModelCalls: ok, ProviderFailure: overloaded}
	DecideRecord(&r, schemas.StageTurn)
	if len(r.Errors) != 1 || r.Errors[0] != r.Error.Message || !Retryable(&r, nil) {
		t.Errorf("errors %q, retryable %v", r.Errors, Retryable(&r, nil))
	}
	// A record that passed without a provider failure stays as it was.
	r = schemas.CaptureRecord{ModelCalls: ok}
	if DecideRecord(&r, schemas.StageTurn); r.Error != nil {
		t.Errorf("clean record got %+v", r.Error)
	}
}

func TestRegradable(t *testing.T) {
	for _, tc := range []struct {
		e    schemas.ErrorInfo
		want bool
	}{
		{schemas.ErrorInfo{Class: schemas.ErrGraderTimeout}, true},
		{schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "judge: status 529 overloaded"}, true},
		{schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "judge: read: connection reset by peer"}, true},
		{schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "grader was killed", Signal: "killed"}, true},
		{schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "grade(input) threw: Error: grader bug"}, false},
		{schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: "not a grader result"}, false},
	} {
		if got := Regradable(&tc.e); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.e, got, tc.want)
		}
	}
}
