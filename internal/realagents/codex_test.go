package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// codexSetup finds codex-acp's native binary, starts a fake OpenAI
// Responses server and a sandbox pointing the agent at it.
func codexSetup(t *testing.T, opts fakemodel.Options) (*sandbox, *fakemodel.Server, []string) {
	t.Helper()
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	bin := agentFile(t, fmt.Sprintf("@zed-industries/codex-acp-%s-%s/bin/codex-acp", runtime.GOOS, arch), false)
	srv := startModel(t, fakemodel.OpenAIResponses, opts)
	sb := newSandbox(t, "FAKE_OPENAI_KEY=dummy")
	codexHome := filepath.Join(sb.Home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatalf("making CODEX_HOME: %v", err)
	}
	sb.Env = append(sb.Env, "CODEX_HOME="+codexHome)
	return sb, srv, []string{bin,
		"-c", "model_provider=fake",
		"-c", `model="gpt-5.3-codex"`,
		"-c", fmt.Sprintf(`model_providers.fake={name="fake", base_url="%s/v1", env_key="FAKE_OPENAI_KEY", wire_api="responses"}`, srv.URL),
		// There is no bubblewrap here: the default read-only sandbox
		// would fail every command.
		"-c", `sandbox_mode="danger-full-access"`,
		// Ask before commands not known to be safe (apply_patch, touch).
		"-c", `approval_policy="untrusted"`,
	}
}

// TestCodex drives Codex: it runs commands and edits files itself (it
// ignores the client's fs and terminal), asks permission with string
// request ids, and reports plans.
func TestCodex(t *testing.T) {
	t.Parallel()
	sb, srv, agent := codexSetup(t, fakemodel.Options{})
	cfg, wire := baseConfig(t, sb, agent)
	cfg.Client.FS = &acp.FSOptions{}
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: 30 * time.Second, Env: sb.Env}
	made := filepath.Join(sb.Cwd, "made.txt")
	recs := runCases(t, cfg,
		"bash echo hello-from-codex",
		"write "+made+" made-by-codex",
		"plan the work",
	)

	// 1. A safe command: run at once, no permission request.
	rec := recs[0]
	tools := checkTurn(t, rec, true, true, "hello-from-codex")
	if len(tools) > 0 && (tools[0].Kind != "execute" || !strings.Contains(toolOutput(tools[0]), "hello-from-codex")) {
		t.Errorf("exec tool call = %+v", tools[0])
	}
	if n := len(stepsOf(rec, schemas.StepTerminal)) + len(stepsOf(rec, schemas.StepFSRead)); n != 0 {
		t.Errorf("%d terminal/fs steps: codex-acp 0.16.0 was seen doing its own work", n)
	}
	if rec.Usage == nil || rec.Usage.Used == nil || *rec.Usage.Used != 120 || len(stepsOf(rec, schemas.StepUsage)) == 0 {
		t.Errorf("usage %+v: want the usage_update codex-acp sends (120 tokens used, as the fake model reported)", rec.Usage)
	}
	for _, s := range stepsOf(rec, schemas.StepUsage) {
		// README: usage steps carry update (the update kind) and raw.
		if s.Update != "usage_update" || len(s.Raw) == 0 {
			t.Errorf("usage step: update %q, raw %s; want update \"usage_update\" and the raw update", s.Update, s.Raw)
			break
		}
	}
	if rec.Provenance.AgentName != "codex-acp" || rec.Provenance.AgentVersion != "0.16.0" {
		t.Errorf("provenance = %+v", rec.Provenance)
	}

	// 2. apply_patch: an edit tool call and a permission request whose
	// JSON-RPC id is a string.
	rec = recs[1]
	tools = checkTurn(t, rec, true, true, "")
	if len(tools) > 0 && tools[0].Kind != "edit" {
		t.Errorf("edit tool call = %+v", tools[0])
	}
	perms := stepsOf(rec, schemas.StepPermission)
	if len(perms) == 0 || perms[0].Outcome != "selected" {
		t.Errorf("permission steps = %+v", perms)
	}
	if b, err := os.ReadFile(made); err != nil || strings.TrimSpace(string(b)) != "made-by-codex" {
		t.Errorf("made file: %q, %v", b, err)
	}
	if !stringIDAnswered(wire) {
		t.Error("no answer to a request with a string id on the wire")
	}

	// 3. update_plan: a plan update, and no tool call.
	rec = recs[2]
	checkTurn(t, rec, true, false, "Plan updated")
	var plan []map[string]any
	if err := json.Unmarshal(rec.Plan, &plan); err != nil || len(plan) != 3 || len(stepsOf(rec, schemas.StepPlan)) == 0 {
		t.Errorf("plan %s (%v), %d plan steps", rec.Plan, err, len(stepsOf(rec, schemas.StepPlan)))
	}

	checkRequests(t, srv, "exec_command", checkOpenAIRequest)
	checkNoLeftovers(t, sb)
}

// stringIDAnswered reports whether the client answered a request whose id
// is a JSON string.
func stringIDAnswered(w *wireLog) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		_, msg, ok := strings.Cut(l, " c2a ")
		if !ok {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(msg), &m) == nil && len(m.ID) > 0 && m.ID[0] == '"' && len(m.Result) > 0 {
			return true
		}
	}
	return false
}

// checkOpenAIRequest checks the shape of a main-turn request.
func checkOpenAIRequest(r fakemodel.Request) error {
	if r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer dummy" {
		return fmt.Errorf("path %q, authorization %q", r.Path, r.Header.Get("Authorization"))
	}
	var body struct {
		Stream bool `json:"stream"`
		Input  []struct {
			Type string `json:"type"`
			Role string `json:"role"`
		} `json:"input"`
		Tools []struct {
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
	if !body.Stream || len(body.Input) == 0 || !strings.Contains(" "+strings.Join(names, " ")+" ", " exec_command ") {
		return fmt.Errorf("stream %v, %d input items, tools %v", body.Stream, len(body.Input), names)
	}
	return nil
}
