package capture

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestUntrustedGeminiNote: an agent that names itself gemini-cli, given
// MCP servers without GEMINI_CLI_TRUST_WORKSPACE=true, has a note on its
// record naming the servers and the variable; with it set, or as another
// agent, or without servers, it has none.
func TestUntrustedGeminiNote(t *testing.T) {
	t.Parallel()
	server := json.RawMessage(`{"name":"notes","command":"/bin/true","args":[],"env":[]}`)
	for _, tc := range []struct {
		name    string
		agent   []string
		env     []string
		servers []json.RawMessage
		note    bool
	}{
		{"untrusted", []string{"--name", "gemini-cli"}, nil, []json.RawMessage{server}, true},
		{"set to false", []string{"--name", "gemini-cli"}, []string{"GEMINI_CLI_TRUST_WORKSPACE=false"}, []json.RawMessage{server}, true},
		{"trusted", []string{"--name", "gemini-cli"}, []string{"GEMINI_CLI_TRUST_WORKSPACE=true"}, []json.RawMessage{server}, false},
		{"no servers", []string{"--name", "gemini-cli"}, nil, nil, false},
		{"another agent", nil, nil, []json.RawMessage{server}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, tc.agent...)
			cfg.AgentEnv = append(slices.DeleteFunc(slices.Clone(cfg.AgentEnv), func(kv string) bool {
				return strings.HasPrefix(kv, "GEMINI_CLI_TRUST_WORKSPACE=")
			}), tc.env...)
			cfg.MCPServers = tc.servers
			rec := one(t, cfg, "hello")
			var notes []string
			for _, e := range rec.Errors {
				if strings.Contains(e, "Gemini CLI") {
					notes = append(notes, e)
				}
			}
			switch {
			case tc.note && (len(notes) != 1 || !strings.Contains(notes[0], "MCP servers notes given to Gemini CLI") || !strings.Contains(notes[0], "GEMINI_CLI_TRUST_WORKSPACE=true is not in its environment")):
				t.Errorf("errors %q, want one note naming the server and the variable", rec.Errors)
			case !tc.note && len(notes) != 0:
				t.Errorf("errors %q, want no note", rec.Errors)
			}
		})
	}
}
