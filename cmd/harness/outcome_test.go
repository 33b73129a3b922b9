package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"harness/capture"
	"harness/cli"
	"harness/evaluation"
	"harness/internal/redact"
	"harness/results"
	"harness/runctl"
	"harness/schemas"
	"harness/trials"
)

// TestOutcome: what a run did decides its status and exit code, in the
// order the command reports it: a failure to start first, then the
// budget or stop rule, then a foreign line, a write error, an interrupt,
// the gates and the infrastructure errors.
func TestOutcome(t *testing.T) {
	budget := &runctl.Stop{Kind: runctl.KindBudget, Limit: runctl.Limits{MaxUSD: 0.5}}
	stopOn := &runctl.Stop{Kind: runctl.KindStopOn, Limit: runctl.Limits{StopOn: []string{"auth_required"}},
		ID: "c1", Error: &schemas.ErrorInfo{Class: "auth_required", Message: "log in\nfirst"}}
	foreign := &evaluation.Error{Kind: evaluation.KindForeign, Err: errors.New("out.jsonl: 1 line harness did not write")}
	gateErr := errors.New("gate failed")
	for _, tc := range []struct {
		name       string
		res        evaluation.Result
		err        error
		gate       error
		status     string
		code       int // -1: no exitError
		wantErrSub string
	}{
		{"ok", evaluation.Result{}, nil, nil, statusOK, -1, ""},
		{"exists", evaluation.Result{}, &evaluation.Error{Kind: evaluation.KindOpen, Err: &results.ExistsError{Path: "out.jsonl", Resumable: true}},
			nil, statusError, cli.ExitUsage, "use --resume to continue it or --force to overwrite it"},
		{"resume mismatch", evaluation.Result{}, &evaluation.Error{Kind: evaluation.KindResume, Err: &evaluation.RuleMismatchError{ID: "c1", Written: &schemas.AdaptiveCase{MinK: 2, MaxK: 8, CIWidth: 0.2}, Want: &trials.Policy{}}},
			nil, statusError, cli.ExitUsage, "--resume: case \"c1\" was written with --min-k 2 --max-k 8 --ci-width 0.2"},
		{"agent start interrupted", evaluation.Result{Interrupted: true}, &evaluation.Error{Kind: evaluation.KindAgentStart, Err: errors.New("killed")},
			nil, statusInterrupted, cli.ExitInterrupted, "interrupted while the agent started"},
		{"agent start", evaluation.Result{}, &evaluation.Error{Kind: evaluation.KindAgentStart, Err: &capture.AgentError{Info: schemas.ErrorInfo{Message: "exited 1", Stderr: "bad flag\n"}}},
			nil, statusError, cli.ExitUsage, "exited 1\nagent stderr:\n  bad flag"},
		{"budget", evaluation.Result{Stop: budget, Units: 4, Finished: 1}, nil, nil, statusBudget, cli.ExitBudget,
			"budget spent (no usage reported; --max-cost 0.5): no new work was started, 3 units not run"},
		{"stop-on", evaluation.Result{Stop: stopOn, Units: 2, Finished: 1}, nil, nil, statusInfraErrors, cli.ExitInfraErrors,
			"stopped at the first auth_required error (case \"c1\" trial 1): log in; 1 unit not run"},
		{"budget before foreign", evaluation.Result{Stop: budget}, foreign, nil, statusBudget, cli.ExitBudget, "budget spent"},
		{"foreign", evaluation.Result{}, foreign, nil, statusError, cli.ExitForeign, "1 line harness did not write"},
		{"foreign when interrupted", evaluation.Result{Stop: budget, Interrupted: true}, foreign, nil, statusError, cli.ExitForeign, "did not write"},
		{"write", evaluation.Result{Written: 2}, &evaluation.Error{Kind: evaluation.KindWrite, Err: errors.New("disk full")},
			nil, statusError, cli.ExitUsage, "disk full\nthe 2 records written before it are in out.jsonl; continue with --resume"},
		{"interrupted", evaluation.Result{Interrupted: true, Stop: budget}, nil, nil, statusInterrupted, cli.ExitInterrupted, "interrupted; finished records"},
		{"gate", evaluation.Result{Summary: &schemas.TrialsSummary{}}, nil, gateErr, statusGateFailed, -1, "gate failed"},
		{"infra errors", evaluation.Result{Stats: &capture.Stats{Errors: map[string]int{"timeout": 2}}}, nil, nil, statusInfraErrors, cli.ExitInfraErrors,
			"2 records are left out of n for errors not the agent's own"},
	} {
		v := &runView{f: &runFlags{output: "out.jsonl"}, setup: &runSetup{redact: redact.New(nil, nil)}}
		gates := func(schemas.TrialsSummary) error { return tc.gate }
		res := tc.res
		status, err := v.outcome(context.Background(), &res, tc.err, gates)
		if status != tc.status {
			t.Errorf("%s: status %q, want %q", tc.name, status, tc.status)
		}
		if (err == nil) != (tc.wantErrSub == "") || err != nil && !strings.Contains(err.Error(), tc.wantErrSub) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErrSub)
		}
		var ee *cli.ExitError
		if code := errors.As(err, &ee); code != (tc.code > 0) || code && ee.Code != tc.code {
			t.Errorf("%s: error %#v, want exit code %d", tc.name, err, tc.code)
		}
	}
}
