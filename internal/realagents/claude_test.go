package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// claudeSetup finds @zed-industries/claude-code-acp, starts a fake
// Anthropic server and a sandbox pointing the agent at it.
func claudeSetup(t *testing.T, opts fakemodel.Options) (*sandbox, *fakemodel.Server, []string) {
	t.Helper()
	return claudeSetupWith(t, testagents.ClaudeAdapters()[0], opts)
}

// claudeSetupWith is claudeSetup with one of Claude Code's ACP adapters.
func claudeSetupWith(t *testing.T, a testagents.ClaudeAdapter, opts fakemodel.Options) (*sandbox, *fakemodel.Server, []string) {
	t.Helper()
	script := nodeAgent(t, a.Script)
	srv := startModel(t, fakemodel.Anthropic, opts)
	sb := newSandbox(t)
	sb.Env = append(sb.Env,
		"ANTHROPIC_BASE_URL="+srv.URL,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CONFIG_DIR="+filepath.Join(sb.Home, ".claude"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	)
	return sb, srv, []string{"node", script}
}

// TestClaudeCode drives Claude Code with the client's fs and terminal
// switched on: its shell runs through terminal/*, its Read and Write
// through fs/*.
func TestClaudeCode(t *testing.T) {
	t.Parallel()
	a := testagents.ClaudeAdapters()[0]
	sb, srv, agent := claudeSetupWith(t, a, fakemodel.Options{})
	cfg, wire := baseConfig(t, sb, agent)
	cfg.Client.FS = &acp.FSOptions{}
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: 30 * time.Second, Env: sb.Env}
	notes := sb.write(t, "notes.txt", "alpha beta gamma\n")
	out := filepath.Join(sb.Cwd, "out.txt")
	recs := runCases(t, cfg,
		"bash echo hello-from-terminal",
		"read "+notes,
		"write "+out+" written-by-claude",
		"plan the work",
	)

	// 1. Shell through terminal/*.
	rec := recs[0]
	tools := checkTurn(t, rec, true, true, "hello-from-terminal")
	if len(tools) > 0 && (tools[0].Kind != "execute" || !strings.Contains(toolOutput(tools[0]), "hello-from-terminal")) {
		t.Errorf("bash tool call = %+v", tools[0])
	}
	var methods []string
	for _, s := range stepsOf(rec, schemas.StepTerminal) {
		methods = append(methods, s.Method)
		if s.Method == acp.MethodTerminalCreate && s.Command != "echo hello-from-terminal" {
			t.Errorf("terminal/create command %q", s.Command)
		}
		if s.Method == acp.MethodTerminalOutput && !strings.Contains(s.Text, "hello-from-terminal") {
			t.Errorf("terminal/output text %q", s.Text)
		}
	}
	for _, m := range []string{acp.MethodTerminalCreate, acp.MethodTerminalWaitForExit, acp.MethodTerminalOutput, acp.MethodTerminalRelease} {
		if !strings.Contains(strings.Join(methods, " "), m) {
			t.Errorf("no %s step; terminal steps: %v", m, methods)
		}
	}
	if rec.Provenance.AgentName != a.Package || rec.Provenance.AgentVersion != a.Version {
		t.Errorf("provenance = %+v", rec.Provenance)
	}

	// 2. Read through fs/read_text_file.
	rec = recs[1]
	tools = checkTurn(t, rec, true, true, "alpha beta gamma")
	if len(tools) > 0 && tools[0].Kind != "read" {
		t.Errorf("read tool call = %+v", tools[0])
	}
	reads := stepsOf(rec, schemas.StepFSRead)
	if len(reads) == 0 || reads[0].Path != notes || reads[0].Allowed == nil || !*reads[0].Allowed {
		t.Errorf("fs_read steps = %+v", reads)
	}

	// 3. Write through a permission request and fs/write_text_file.
	rec = recs[2]
	checkTurn(t, rec, true, true, "")
	writes := stepsOf(rec, schemas.StepFSWrite)
	if len(writes) == 0 || writes[0].Path != out || writes[0].Allowed == nil || !*writes[0].Allowed {
		t.Errorf("fs_write steps = %+v", writes)
	}
	if perms := stepsOf(rec, schemas.StepPermission); len(perms) == 0 || perms[0].Outcome != "selected" {
		t.Errorf("permission steps = %+v", perms)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "written-by-claude" {
		t.Errorf("written file: %q, %v", b, err)
	}

	// 4. TodoWrite: a plan update, and no tool call.
	rec = recs[3]
	checkTurn(t, rec, true, false, "Todos have been modified")
	var plan []map[string]any
	if err := json.Unmarshal(rec.Plan, &plan); err != nil || len(plan) != 3 || len(stepsOf(rec, schemas.StepPlan)) == 0 {
		t.Errorf("plan %s (%v), %d plan steps", rec.Plan, err, len(stepsOf(rec, schemas.StepPlan)))
	}

	// The fake model saw Claude Code's main turns with the ACP tools.
	checkRequests(t, srv, "mcp__acp__Bash", checkAnthropicRequest)
	if !wire.has(true, `"terminal":true`) {
		t.Error("initialize did not advertise the terminal")
	}
	checkNoLeftovers(t, sb)
}

// checkAnthropicRequest checks the shape of a main-turn request.
func checkAnthropicRequest(r fakemodel.Request) error {
	if r.Path != "/v1/messages" || r.Header.Get("x-api-key") != "dummy" || r.Header.Get("anthropic-version") == "" {
		return fmt.Errorf("path %q, x-api-key %q, anthropic-version %q", r.Path, r.Header.Get("x-api-key"), r.Header.Get("anthropic-version"))
	}
	var body struct {
		Stream bool `json:"stream"`
		Tools  []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Name)
	}
	if !body.Stream || !strings.Contains(" "+strings.Join(names, " ")+" ", " mcp__acp__Read ") {
		return fmt.Errorf("stream %v, tools %v", body.Stream, names)
	}
	return nil
}

// TestClaudeCodeAdapters runs a shell turn and a plain answer on each of
// Claude Code's ACP adapters, through the model gateway: the tool call and
// the answer on the record, the model calls on the ledger, and nothing of
// the agent's on no record (claude-agent-acp's usage_update and its
// sessionless _auth/status_update included).
func TestClaudeCodeAdapters(t *testing.T) {
	t.Parallel()
	for _, a := range testagents.ClaudeAdapters() {
		t.Run(a.Package, func(t *testing.T) {
			t.Parallel()
			sb, srv, agent := claudeSetupWith(t, a, fakemodel.Options{Usage: &gatewayUsage})
			cfg, _ := baseConfig(t, sb, agent)
			cfg.Gateway = startGateway(t)
			var mu sync.Mutex
			var strays []capture.Stray
			cfg.Log = func(s capture.Stray) {
				mu.Lock()
				strays = append(strays, s)
				mu.Unlock()
			}
			recs := runCases(t, cfg, "bash echo hello-adapter", "bash echo second-case")
			for _, rec := range recs {
				checkTurn(t, rec, true, true, "")
				if rec.Provenance.AgentName != a.Package || rec.Provenance.AgentVersion != a.Version {
					t.Errorf("provenance = %+v", rec.Provenance)
				}
				if len(rec.ModelCalls) == 0 || rec.Usage == nil {
					t.Errorf("case %s: %d model calls, usage %+v", rec.ID, len(rec.ModelCalls), rec.Usage)
				}
				// claude-agent-acp reports its context window in
				// usage_update: the agent's report, kept beside the
				// ledger's sums.
				if a.Version == "0.101.0" && (rec.AgentUsage == nil || rec.AgentUsage.Used == nil || rec.AgentUsage.Size == nil) {
					t.Errorf("case %s: agent's usage %+v, want usage_update's used and size", rec.ID, rec.AgentUsage)
				}
			}
			if !strings.Contains(recs[0].Output, "hello-adapter") || len(srv.Requests()) == 0 {
				t.Errorf("output %q", recs[0].Output)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range strays {
				// A session's title (session_info_update) may come
				// after its turn ended: that one is on no record.
				if strings.Contains(s.What, "usage_update") || strings.Contains(s.What, "_auth/") || s.SessionID == "" {
					t.Errorf("a message on no record: %+v", s)
				}
			}
		})
	}
}
