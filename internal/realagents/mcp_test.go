package realagents

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/mcpserver"
)

// mcpServerEnv makes the test binary serve MCP on stdio (mcpserver.Main),
// standing in for a server a task or a run gives the agent.
const mcpServerEnv = "HARNESS_TEST_MCP_SERVER"

// mcpServerConfig is the session/new entry of the test's stdio MCP server,
// named name.
func mcpServerConfig(t *testing.T, name string) json.RawMessage {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"name": name, "command": exe, "args": []string{},
		"env": []map[string]string{{"name": mcpServerEnv, "value": "1"}}})
	return b
}

// TestClaudeCodeCallsAnMCPServersTool gives Claude Code our stdio MCP
// server (on the official Go SDK) in session/new; the fake model calls its
// lookup tool, and the call is in the trajectory as a tool call of that
// server, with the answer only the server knows.
func TestClaudeCodeCallsAnMCPServersTool(t *testing.T) {
	t.Parallel()
	sb, srv, agent := claudeSetup(t, fakemodel.Options{})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.MCPServers = []json.RawMessage{mcpServerConfig(t, "task")}
	rec := runCases(t, cfg, `tool mcp__task__lookup {"key":"blue"}`)[0]
	want := mcpserver.Value("blue")
	tools := checkTurn(t, rec, true, true, want)
	var call *schemas.Step
	for i, s := range tools {
		if strings.Contains(s.Name+s.ToolName+string(s.Input), "lookup") {
			call = &tools[i]
		}
	}
	if call == nil {
		t.Fatalf("no completed tool call of the MCP server's lookup:\n%s", dump(rec))
	}
	if !strings.Contains(toolOutput(*call), want) || !strings.Contains(string(call.Input), `"blue"`) {
		t.Errorf("lookup call %+v: want its input and the server's answer %q", *call, want)
	}
	// Claude Code titles an MCP tool call mcp__SERVER__TOOL.
	if call.Name != "mcp__task__lookup" {
		t.Errorf("the call does not name the server: name %q, toolName %q", call.Name, call.ToolName)
	}
	checkRequests(t, srv, "mcp__task__lookup", nil)
}

// TestGeminiCLICallsAnMCPServersTool gives Gemini CLI our stdio MCP server
// in session/new; the fake Gemini model calls its lookup tool, which
// Gemini CLI offers as mcp_SERVER_TOOL, and the completed call is in the
// trajectory with the answer only the server knows.
func TestGeminiCLICallsAnMCPServersTool(t *testing.T) {
	t.Parallel()
	sb, srv, agent := geminiSetup(t, fakemodel.Options{})
	// Gemini CLI starts no MCP server, not even session/new's, in a
	// folder it does not trust.
	sb.Env = append(sb.Env, "GEMINI_CLI_TRUST_WORKSPACE=true")
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Auth = "gemini-api-key"
	cfg.MCPServers = []json.RawMessage{mcpServerConfig(t, "task")}
	rec := runCases(t, cfg, `tool mcp_task_lookup {"key":"blue"}`)[0]
	want := mcpserver.Value("blue")
	tools := checkTurn(t, rec, true, true, want)
	var call *schemas.Step
	for i, s := range tools {
		if strings.Contains(s.Name+s.ToolName+string(s.Input), "lookup") {
			call = &tools[i]
		}
	}
	if call == nil {
		t.Fatalf("no completed tool call of the MCP server's lookup:\n%s", dump(rec))
	}
	if !strings.Contains(toolOutput(*call), want) {
		t.Errorf("lookup call %+v: want the server's answer %q in its output", *call, want)
	}
	// Gemini CLI offers the tool to the model as mcp_SERVER_TOOL, titles
	// its call "TOOL (SERVER MCP Server)" and sends no rawInput; its
	// toolCallId starts with the offered name.
	if call.Name != "lookup (task MCP Server)" || !strings.HasPrefix(call.ToolCallID, "mcp_task_lookup") {
		t.Errorf("the call does not name the server: name %q, toolCallId %q", call.Name, call.ToolCallID)
	}
	// It asks before calling a tool of a server the user does not trust.
	if perms := stepsOf(rec, schemas.StepPermission); len(perms) == 0 || perms[0].Outcome != "selected" {
		t.Errorf("permission steps %+v, want the call's permission granted", perms)
	}
	checkRequests(t, srv, "mcp_task_lookup", nil)
	checkNoLeftovers(t, sb)
}
