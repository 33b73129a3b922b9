// Package failure decides whose failure a trial is: the agent's, the
// infrastructure's, the grader's or the configuration's, and at which
// stage, from what the harness saw (the error class, exit status, signal,
// cap, the model gateway's ledger of the trial's model calls, else the
// agent's JSON-RPC error and the tail of its standard error). It writes
// the decision and its evidence on the error, and says which failures are
// worth another attempt.
package failure

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"harness/schemas"
)

// DecideRecord decides the owner of a sealed record's failure as Decide
// does, with the model gateway's ledger first: a record whose trial ended
// on model calls the provider failed (ProviderFailure) is the
// infrastructure's, the provider's status and kind its evidence, whatever
// the agent made of them (it crashed, answered an error, hung until its
// time limit, or ended its turn: then the record gets an error of class
// provider_error). A cap the sandbox enforced stays the agent's. When the
// ledger holds the trial's calls and the last did not fail, the provider
// is not blamed from the agent's error text or stderr; without a ledger
// (no gateway, or no call through it) that text is the only evidence.
func DecideRecord(r *schemas.CaptureRecord, stage string) {
	if pf := r.ProviderFailure; pf != nil && providerEnded(r.Error) {
		ev := ProviderFailureEvidence(pf)
		if r.Error == nil {
			r.Error = &schemas.ErrorInfo{Class: schemas.ErrProviderError, Message: "the trial ended on failed model calls: " + ev}
			r.Errors = append(r.Errors, r.Error.Message)
		}
		if r.Error.Owner == "" {
			r.Error.Owner, r.Error.Evidence = schemas.OwnerInfra, ev
			r.Error.Stage = stageOf(r.Error.Class, stage)
		}
		return
	}
	decideFrom(r.Error, stage, len(r.ModelCalls) == 0)
}

// providerEnded says whether a trial whose last model call failed ended
// on it: with no error of its own, or with one the failed calls explain
// (a crash, an error answered, a turn that ran out of time).
func providerEnded(e *schemas.ErrorInfo) bool {
	if e == nil {
		return true
	}
	switch e.Class {
	case schemas.ErrAgentCrash, schemas.ErrAgentError, schemas.ErrTimeout, schemas.ErrProviderError:
		return true
	}
	return false
}

// ProviderFailureEvidence words the ledger's provider failure: "provider
// answered 529 (overloaded); 3 failed model calls", "provider failed
// (connection: ...); 1 failed model call".
func ProviderFailureEvidence(pf *schemas.ProviderFailure) string {
	calls := fmt.Sprintf("%d failed model calls", pf.Calls)
	if pf.Calls == 1 {
		calls = "1 failed model call"
	}
	if pf.Status > 0 {
		return fmt.Sprintf("provider answered %d (%s); %s", pf.Status, pf.Kind, calls)
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(pf.Message), "\n")
	if msg == "" {
		return fmt.Sprintf("provider failed (%s); %s", pf.Kind, calls)
	}
	return fmt.Sprintf("provider failed (%s: %s); %s", pf.Kind, msg, calls)
}

// Decide sets the owner, stage, limit and evidence of a unit's error,
// keeping any already set, from the error alone (the provider's failures
// read from its text: DecideRecord is the record's, with its ledger). stage is where the unit was when it failed
// (schemas.StageSetup, StageAgentStart, StageTurn or StageGrading; "" lets
// the error class say). An interrupted unit (the run was stopped) and an
// error without a class get no owner: they count as they always did.
func Decide(e *schemas.ErrorInfo, stage string) {
	decideFrom(e, stage, true)
}

// decideFrom is Decide, reading the provider's failures from the error's
// text only when fromText.
func decideFrom(e *schemas.ErrorInfo, stage string, fromText bool) {
	if e == nil || e.Owner != "" || e.Class == "" || e.Class == schemas.ErrInterrupted || e.Class == schemas.ErrUnclassified {
		return
	}
	if e.Stage == "" {
		e.Stage = stageOf(e.Class, stage)
	}
	owner, evidence, limit := decide(e, fromText)
	e.Owner = owner
	if e.Evidence == "" {
		e.Evidence = evidence
	}
	if e.Limit == "" {
		e.Limit = limit
	}
}

// stageOf is the stage of an error of class, when the caller did not
// know it better.
func stageOf(class, stage string) string {
	switch class {
	case schemas.ErrWorkspaceSetup:
		return schemas.StageSetup
	case schemas.ErrAgentStart, schemas.ErrAuthRequired:
		return schemas.StageAgentStart
	case schemas.ErrGraderError, schemas.ErrGraderTimeout, schemas.ErrGraderInvalid:
		return schemas.StageGrading
	}
	if stage != "" {
		return stage
	}
	return schemas.StageTurn
}

func decide(e *schemas.ErrorInfo, fromText bool) (owner, evidence, limit string) {
	switch e.Class {
	case schemas.ErrReplayMiss:
		return schemas.OwnerInfra, "the model replay has no recording of a call", ""
	case schemas.ErrProviderError:
		return schemas.OwnerInfra, "the model provider failed the trial's last calls", ""
	case schemas.ErrUserError:
		return schemas.OwnerConfig, "the case's simulated user failed", ""
	case schemas.ErrGraderError, schemas.ErrGraderTimeout, schemas.ErrGraderInvalid:
		return schemas.OwnerGrader, e.Class, ""
	case schemas.ErrWorkspaceSetup:
		return schemas.OwnerInfra, "the workspace or image could not be made", ""
	case schemas.ErrAuthRequired:
		return schemas.OwnerConfig, "the agent asked for authentication", ""
	case schemas.ErrResourceLimit:
		return schemas.OwnerAgent, "the sandbox ended it at its cap", capOf(e.Message)
	case schemas.ErrTimeout:
		if e.Stage == schemas.StageAgentStart {
			return schemas.OwnerAgent, "it did not answer within the startup timeout", "startup timeout"
		}
		return schemas.OwnerAgent, "its turn ran past its time limit", "timeout"
	}
	text := e.Message + "\n" + string(e.Data) + "\n" + e.Stderr
	if e.Class == schemas.ErrAgentStart {
		if m := missingRE.FindString(e.Message); m != "" {
			return schemas.OwnerConfig, "the agent's command: " + m, ""
		}
	}
	if ev := ConfigEvidence(text); ev != "" {
		return schemas.OwnerConfig, ev, ""
	}
	if ev := ProviderEvidence(text); ev != "" && fromText {
		return schemas.OwnerInfra, ev, ""
	}
	if e.Signal == "killed" {
		// SIGKILL that no cap of the harness sent: the kernel's OOM
		// killer or the machine going away.
		return schemas.OwnerInfra, "killed by SIGKILL with no cap set", ""
	}
	switch e.Class {
	case schemas.ErrAgentStart:
		return schemas.OwnerConfig, "the agent could not be started" + exitNote(e), ""
	case schemas.ErrProtocol:
		if e.Stage == schemas.StageAgentStart {
			return schemas.OwnerConfig, "the agent does not speak the protocol" + exitNote(e), ""
		}
		return schemas.OwnerAgent, "the agent broke the protocol", ""
	case schemas.ErrAgentCrash:
		return schemas.OwnerAgent, "the agent exited" + exitNote(e), ""
	case schemas.ErrAgentError:
		if e.Code != nil {
			return schemas.OwnerAgent, fmt.Sprintf("the agent answered JSON-RPC error %d", *e.Code), ""
		}
		return schemas.OwnerAgent, "the agent answered with an error", ""
	}
	// A class this build does not know: not the agent's to count.
	return schemas.OwnerInfra, "error class " + e.Class, ""
}

func exitNote(e *schemas.ErrorInfo) string {
	switch {
	case e.Signal != "":
		return " (killed by " + e.Signal + ")"
	case e.ExitCode != nil:
		return fmt.Sprintf(" (exit status %d)", *e.ExitCode)
	}
	return ""
}

// capOf names the cap a resource_limit message is about.
func capOf(msg string) string {
	switch {
	case strings.HasPrefix(msg, "memory"):
		return "memory"
	case strings.HasPrefix(msg, "processes"):
		return "pids"
	case strings.HasPrefix(msg, "disk"):
		return "disk"
	}
	return "cap"
}

var (
	// A provider's status: "429 Too Many Requests", "status 503",
	// "HTTP 502", "error code: 529", "API error (503)".
	statusRE = regexp.MustCompile(`(?i)(?:\b(?:status(?:\s*code)?|http(?:/[0-9.]+)?|error(?:\s*code)?|code|api error)\s*[:=(]?\s*(429|5[0-9][0-9])\b|\b(429|5[0-9][0-9])\s+(?:too many requests|service unavailable|bad gateway|gateway time-?out|internal server error|overloaded))`)
	// Words providers and their SDKs use for the same.
	wordsRE = regexp.MustCompile(`(?i)(too many requests|rate[ _-]?limit(?:ed)?|service unavailable|overloaded(?:_error)?|bad gateway|gateway time-?out)`)
	// A connection to the provider that failed.
	connRE = regexp.MustCompile(`(?i)(ECONNRESET|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ENOTFOUND|EPIPE|socket hang up|connection reset(?: by peer)?|connection refused|connection closed by the provider|fetch failed|network error|unexpected EOF|tls handshake timeout)`)
	// Missing or refused credentials.
	configRE = regexp.MustCompile(`(?i)(\b401\b\s*(?:unauthori[sz]ed)?|invalid[ _-]?(?:x-)?api[ _-]?key|(?:missing|no|not set)[^\n]{0,20}api[ _-]?key|api[ _-]?key[^\n]{0,30}(?:missing|not set|not found|required|invalid)|authentication_error)`)
	// A command that is not there.
	missingRE = regexp.MustCompile(`(?i)(executable file not found|no such file or directory|permission denied)`)
)

// ProviderEvidence says what in text (an error message, its data, a
// stderr tail) shows the model provider failing, "" when nothing does:
// "provider answered 503", "provider rate limit", "connection to the
// provider failed (ECONNRESET)".
func ProviderEvidence(text string) string {
	if m := statusRE.FindStringSubmatch(text); m != nil {
		return "provider answered " + m[1] + m[2]
	}
	if m := wordsRE.FindString(text); m != "" {
		return "provider answered " + strings.ToLower(m)
	}
	if m := connRE.FindString(text); m != "" {
		return "connection to the provider failed (" + m + ")"
	}
	return ""
}

// ConfigEvidence says what in text shows the agent cannot run as
// configured (no key, a key refused, a missing binary), "" when nothing
// does.
func ConfigEvidence(text string) string {
	if m := configRE.FindString(text); m != "" {
		return "configuration: " + strings.TrimSpace(m)
	}
	return ""
}

// Retryable says whether a record's failure is worth another attempt
// under classes: infrastructure failures by default (classes empty; not
// a model replay's missing recording, which would miss again), or
// those whose owner or error class is in classes. Agent-owned failures
// are never retried, whatever classes says; nor are interrupted units.
func Retryable(r *schemas.CaptureRecord, classes map[string]bool) bool {
	e := r.Error
	if e == nil || e.Class == schemas.ErrInterrupted || e.Owner == schemas.OwnerAgent || e.Owner == "" {
		return false
	}
	if len(classes) == 0 {
		// A replay without a recording of the call would miss again.
		return e.Owner == schemas.OwnerInfra && e.Class != schemas.ErrReplayMiss
	}
	return classes[e.Owner] || classes[e.Class]
}

// Regradable says whether a grader's failure may pass on another try:
// the grader ran out of time, was killed by SIGKILL, or its error shows
// the judge's model provider failing (429/5xx, a lost connection). A
// grader that threw, exited with an error of its own or gave an invalid
// result would fail the same way again.
func Regradable(e *schemas.ErrorInfo) bool {
	if e == nil {
		return false
	}
	switch e.Class {
	case schemas.ErrGraderTimeout:
		return true
	case schemas.ErrGraderError, "":
		return e.Signal == "killed" || ProviderEvidence(e.Message+"\n"+string(e.Data)+"\n"+e.Stderr) != ""
	}
	return false
}

var retryAfterRE = regexp.MustCompile(`(?i)retry[- ]after["':= ]+\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|seconds?)?`)

// RetryAfter is the wait a provider asked for in text ("Retry-After: 7",
// "retry after 1.5s", "retry-after: 300ms"), 0 when it asked for none.
func RetryAfter(text string) time.Duration {
	m := retryAfterRE.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v < 0 {
		return 0
	}
	if strings.EqualFold(m[2], "ms") {
		return time.Duration(v * float64(time.Millisecond))
	}
	return time.Duration(v * float64(time.Second))
}
