package agentskills

import "testing"

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		agent string
	}{
		{[]string{"claude-code-acp"}, "Claude Code"},
		{[]string{"/usr/local/bin/claude-agent-acp"}, "Claude Code"},
		{[]string{"node", "/opt/agents/node_modules/@zed-industries/claude-code-acp/dist/index.js"}, "Claude Code"},
		{[]string{"npx", "-y", "@zed-industries/claude-code-acp@0.13.1"}, "Claude Code"},
		{[]string{"claude", "-p"}, "Claude Code"},
		{[]string{"gemini", "--acp"}, "Gemini CLI"},
		{[]string{"node", "node_modules/@google/gemini-cli/bundle/gemini.js", "--acp"}, "Gemini CLI"},
		{[]string{"node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp", "-c", "model=x"}, "Codex"},
		{[]string{"bunx", "codex-acp"}, "Codex"},
		{[]string{"fakeagent", "--name", "@zed-industries/claude-code-acp"}, ""},
		{[]string{"goose", "acp"}, ""},
		{[]string{"node", "my-agent.js", "claude"}, ""},
		{nil, ""},
	} {
		l, ok := For(tc.argv)
		if ok != (tc.agent != "") || l.Agent != tc.agent {
			t.Errorf("For(%q) = %+v, %v; want %q", tc.argv, l, ok, tc.agent)
		}
	}
	if l, _ := For([]string{"gemini"}); l.Dir != ".gemini/skills" {
		t.Errorf("Gemini CLI's skills: %q", l.Dir)
	}
}
