package capture

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKeyHint(t *testing.T) {
	home := t.TempDir()
	loggedIn := t.TempDir()
	if err := os.MkdirAll(filepath.Join(loggedIn, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(loggedIn, ".claude", ".credentials.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".codex/auth.json", ".gemini/oauth_creds.json"} {
		p := filepath.Join(loggedIn, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	claudeCmd := []string{"node", "/x/node_modules/@zed-industries/claude-code-acp/dist/index.js"}
	claudeInfo := []string{"@zed-industries/claude-code-acp", "Claude Code"}
	for _, c := range []struct {
		name      string
		info, cmd []string
		env       []string
		sandboxed bool
		stderr    string
		want      string
	}{
		{"claude by its agentInfo, no key", claudeInfo, []string{"./agent"}, []string{"HOME=" + home}, false, "",
			"Claude Code found no API key (set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN)"},
		{"claude by its command line", nil, claudeCmd, []string{"HOME=" + home}, false, "",
			"Claude Code found no API key (set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN)"},
		{"claude with a key", claudeInfo, claudeCmd, []string{"HOME=" + home, "ANTHROPIC_API_KEY=sk-x"}, false, "", ""},
		{"claude with an empty key", claudeInfo, claudeCmd, []string{"HOME=" + home, "ANTHROPIC_API_KEY="}, false, "",
			"Claude Code found no API key (set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN)"},
		{"claude on Bedrock", claudeInfo, claudeCmd, []string{"HOME=" + home, "CLAUDE_CODE_USE_BEDROCK=1"}, false, "", ""},
		{"claude logged in", claudeInfo, claudeCmd, []string{"HOME=" + loggedIn}, false, "", ""},
		{"claude logged in, in a sandbox", claudeInfo, claudeCmd, []string{"HOME=" + loggedIn}, true, "",
			"Claude Code found no API key (set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN; a login saved in your HOME is not in the sandbox's HOME unless the sandbox is given it)"},
		{"claude's config dir holds the login", claudeInfo, claudeCmd, []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(loggedIn, ".claude")}, false, "", ""},
		{"codex", []string{"codex-acp"}, nil, []string{"HOME=" + home}, false, "",
			"Codex found no API key (set OPENAI_API_KEY or CODEX_API_KEY)"},
		{"codex with a key", nil, []string{"codex-acp"}, []string{"HOME=" + home, "CODEX_API_KEY=k"}, false, "", ""},
		{"codex logged in", nil, []string{"codex-acp"}, []string{"HOME=" + loggedIn}, false, "", ""},
		{"codex's home holds no login", nil, []string{"codex-acp"}, []string{"HOME=" + loggedIn, "CODEX_HOME=" + home}, false, "",
			"Codex found no API key (set OPENAI_API_KEY or CODEX_API_KEY)"},
		{"gemini logged in", nil, []string{"gemini"}, []string{"HOME=" + loggedIn}, false, "", ""},
		{"gemini on Vertex", nil, []string{"gemini"}, []string{"HOME=" + home, "GOOGLE_GENAI_USE_VERTEXAI=true"}, false, "", ""},
		{"gemini", nil, []string{"gemini", "--experimental-acp"}, []string{"HOME=" + home}, false, "",
			"Gemini CLI found no API key (set GEMINI_API_KEY or GOOGLE_API_KEY)"},
		{"an unknown agent: its stderr", nil, []string{"./my-agent"}, []string{"HOME=" + home}, false,
			"starting\nError: Invalid API key · Please run /login\n  at main (x.js:1)\n",
			"the agent's stderr says: Error: Invalid API key · Please run /login"},
		{"an unknown agent, a stderr that says nothing of keys", nil, []string{"./my-agent"}, []string{"HOME=" + home}, false, "panic: boom\n", ""},
		{"a known agent with a key: its stderr", claudeInfo, claudeCmd, []string{"ANTHROPIC_API_KEY=k"}, false, "401 not logged in\n",
			"the agent's stderr says: 401 not logged in"},
	} {
		if got := keyHint(c.info, c.cmd, c.env, c.sandboxed, c.stderr); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
