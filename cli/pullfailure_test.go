package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"harness/image/pull"
)

// An image whose registry cannot be reached fails the run as an
// infrastructure failure (exit 3); one the registry lacks, or refuses, is
// the input's (exit 2), even beside an unreachable one.
func TestPullFailureClassifiesByCause(t *testing.T) {
	down := func(task string) error {
		return fmt.Errorf("task %s: %w", task, &pull.Error{Ref: "r.example/a:1", Registry: "r.example", Kind: pull.Unavailable, Err: errors.New("connection refused")})
	}
	missing := fmt.Errorf("case b: %w", &pull.Error{Ref: "r.example/b:1", Registry: "r.example", Kind: pull.NotFound, Err: errors.New("manifest unknown")})
	for _, tc := range []struct {
		name  string
		err   error
		code  int
		infra bool
	}{
		{"one unreachable", down("a"), ExitInfraErrors, true},
		{"all unreachable", errors.Join(down("a"), down("c")), ExitInfraErrors, true},
		{"a missing tag", missing, ExitUsage, false},
		{"missing beside unreachable", errors.Join(down("a"), missing), ExitUsage, false},
		{"no pull at all", errors.New("task x: no Dockerfile"), ExitUsage, false},
	} {
		err := PullFailure(tc.err)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != tc.code {
			t.Errorf("%s: %v, want exit %d", tc.name, err, tc.code)
			continue
		}
		if got := strings.Contains(err.Error(), "infrastructure failure"); got != tc.infra {
			t.Errorf("%s: %q says infrastructure: %v, want %v", tc.name, err, got, tc.infra)
		}
		if !strings.Contains(err.Error(), tc.err.Error()) {
			t.Errorf("%s: %q lost the cause %q", tc.name, err, tc.err)
		}
	}
}
