package realagents

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/cost"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// TestClaudeAgentTools drives claude-agent-acp through a script of four of
// Claude Code's own tools in one turn (Write a file, Edit it, Bash cat it,
// Read it), through the model gateway, with the client's fs and terminal
// offered. It runs them itself: the record holds the four tool calls as it
// sends them, the file it left in the workspace copy as the workspace's
// changes (not as fs/* steps), the shell's output in the Bash call, the
// final message, and the calls on the ledger priced by the run's table.
func TestClaudeAgentTools(t *testing.T) {
	t.Parallel()
	a := testagents.ClaudeAdapters()[1]
	sb, srv, agent := claudeSetupWith(t, a, fakemodel.Options{Usage: &gatewayUsage})
	cfg, wire := baseConfig(t, sb, agent)
	cfg.Gateway = startGateway(t)
	cfg.Client.FS = &acp.FSOptions{}
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: 30 * time.Second, Env: sb.Env}
	price := cost.Price{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}
	cfg.Prices = cost.Table{"*": price}
	tmpl := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmpl, "README.md"), []byte("a workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = tmpl
	// The Bash step names the file the Write was given: the fake model
	// takes it from the conversation.
	prompt := "write notes.txt alpha beta\n" +
		`then tool Edit {"file_path":"notes.txt","old_string":"beta","new_string":"gamma"}` + "\n" +
		"then bash cat {{prev.file_path}}\n" +
		`then tool Read {"file_path":"notes.txt"}`
	rec := runCases(t, cfg, prompt)[0]
	tools := checkTurn(t, rec, true, true, "alpha gamma")

	// The tool calls, as claude-agent-acp sends them: Claude Code's tool
	// in toolName, a title of its own, the model's input, and the diff
	// (of Write and Edit) or the output.
	type want struct {
		tool, kind, title, input, content, output string
	}
	wants := []want{
		{"Write", "edit", "Write notes.txt", `{"content":"alpha beta","file_path":"notes.txt"}`,
			`[{"newText":"alpha beta","oldText":null,"path":"notes.txt","type":"diff"}]`, "File created successfully at: notes.txt"},
		{"Edit", "edit", "Edit notes.txt", `{"file_path":"notes.txt","new_string":"gamma","old_string":"beta","replace_all":false}`,
			`[{"newText":"alpha gamma","oldText":"alpha beta","path":"notes.txt","type":"diff"}]`, "has been updated successfully"},
		{"Bash", "execute", "cat notes.txt", `{"command":"cat notes.txt","description":"Run cat notes.txt","timeout":60000}`,
			"alpha gamma", `"alpha gamma"`},
		{"Read", "read", "Read notes.txt", `{"file_path":"notes.txt"}`, "alpha gamma", `"1\talpha gamma"`},
	}
	if len(tools) != len(wants) || len(stepsOf(rec, schemas.StepToolCall)) != len(wants) {
		t.Fatalf("%d completed tool calls of %d, want %d:\n%s", len(tools), len(stepsOf(rec, schemas.StepToolCall)), len(wants), dump(rec))
	}
	for i, w := range wants {
		s := tools[i]
		if s.ToolName != w.tool || s.Kind != w.kind || s.Name != w.title || canon(t, s.Input) != w.input {
			t.Errorf("tool call %d: toolName %q kind %q title %q input %s; want %q %q %q %s", i+1, s.ToolName, s.Kind, s.Name, s.Input, w.tool, w.kind, w.title, w.input)
		}
		if c := canon(t, s.Content); !strings.Contains(c, w.content) {
			t.Errorf("tool call %d (%s): content %s, want %s in it", i+1, w.tool, c, w.content)
		}
		if !strings.Contains(string(s.Output), w.output) {
			t.Errorf("tool call %d (%s): output %s, want %s in it", i+1, w.tool, s.Output, w.output)
		}
	}

	// It ran them itself: no fs/*, terminal/* or permission request came,
	// though initialize offered fs and the terminal; the file is in the
	// workspace copy, on the record as the workspace's changes.
	for _, typ := range []string{schemas.StepFSRead, schemas.StepFSWrite, schemas.StepTerminal, schemas.StepPermission} {
		if n := len(stepsOf(rec, typ)); n > 0 {
			t.Errorf("%d %s steps: %+v", n, typ, stepsOf(rec, typ))
		}
	}
	if !wire.has(true, `"readTextFile":true`) || !wire.has(true, `"terminal":true`) {
		t.Error("initialize did not offer fs and the terminal")
	}
	if !wire.has(false, `"currentModeId":"auto"`) {
		t.Error("session/new did not answer the auto mode (Claude handles permission decisions)")
	}
	if rec.Workspace == nil || len(rec.Workspace.FileChanges) != 1 {
		t.Fatalf("workspace %+v, want notes.txt added", rec.Workspace)
	}
	if c := rec.Workspace.FileChanges[0]; c.Path != "notes.txt" || c.Status != "added" || c.Size != int64(len("alpha gamma")) ||
		!strings.Contains(c.Diff, "new file mode 100644") || !strings.Contains(c.Diff, "\n+alpha gamma\n") {
		t.Errorf("file change %+v", c)
	}
	if b, err := os.ReadFile(filepath.Join(tmpl, "notes.txt")); err == nil {
		t.Errorf("the template was written: %q", b)
	}

	// The final message answers the last tool's result; through a base
	// URL not Anthropic's it also says so in a message of its own.
	msgs := stepsOf(rec, schemas.StepMessage)
	if len(msgs) == 0 || msgs[len(msgs)-1].TextContent() != fakemodel.FinalPrefix+"1\talpha gamma" {
		t.Errorf("messages %+v, the last want %q", msgs, fakemodel.FinalPrefix+"1\talpha gamma")
	}
	if !strings.Contains(rec.Output, "isn't compatible with this update") {
		t.Errorf("output %q: no warning about the base URL", rec.Output)
	}

	// The fake model played the script in order, one call a request.
	var replies []string
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Reply, "tool:") || r.Reply == "final" || r.Reply == "unresolved" {
			if r.Prompt == prompt {
				replies = append(replies, r.Reply)
			}
		}
	}
	if got := strings.Join(replies, " "); got != "tool:Write tool:Edit tool:Bash tool:Read final" {
		t.Errorf("the script's requests: %s", got)
	}
	// Claude Code's after-turn suggestion request (when it came before
	// the run ended) got text, no tool call.
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Prompt, fakemodel.SuggestionMarker) && r.Reply != "suggestion" {
			t.Errorf("a suggestion-mode request was answered %s", r.Reply)
		}
	}

	// Usage and cost are the ledger's: every call with the fake's exact
	// counts, priced by the run's table.
	var calls []schemas.ModelCall
	for _, c := range rec.ModelCalls {
		if c.API == "messages" {
			calls = append(calls, c)
		}
	}
	if len(calls) < len(wants)+1 {
		t.Fatalf("%d messages calls on the ledger, want at least the script's %d: %+v", len(calls), len(wants)+1, rec.ModelCalls)
	}
	each := (float64(gatewayUsage.Input)*price.Input + float64(gatewayUsage.Output)*price.Output +
		float64(gatewayUsage.Cached)*price.CacheRead + float64(gatewayUsage.CacheWrite)*price.CacheWrite) / 1e6
	for i, c := range calls {
		if c.Status != 200 || c.InputTokens == nil || *c.InputTokens != gatewayUsage.Input || c.OutputTokens == nil || *c.OutputTokens != gatewayUsage.Output ||
			c.USD == nil || math.Abs(*c.USD-each) > 1e-12 {
			t.Errorf("call %d: %+v, want %d in and %d out tokens at %g USD", i, c, gatewayUsage.Input, gatewayUsage.Output, each)
		}
	}
	n := int64(len(calls))
	if u := rec.Usage; u == nil || u.InputTokens == nil || *u.InputTokens != n*gatewayUsage.Input || u.OutputTokens == nil || *u.OutputTokens != n*gatewayUsage.Output {
		t.Errorf("usage %+v, want the ledger's sums over %d calls", rec.Usage, n)
	}
	if c := cost.Of(rec, nil, ""); c.USD == nil || math.Abs(*c.USD-float64(n)*each) > 1e-9 || len(c.Unpriced) > 0 {
		t.Errorf("cost %+v, want %g USD", c, float64(n)*each)
	}
	checkNoLeftovers(t, sb)
}

// canon is JSON with its keys sorted, for comparing what agents send.
func canon(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("not JSON: %s", raw)
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
