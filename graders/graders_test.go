package graders

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"harness/schemas"
)

const fixtures = "../testdata/graders"

func fx(p string) string { return filepath.Join(fixtures, p) }

// record builds a capture record with a user turn, a tool call and a final
// message.
func record(output, expected string) *schemas.CaptureRecord {
	dur := int64(12)
	return &schemas.CaptureRecord{
		ID:       "case-1",
		Trial:    2,
		Input:    schemas.SingleTurn("What is 15 + 27?"),
		Output:   output,
		Expected: expected,
		Trajectory: []schemas.Step{
			{Type: schemas.StepThought, StepID: "case-1-t2-s1", Timestamp: 5, Content: json.RawMessage(`"thinking"`)},
			{Type: schemas.StepToolCall, StepID: "case-1-t2-s2", Timestamp: 10, ToolCallID: "call_1", Name: "Read", Kind: "read",
				Status: "completed", Input: json.RawMessage(`{"path":"a.go"}`), Output: json.RawMessage(`"package a"`), Duration: &dur},
			{Type: schemas.StepMessage, StepID: "case-1-t2-s3", Timestamp: 20, Content: mustJSON(output)},
		},
		StopReason: "end_turn",
		Metadata:   map[string]any{"category": "math", "agent": "fake"},
		Timing:     schemas.Timing{Start: 1700000000000, End: 1700000001500, Total: 1500},
		Usage:      &schemas.Usage{InputTokens: ptr(int64(100)), OutputTokens: ptr(int64(20)), Cost: json.RawMessage(`{"amount":0.01,"currency":"USD"}`)},
		Provenance: schemas.Provenance{Harness: "test"},
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func load(t *testing.T, spec string, opts Options) Grader {
	t.Helper()
	g, err := Load(spec, opts)
	if err != nil {
		t.Fatalf("Load(%s): %v", spec, err)
	}
	return g
}

func grade(t *testing.T, g Grader, r *schemas.CaptureRecord) schemas.GraderResult {
	t.Helper()
	return g.Grade(context.Background(), &Input{Record: r})
}

func wantOK(t *testing.T, r schemas.GraderResult, pass bool, score float64) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("unexpected grader error: %+v", r.Error)
	}
	if r.Pass != pass || r.Score != score {
		t.Fatalf("got pass=%v score=%v (reasoning %q), want pass=%v score=%v", r.Pass, r.Score, r.Reasoning, pass, score)
	}
	if r.Grader == "" {
		t.Fatalf("result has no grader name")
	}
}

func wantErr(t *testing.T, r schemas.GraderResult, class, msgPart string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want %s error, got pass=%v score=%v", class, r.Pass, r.Score)
	}
	if r.Error.Class != class {
		t.Fatalf("error class %q, want %q (message %q)", r.Error.Class, class, r.Error.Message)
	}
	if !strings.Contains(r.Error.Message, msgPart) && !strings.Contains(r.Error.Stderr, msgPart) {
		t.Fatalf("error %q (stderr %q) does not mention %q", r.Error.Message, r.Error.Stderr, msgPart)
	}
	if r.Pass {
		t.Fatalf("an errored result must not pass")
	}
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the seed's Python graders need it")
	}
}

// Seed 004: the acp-harness Python grader, verbatim.
func TestSeed004PythonGrader(t *testing.T) {
	needPython(t)
	g := load(t, fx("seed004/grader.py"), Options{})
	if !strings.HasPrefix(g.Name(), "exec:") {
		t.Errorf("name %q", g.Name())
	}
	r := grade(t, g, record("The CEO of Anthropic is Dario Amodei.", "Dario Amodei"))
	wantOK(t, r, true, 1)
	if r.Reasoning != "Contains expected" {
		t.Errorf("reasoning %q", r.Reasoning)
	}
	r = grade(t, g, record("I don't know.", "Dario Amodei"))
	wantOK(t, r, false, 0)
	// expected comes from the prompt case when the record lacks it.
	rec := record("hello world", "")
	r = g.Grade(context.Background(), &Input{Record: rec, Case: &schemas.PromptCase{ID: "case-1", Expected: "planet"}})
	wantOK(t, r, false, 0)
}

// Seed 004: the shell + jq grader, verbatim.
func TestSeed004ShellGrader(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed: the seed's shell grader (grader.sh) pipes through jq; install jq to run this test")
	}
	g := load(t, fx("seed004/grader.sh"), Options{})
	wantOK(t, grade(t, g, record("the answer is 42", "42")), true, 1)
	wantOK(t, grade(t, g, record("the answer is 41", "42")), false, 0)
}

// Seed 004: the TypeScript module grader, verbatim (type-only import).
func TestSeed004TypeScriptGrader(t *testing.T) {
	g := load(t, fx("seed004/my-grader.ts"), Options{})
	r := grade(t, g, record("Paris is the capital", "paris"))
	wantOK(t, r, true, 1)
	if r.Reasoning != "Contains expected answer" {
		t.Errorf("reasoning %q", r.Reasoning)
	}
	wantOK(t, grade(t, g, record("Lyon", "paris")), false, 0)
}

// Seed 004's llm-judge.ts imports a real npm package: a clear load error.
func TestSeed004NPMImportIsALoadError(t *testing.T) {
	_, err := Load(fx("seed004/llm-judge.ts"), Options{})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"llm-judge.ts", `imports "@anthropic-ai/sdk"`, "executable grader"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Seed 001's check_answer.ts reads stdin through "fs": same clear error.
	_, err = Load(fx("seed001/validators/check_answer.ts"), Options{})
	if err == nil || !strings.Contains(err.Error(), `imports "fs"`) {
		t.Fatalf("got %v", err)
	}
}

// Seed 001: agentv's raw-protocol Python validator, verbatim.
func TestSeed001AgentvPython(t *testing.T) {
	needPython(t)
	g := load(t, fx("seed001/check_answer.yaml"), Options{})
	if g.Name() != "script:"+fx("seed001/check_answer.yaml")+"#my_validator" {
		t.Errorf("name %q", g.Name())
	}
	r := grade(t, g, record("The answer is 42.", "42"))
	wantOK(t, r, true, 1)
	if r.Reasoning != "1/1 checks passed" || len(r.Checks) != 1 || r.Checks[0].Reason != "42 appears in the output" {
		t.Errorf("got %+v", r)
	}
	r = grade(t, g, record("The answer is 41.", "42"))
	wantOK(t, r, false, 0)
	if r.Checks[0].Pass {
		t.Errorf("check should fail")
	}
}

// Seed 001: exit-code-only scripts (check-pages.sh with a stand-in pdfinfo,
// and the silent one-liner).
func TestSeed001ExitCodeMode(t *testing.T) {
	bin, _ := filepath.Abs(fx("seed001/bin"))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	g := load(t, fx("seed001/check_pages.yaml"), Options{})
	t.Setenv("FAKE_PDF_PAGES", "7")
	r := grade(t, g, record("done", ""))
	wantOK(t, r, true, 1)
	if len(r.Checks) != 1 || r.Checks[0].Text != "PDF has 7 pages (≥5 required)" {
		t.Errorf("checks %+v", r.Checks)
	}
	t.Setenv("FAKE_PDF_PAGES", "3")
	r = grade(t, g, record("done", ""))
	wantOK(t, r, false, 0)
	if len(r.Checks) != 1 || r.Checks[0].Text != "PDF has only 3 pages (<5 required)" {
		t.Errorf("checks %+v", r.Checks)
	}
	one := load(t, fx("seed001/oneliner.yaml"), Options{})
	r = grade(t, one, record("x", ""))
	wantOK(t, r, true, 1)
	if len(r.Checks) != 0 {
		t.Errorf("silent script has checks %+v", r.Checks)
	}
}

// agentv: non-zero exit without stderr is a fail, with stderr an error.
func TestAgentvExitCodes(t *testing.T) {
	r := grade(t, load(t, fx("errors/agentv-fail.yaml"), Options{}), record("x", ""))
	wantOK(t, r, false, 0)
	if len(r.Checks) != 1 || r.Checks[0].Text != "output lacks the answer" {
		t.Errorf("checks %+v", r.Checks)
	}
	r = grade(t, load(t, fx("errors/agentv-error.yaml"), Options{}), record("x", ""))
	wantErr(t, r, schemas.ErrGraderError, "Traceback: kaboom")
	if r.Error.ExitCode == nil || *r.Error.ExitCode != 2 {
		t.Errorf("exit code %v", r.Error.ExitCode)
	}
}

// The agentv stdin carries every field seed 001 lists, in snake_case.
func TestAgentvPayload(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "stdin.json")
	envDump := filepath.Join(dir, "env.txt")
	cfg := filepath.Join(dir, "g.yaml")
	os.WriteFile(cfg, []byte(`type: script
command: ["sh", "-c", "cat > `+dump+`; echo \"$AGENTV_WORKSPACE_PATH\" > `+envDump+`"]
config: {threshold: 3}
`), 0o644)
	g := load(t, cfg, Options{})
	rec := record("The answer is 42.", "42")
	rec.Workspace = &schemas.Workspace{Path: "/tmp/ws-1", FileChanges: []schemas.FileChange{{Path: "a.go", Status: "modified", Diff: "@@ -1 +1 @@\n-a\n+b\n"}}}
	wantOK(t, grade(t, g, rec), true, 1)
	var p map[string]any
	b, _ := os.ReadFile(dump)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"input", "input_files", "output", "expected_output", "messages", "trace", "trace_summary",
		"token_usage", "cost_usd", "duration_ms", "start_time", "end_time", "file_changes", "workspace_path", "criteria", "config", "metadata"} {
		if _, ok := p[k]; !ok {
			t.Errorf("agentv payload lacks %q", k)
		}
	}
	if p["output"] != "The answer is 42." || p["criteria"] != "42" || p["workspace_path"] != "/tmp/ws-1" || p["cost_usd"] != 0.01 || p["duration_ms"] != 1500.0 {
		t.Errorf("payload %s", b)
	}
	if got := mustJSON(p["input"]); string(got) != `[{"content":"What is 15 + 27?","role":"user"}]` {
		t.Errorf("input %s", got)
	}
	if got := mustJSON(p["expected_output"]); string(got) != `[{"content":"42","role":"assistant"}]` {
		t.Errorf("expected_output %s", got)
	}
	if got := mustJSON(p["trace_summary"]); string(got) != `{"error_count":0,"event_count":1,"llm_call_count":2,"tool_calls":{"Read":1}}` {
		t.Errorf("trace_summary %s", got)
	}
	if got := mustJSON(p["token_usage"]); string(got) != `{"input":100,"output":20}` {
		t.Errorf("token_usage %s", got)
	}
	if fc, _ := p["file_changes"].(string); !strings.HasPrefix(fc, "--- a/a.go\n+++ b/a.go\n@@") {
		t.Errorf("file_changes %q", fc)
	}
	if p["start_time"] != "2023-11-14T22:13:20.000Z" {
		t.Errorf("start_time %v", p["start_time"])
	}
	msgs := string(mustJSON(p["messages"]))
	if !strings.Contains(msgs, `"tool_calls":[{"duration_ms":12,"id":"call_1","input":{"path":"a.go"},"output":"package a","status":"completed","tool":"Read"}]`) {
		t.Errorf("messages %s", msgs)
	}
	env, _ := os.ReadFile(envDump)
	if strings.TrimSpace(string(env)) != "/tmp/ws-1" {
		t.Errorf("AGENTV_WORKSPACE_PATH=%q", env)
	}
}

// The acp-harness stdin carries every field of the design contract.
func TestExecutablePayload(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "stdin.json")
	script := filepath.Join(dir, "g.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ncat > "+dump+"\necho '{\"pass\":true,\"score\":1}'\n"), 0o755)
	rec := record("out", "exp")
	rec.Hint = "a hint"
	rec.Workspace = &schemas.Workspace{Path: "/tmp/ws", FileChanges: []schemas.FileChange{{Path: "x", Status: "added", Size: 1}}}
	r := load(t, script, Options{}).Grade(context.Background(), &Input{Record: rec, Case: &schemas.PromptCase{Reference: "ref"}})
	wantOK(t, r, true, 1)
	var p map[string]any
	b, _ := os.ReadFile(dump)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"input", "output", "expected", "hint", "reference", "trajectory", "metadata", "id", "trial",
		"cwd", "workspacePath", "fileChanges", "stopReason", "timing", "usage"} {
		if _, ok := p[k]; !ok {
			t.Errorf("payload lacks %q", k)
		}
	}
	if p["input"] != "What is 15 + 27?" || p["expected"] != "exp" || p["hint"] != "a hint" || p["reference"] != "ref" ||
		p["trial"] != 2.0 || p["workspacePath"] != "/tmp/ws" || p["stopReason"] != "end_turn" {
		t.Errorf("payload %s", b)
	}
	if tr, _ := p["trajectory"].([]any); len(tr) != 3 {
		t.Errorf("trajectory %v", p["trajectory"])
	}
}

// Every way an executable grader can fail has its class.
func TestExecutableErrors(t *testing.T) {
	cases := []struct {
		file, class, msg string
	}{
		{"crash.sh", schemas.ErrGraderError, "boom: grader crashed"},
		{"garbage.sh", schemas.ErrGraderInvalid, "not JSON"},
		{"empty.sh", schemas.ErrGraderInvalid, "no output"},
		{"outofrange.sh", schemas.ErrGraderInvalid, "outside 0..1"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r := grade(t, load(t, fx("errors/"+c.file), Options{}), record("x", ""))
			wantErr(t, r, c.class, c.msg)
		})
	}
	r := grade(t, load(t, fx("errors/crash.sh"), Options{}), record("x", ""))
	if r.Error.ExitCode == nil || *r.Error.ExitCode != 3 || !strings.Contains(r.Error.Stderr, "boom") {
		t.Errorf("crash error %+v", r.Error)
	}
	// Debug lines before the result are tolerated: the last line is the result.
	wantOK(t, grade(t, load(t, fx("errors/noisy.sh"), Options{}), record("x", "")), false, 0.25)
}

// A hanging grader times out and its whole process group is killed.
func TestExecutableTimeoutKillsGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	t.Setenv("HANG_PIDFILE", pidfile)
	g := load(t, fx("errors/hang.sh"), Options{Timeout: 300 * time.Millisecond})
	start := time.Now()
	r := grade(t, g, record("x", ""))
	wantErr(t, r, schemas.ErrGraderTimeout, "did not finish within 300ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(3 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		// A zombie awaiting its reaper counts as gone.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grader's child %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecutableLoadErrors(t *testing.T) {
	if _, err := Load(fx("nope.py"), Options{}); err == nil || !strings.Contains(err.Error(), "nope.py") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(fx("seed001/validators/check_answer.py"), Options{}); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("non-executable file: %v", err)
	}
}

// Many: pass only if all pass, score is the mean, sub-results kept.
func TestMany(t *testing.T) {
	g := Many([]Grader{load(t, fx("errors/ok.sh"), Options{}), load(t, fx("errors/noisy.sh"), Options{})})
	r := grade(t, g, record("x", ""))
	wantOK(t, r, false, 0.625)
	subs, _ := r.Outcome["graders"].([]schemas.GraderResult)
	if len(subs) != 2 || !subs[0].Pass || subs[1].Score != 0.25 || len(r.Checks) != 2 {
		t.Errorf("outcome %+v", r.Outcome)
	}
	if len(Graders(g)) != 2 {
		t.Errorf("Graders")
	}
	r = grade(t, Many([]Grader{load(t, fx("errors/ok.sh"), Options{}), load(t, fx("errors/crash.sh"), Options{})}), record("x", ""))
	wantErr(t, r, schemas.ErrGraderError, "1 of 2 graders failed")
}

// TestAgentvLLMCallCount: every assistant turn is a model call, one that
// only called a tool included (the thought and the Read here, then the
// answer: two calls).
func TestAgentvLLMCallCount(t *testing.T) {
	p := agentvPayload(&Input{Record: record("42", "")}, nil)
	sum := p["trace_summary"].(map[string]any)
	if sum["llm_call_count"] != 2 || sum["event_count"] != 1 {
		t.Errorf("trace_summary = %v", sum)
	}
}
