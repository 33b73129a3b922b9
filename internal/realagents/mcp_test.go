package realagents

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/mcpserver"
	"harness/testkit/testagents"
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

// TestClaudeCodeCallsAnMCPServersTool gives Claude Code (each ACP
// adapter) our stdio MCP server (on the official Go SDK) in session/new;
// the fake model calls its lookup tool, and the call is in the trajectory
// as a tool call of that server, with the answer only the server knows.
// claude-agent-acp's Claude Code defers MCP tools: the model loads the
// tool with ToolSearch first, a call of its own on the record.
func TestClaudeCodeCallsAnMCPServersTool(t *testing.T) {
	t.Parallel()
	for _, a := range testagents.ClaudeAdapters() {
		t.Run(a.Version, func(t *testing.T) {
			t.Parallel()
			sb, srv, agent := claudeSetupWith(t, a, fakemodel.Options{})
			cfg, _ := baseConfig(t, sb, agent)
			cfg.MCPServers = []json.RawMessage{mcpServerConfig(t, "task")}
			rec := runCases(t, cfg, `tool mcp__task__lookup {"key":"blue"}`)[0]
			want := mcpserver.Value("blue")
			checkMCPCall(t, rec, checkTurn(t, rec, true, true, want), "mcp__task__lookup", `"blue"`, want)
			checkRequests(t, srv, "mcp__task__lookup", nil)
		})
	}
}

// checkMCPCall checks the completed tool calls of a turn: one is the MCP
// tool's (its step named name: Claude Code names it mcp__SERVER__TOOL),
// with input in its input (an agent that reports none passes "") and the
// server's answer output in its output.
func checkMCPCall(t *testing.T, rec *schemas.CaptureRecord, tools []schemas.Step, name, input, output string) {
	t.Helper()
	var call *schemas.Step
	var names []string
	for i, s := range tools {
		names = append(names, s.Name)
		if s.Name == name {
			call = &tools[i]
		}
	}
	if call == nil {
		t.Fatalf("no completed call of %s among %q:\n%s", name, names, dump(rec))
	}
	if !strings.Contains(toolOutput(*call), output) || !strings.Contains(string(call.Input), input) {
		t.Errorf("%s call %+v: want %s in its input and the server's answer %q in its output", name, *call, input, output)
	}
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
	if len(rec.Errors) != 0 {
		t.Errorf("errors %q: want none in a trusted folder", rec.Errors)
	}
	checkRequests(t, srv, "mcp_task_lookup", nil)
	checkNoLeftovers(t, sb)
}
