package harbor

import (
	"strings"
	"testing"
)

func TestMCPServersAreGivenAsACPTakesThem(t *testing.T) {
	task, err := Load(writeTask(t, `[[environment.mcp_servers]]
name = "local"
command = "srv"
args = ["-v"]

[[environment.mcp_servers]]
name = "web"
transport = "sse"
url = "http://h/sse"

[[environment.mcp_servers]]
name = "api"
url = "http://h/mcp"
`))
	if err != nil {
		t.Fatal(err)
	}
	servers, skipped := task.ACPMCPServers(false, false)
	if len(servers) != 1 || string(servers[0]) != `{"args":["-v"],"command":"srv","env":[],"name":"local"}` || len(skipped) != 2 {
		t.Errorf("no http, no sse: %s, skipped %q", servers, skipped)
	}
	servers, skipped = task.ACPMCPServers(true, true)
	if len(servers) != 3 || string(servers[1]) != `{"headers":[],"name":"web","type":"sse","url":"http://h/sse"}` ||
		string(servers[2]) != `{"headers":[],"name":"api","type":"http","url":"http://h/mcp"}` || len(skipped) != 0 {
		t.Errorf("both: %s, skipped %q", servers, skipped)
	}
	for _, tc := range []struct{ toml, want string }{
		{"[[environment.mcp_servers]]\ncommand = \"x\"\n", "environment.mcp_servers[1].name: every MCP server needs a name"},
		{"[[environment.mcp_servers]]\nname = \"x\"\n", "environment.mcp_servers[1].command: a stdio MCP server needs a command"},
		{"[[environment.mcp_servers]]\nname = \"x\"\ntransport = \"ws\"\nurl = \"u\"\n", "environment.mcp_servers[1].transport: must be stdio, sse or streamable-http"},
		{"[[environment.mcp_servers]]\nname = \"x\"\ntransport = \"sse\"\n", "environment.mcp_servers[1].url: an sse MCP server needs a url"},
	} {
		_, err := Load(writeTask(t, tc.toml))
		if err == nil || !strings.Contains(err.Error(), "task.toml:1: "+tc.want) {
			t.Errorf("%q: got %v, want …%s", tc.toml, err, tc.want)
		}
	}
}
