package realagents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeCodeWithoutKey runs Claude Code's adapter with no API key and
// no model server: its failure, wherever it comes (session/new, or the
// first prompt), says that no key is set and which variable to set.
func TestClaudeCodeWithoutKey(t *testing.T) {
	t.Parallel()
	script := nodeAgent(t, "@zed-industries/claude-code-acp/dist/index.js")
	for _, c := range []struct {
		name string
		// lost leaves the mark of a lost login in HOME: a backup of
		// .claude.json without the file, which makes the adapter refuse
		// session/new.
		lost  bool
		where string
	}{
		{"no key", false, "turn 1: session/prompt: "},
		{"lost login", true, "session/new: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_TELEMETRY=1",
				"DISABLE_AUTOUPDATER=1",
				"DISABLE_ERROR_REPORTING=1",
			)
			sb.Env = append(sb.Env, "CLAUDE_CONFIG_DIR="+filepath.Join(sb.Home, ".claude"))
			if c.lost {
				if err := os.WriteFile(filepath.Join(sb.Home, ".claude.json.backup"), []byte("{}"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, _ := baseConfig(t, sb, []string{"node", script})
			rec := runCases(t, cfg, "say hi")[0]
			if rec.Error == nil {
				t.Fatalf("no error: %s", dump(rec))
			}
			msg := rec.Error.Message
			if !strings.HasPrefix(msg, c.where) || !strings.HasSuffix(msg, "; Claude Code found no API key (set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN)") {
				t.Errorf("error %s: %q, want it to start %q and say no key is set", rec.Error.Class, msg, c.where)
			}
		})
	}
}
