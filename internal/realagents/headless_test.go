package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"harness/capture"
	"harness/headless"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// runHeadless runs cases (of one or more turns) on a headless agent and
// returns the records in case order.
func runHeadless(t *testing.T, cfg capture.Config, adapter string, cases ...schemas.PromptCase) []*schemas.CaptureRecord {
	t.Helper()
	a, err := headless.Lookup(adapter)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Adapter = a
	return runPromptCases(t, cfg, casePointers(cases)...)
}

// casePointers points at each of cases.
func casePointers(cases []schemas.PromptCase) []*schemas.PromptCase {
	out := make([]*schemas.PromptCase, len(cases))
	for i := range cases {
		out[i] = &cases[i]
	}
	return out
}

func single(id, input string) schemas.PromptCase {
	return schemas.PromptCase{ID: id, Input: schemas.SingleTurn(input)}
}

func multi(id string, turns ...string) schemas.PromptCase {
	return schemas.PromptCase{ID: id, Input: schemas.Turns{List: turns, Multi: true}}
}

// checkHeadlessTool checks a headless record's one tool call: its name,
// kind and input, and that its output holds want.
func checkHeadlessTool(t *testing.T, rec *schemas.CaptureRecord, name, kind, inputHas, want string) {
	t.Helper()
	tools := stepsOf(rec, schemas.StepToolCall)
	if len(tools) == 0 {
		t.Fatalf("case %s: no tool call\n%s", rec.ID, dump(rec))
	}
	tc := tools[0]
	if tc.Name != name || tc.ToolName != name || tc.Kind != kind || tc.Status != "completed" ||
		!strings.Contains(string(tc.Input), inputHas) || !strings.Contains(toolOutput(tc), want) {
		t.Errorf("case %s: tool call %+v; want %s (%s) with input %q, completed, output with %q", rec.ID, tc, name, kind, inputHas, want)
	}
}

// checkMultiTurn checks that the second turn ran in the first turn's
// session: the model saw the first turn's prompt again in its history.
func checkMultiTurn(t *testing.T, rec *schemas.CaptureRecord, srv *fakemodel.Server, second string) {
	t.Helper()
	if rec.Error != nil || len(rec.StopReasons) != 2 || rec.Session == nil || rec.Session.ID == "" {
		t.Fatalf("case %s: error %+v, stops %v, session %+v\n%s", rec.ID, rec.Error, rec.StopReasons, rec.Session, dump(rec))
	}
	var turns []int
	for _, s := range rec.Trajectory {
		turns = append(turns, s.Turn)
	}
	if !slices.Contains(turns, 1) || !slices.Contains(turns, 2) {
		t.Errorf("case %s: steps of turns %v, want both turns", rec.ID, turns)
	}
	if !strings.Contains(rec.Output, second) {
		t.Errorf("case %s: output %q is not the second turn's (%q)", rec.ID, rec.Output, second)
	}
	resumed := false
	for _, r := range srv.Requests() {
		if strings.Contains(r.Prompt, second) && strings.Contains(string(r.Body), "hello-turn-one") {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("case %s: no request of turn 2 carried turn 1's history: the session was not continued", rec.ID)
	}
}

// TestClaudeHeadless drives Claude Code's own CLI (claude -p
// --output-format stream-json) with --adapter claude-stream-json: thoughts,
// messages, tool calls with input and result, plans, usage and cost, and a
// second turn continued with --resume.
func TestClaudeHeadless(t *testing.T) {
	t.Parallel()
	script := nodeAgent(t, "@anthropic-ai/claude-agent-sdk/cli.js")
	srv := startModel(t, fakemodel.Anthropic, fakemodel.Options{})
	sb := newSandbox(t,
		"ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
	)
	sb.Env = append(sb.Env, "CLAUDE_CONFIG_DIR="+filepath.Join(sb.Home, ".claude"))
	notes := sb.write(t, "notes.txt", "alpha beta\n")
	cfg, _ := baseConfig(t, sb, []string{"node", script})
	recs := runHeadless(t, cfg, headless.ClaudeStreamJSON,
		single("bash", "bash echo hello-claude"),
		single("read", "read "+notes),
		single("plan", "plan the work"),
		multi("two", "bash echo hello-turn-one", "bash echo hello-turn-two"),
	)
	rec := recs[0]
	checkTurn(t, rec, true, true, "hello-claude")
	checkHeadlessTool(t, rec, "Bash", "execute", "echo hello-claude", "hello-claude")
	if rec.Provenance.AgentName != "claude-code" || rec.Provenance.AgentVersion == "" || rec.Session == nil {
		t.Errorf("provenance %+v, session %+v", rec.Provenance, rec.Session)
	}
	if u := rec.Usage; u == nil || u.InputTokens == nil || *u.InputTokens == 0 || u.OutputTokens == nil || len(u.Cost) == 0 {
		t.Errorf("usage %+v: want the tokens and cost of the result event", u)
	}
	checkHeadlessTool(t, recs[1], "Read", "read", notes, "alpha beta")
	if p := recs[2]; len(stepsOf(p, schemas.StepPlan)) == 0 || !strings.Contains(string(p.Plan), "completed") {
		t.Errorf("plan case: plan %s, steps %+v", p.Plan, stepsOf(p, schemas.StepPlan))
	}
	checkMultiTurn(t, recs[3], srv, "hello-turn-two")
}

// TestCodexHeadless drives the Codex CLI (codex exec --json) with --adapter
// codex-json: reasoning, messages, commands with their output, usage, and
// a second turn continued with exec resume. (codex exec offers the model no
// plan tool; todo_list items are mapped to plans in headless's tests.)
func TestCodexHeadless(t *testing.T) {
	t.Parallel()
	bin := agentFile(t, "@openai/codex/bin/codex.js", true)
	srv := startModel(t, fakemodel.OpenAIResponses, fakemodel.Options{})
	sb := newSandbox(t, "FAKE_OPENAI_KEY=dummy")
	codexHome := filepath.Join(sb.Home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	sb.Env = append(sb.Env, "CODEX_HOME="+codexHome)
	agent := []string{"node", bin,
		"-c", "model_provider=fake", "-c", `model="gpt-5.3-codex"`,
		"-c", fmt.Sprintf(`model_providers.fake={name="fake", base_url="%s/v1", env_key="FAKE_OPENAI_KEY", wire_api="responses"}`, srv.URL),
		"-c", `sandbox_mode="danger-full-access"`,
	}
	cfg, _ := baseConfig(t, sb, agent)
	recs := runHeadless(t, cfg, headless.CodexJSON,
		single("bash", "bash echo hello-codex"),
		multi("two", "bash echo hello-turn-one", "bash echo hello-turn-two"),
	)
	rec := recs[0]
	checkTurn(t, rec, true, true, "hello-codex")
	checkHeadlessTool(t, rec, "shell", "execute", "echo hello-codex", "hello-codex")
	if u := rec.Usage; u == nil || u.InputTokens == nil || *u.InputTokens == 0 || u.ThoughtTokens == nil {
		t.Errorf("usage %+v: want the tokens of turn.completed", u)
	}
	if rec.Session == nil || rec.Session.ID == "" {
		t.Errorf("no session: %+v", rec.Session)
	}
	checkMultiTurn(t, recs[1], srv, "hello-turn-two")
}

// TestGeminiHeadless drives Gemini CLI (gemini --output-format stream-json)
// with --adapter gemini-stream-json: messages, tool calls with input and
// result, usage, and a second turn continued with --resume.
func TestGeminiHeadless(t *testing.T) {
	t.Parallel()
	script := nodeAgent(t, "@google/gemini-cli/bundle/gemini.js")
	srv := startModel(t, fakemodel.Gemini, fakemodel.Options{})
	sb := newSandbox(t, "GOOGLE_GEMINI_BASE_URL="+srv.URL, "GEMINI_API_KEY=dummy", "GEMINI_CLI_NO_RELAUNCH=true", "GEMINI_CLI_TRUST_WORKSPACE=true")
	// Headless, Gemini CLI takes the auth type from its settings.
	if err := os.MkdirAll(filepath.Join(sb.Home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sb.Home, ".gemini", "settings.json"), []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	notes := sb.write(t, "notes.txt", "alpha beta\n")
	cfg, _ := baseConfig(t, sb, []string{"node", script, "--yolo"})
	recs := runHeadless(t, cfg, headless.GeminiStreamJSON,
		single("bash", "bash echo hello-gemini"),
		single("read", "read "+notes),
		multi("two", "bash echo hello-turn-one", "bash echo hello-turn-two"),
	)
	rec := recs[0]
	checkTurn(t, rec, false, true, "hello-gemini")
	checkHeadlessTool(t, rec, "run_shell_command", "execute", "echo hello-gemini", "hello-gemini")
	if u := rec.Usage; u == nil || u.InputTokens == nil || *u.InputTokens == 0 {
		t.Errorf("usage %+v: want the tokens of the result event", u)
	}
	// Gemini CLI's stream-json leaves a read's content out of tool_result.
	checkHeadlessTool(t, recs[1], "read_file", "read", notes, "")
	checkMultiTurn(t, recs[2], srv, "hello-turn-two")
}
