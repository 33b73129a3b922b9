package realagents

import (
	"testing"
	"time"

	"harness/acp"
	"harness/testkit/fakemodel"
)

// TestCancel times a turn out while the model is slow: the harness sends
// session/cancel, and each agent stops with stopReason cancelled and
// leaves no process behind.
func TestCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(*testing.T, fakemodel.Options) (*sandbox, *fakemodel.Server, []string)
		auth  string
	}{
		{"claude-code-acp", claudeSetup, ""},
		{"gemini-cli", geminiSetup, "gemini-api-key"},
		{"codex-acp", codexSetup, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, srv, agent := tc.setup(t, fakemodel.Options{Slow: 60 * time.Second})
			cfg, _ := baseConfig(t, sb, agent)
			cfg.Auth = tc.auth
			cfg.TurnTimeout = 2 * time.Second
			start := time.Now()
			rec := runCases(t, cfg, "slow bash echo never")[0]
			checkCancelled(t, srv, rec, start, cfg.TurnTimeout)
			if rec.StopReason != acp.StopCancelled {
				t.Errorf("stopReason %q, want cancelled (%s honours session/cancel)", rec.StopReason, tc.name)
			}
			checkNoLeftovers(t, sb)
		})
	}
}
