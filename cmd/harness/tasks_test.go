package main

import (
	"context"
	"testing"

	"harness/schemas"
)

// A verifier error is no verdict once harness is stopping; one that died
// of a stop signal is named so.
func TestRefStopped(t *testing.T) {
	code := func(n int) *int { return &n }
	stopped, stop := context.WithCancel(context.Background())
	stop()
	running := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  *schemas.ErrorInfo
		want string
	}{
		{"no error", stopped, nil, ""},
		{"the verifier's own error", running, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(1)}, ""},
		{"died of SIGTERM, no stop followed", running, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(143)}, ""},
		{"died of SIGTERM as harness stopped", stopped, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(143)}, "the verifier died of exit status 143 as the run was stopped"},
		{"killed by harness's stop", stopped, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "tests/test.sh wrote neither\nmore", ExitCode: code(-1)}, "the run was stopping when the verifier failed (tests/test.sh wrote neither)"},
	} {
		if got := refStopped(c.ctx, c.err, 0); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
