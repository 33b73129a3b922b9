package realagents

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"harness/capture"
	"harness/harbor"
	"harness/image"
	"harness/sandbox/egress"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// TestClaudeCodeSolvesATaskInItsImage runs Claude Code, installed on the
// host, inside the image of the testdata editing task (fix-greeting),
// which has no internet: it reaches its fake model through the egress
// allowlist, its own Bash tool fixes /app/greet.py in the image, and the
// task's verifier scores the layer it left 1.
func TestClaudeCodeSolvesATaskInItsImage(t *testing.T) {
	needTaskImages(t)
	task, err := harbor.Load("../../testdata/tasks/fix-greeting")
	if err != nil {
		t.Fatal(err)
	}
	if task.Config.AllowInternet {
		t.Fatal("fix-greeting should have allow_internet = false")
	}
	store := &image.Store{Dir: filepath.Join(t.TempDir(), "images")}
	img, err := store.Resolve(context.Background(), task.Image)
	if err != nil {
		t.Fatal(err)
	}
	sb, _, agent := claudeSetup(t, fakemodel.Options{})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Image = &capture.ImageConfig{
		For:      func(*schemas.PromptCase) (*image.Image, *harbor.Task, error) { return img, task, nil },
		LayerDir: t.TempDir(),
		Egress:   egress.NewProxy(egress.DefaultRules(sb.Env, agent), ""),
	}
	fix := `sed -i 's/return "Hello " + name/return "Hello, " + name + "!"/' /app/greet.py && echo fixed-in-image`
	rec := runCases(t, cfg, "bash "+fix)[0]
	if rec.Error != nil {
		t.Fatalf("error %+v\n%s", rec.Error, dump(rec))
	}
	if !strings.Contains(dump(rec), "fixed-in-image") {
		t.Fatalf("the Bash tool did not run:\n%s", dump(rec))
	}
	if rec.Score == nil || rec.Score.Score != 1 || !rec.Score.Pass || len(rec.Score.Checks) != 3 {
		t.Fatalf("verdict %+v", rec.Score)
	}
	if rec.Cwd != "/app" || rec.Provenance.Sandbox == nil || rec.Provenance.Sandbox.Backend != "image" || rec.Provenance.Sandbox.Network != "allow" {
		t.Fatalf("cwd %q, sandbox %+v", rec.Cwd, rec.Provenance.Sandbox)
	}
	var changed []string
	for _, c := range rec.Workspace.FileChanges {
		changed = append(changed, c.Path+" "+c.Status)
	}
	if !strings.Contains(strings.Join(changed, ","), "greet.py modified") {
		t.Fatalf("file changes %v", changed)
	}
}

// needTaskImages skips the test (or fails it, where the real agents are
// required) without podman or the task base image.
func needTaskImages(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil || exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run() != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			t.Fatal("podman or the task base image is missing (scripts/test installs podman and runs scripts/build-base-image)")
		}
		t.Skip("podman or the task base image is missing")
	}
}

// TestClaudeAgentKeepsItsSessionAcrossSteps runs claude-agent-acp, installed
// on the host, in the image of a two-step task (testdata/remember-steps):
// step 1 writes /root/first.txt, step 2 asks to copy "the file you created
// in the previous step", which only the conversation names. The fake model
// finds the file in the history its second turn's requests carry (the Write
// of step 1), so the copy is made only if both steps are turns of one
// session: both steps' tests pass, on a record with one session.
func TestClaudeAgentKeepsItsSessionAcrossSteps(t *testing.T) {
	t.Parallel()
	needTaskImages(t)
	task, err := harbor.Load("testdata/remember-steps")
	if err != nil {
		t.Fatal(err)
	}
	if !task.MultiStep() || len(task.Config.Steps) != 2 || task.Config.AllowInternet {
		t.Fatalf("remember-steps: %d steps, allow_internet %v; want 2 steps and no internet", len(task.Config.Steps), task.Config.AllowInternet)
	}
	store := &image.Store{Dir: filepath.Join(t.TempDir(), "images")}
	img, err := store.Resolve(context.Background(), task.Image)
	if err != nil {
		t.Fatal(err)
	}
	sb, srv, agent := claudeSetupWith(t, testagents.ClaudeAdapters()[1], fakemodel.Options{})
	cfg, wire := baseConfig(t, sb, agent)
	cfg.Image = &capture.ImageConfig{
		For:      func(*schemas.PromptCase) (*image.Image, *harbor.Task, error) { return img, task, nil },
		LayerDir: t.TempDir(),
		Egress:   egress.NewProxy(egress.DefaultRules(sb.Env, agent), ""),
	}
	prompts := task.Prompts()
	c := &schemas.PromptCase{ID: "remember-steps", Input: schemas.Turns{List: prompts, Multi: true}}
	rec := runPromptCases(t, cfg, c)[0]
	if rec.Error != nil || len(rec.StopReasons) != 2 {
		t.Fatalf("error %+v, stop reasons %v\n%s", rec.Error, rec.StopReasons, dump(rec))
	}

	// Both steps played, each passed by its tests; the trial's verdict is
	// their mean.
	if len(rec.TaskSteps) != 2 {
		t.Fatalf("taskSteps %+v, want 2", rec.TaskSteps)
	}
	for i, name := range []string{"create", "copy"} {
		s := rec.TaskSteps[i]
		if s.Name != name || s.Turn != i+1 || s.Reward == nil || *s.Reward != 1 || s.Verdict == nil || !s.Verdict.Pass || s.Error != nil || s.EndedTrial != "" {
			t.Errorf("step %d: %+v (verdict %+v), want %s, turn %d, reward 1", i+1, s, s.Verdict, name, i+1)
		}
	}
	if rec.Score == nil || !rec.Score.Pass || rec.Score.Score != 1 {
		t.Errorf("verdict %+v", rec.Score)
	}

	// One session: one session/new, both prompts sent to it, its id on
	// the record.
	if rec.Session == nil || rec.Session.ID == "" {
		t.Fatalf("session %+v", rec.Session)
	}
	if n := wire.count(true, `"method":"session/new"`); n != 1 {
		t.Errorf("%d session/new requests, want 1", n)
	}
	if n := wire.count(true, `"method":"session/prompt","params":{"sessionId":"`+rec.Session.ID+`"`); n != 2 {
		t.Errorf("%d session/prompt requests to session %s, want 2", n, rec.Session.ID)
	}

	// Each turn's tool call, in the image: the Write of step 1, then the
	// copy of the file it named, with the copy's content as its output.
	var byTurn []string
	for _, s := range stepsOf(rec, schemas.StepToolCall) {
		byTurn = append(byTurn, fmt.Sprintf("%d %s %s %s", s.Turn, s.ToolName, s.Status, s.Input))
	}
	got := strings.Join(byTurn, "\n")
	if len(byTurn) != 2 || !strings.HasPrefix(byTurn[0], `1 Write completed {"file_path":"/root/first.txt"`) ||
		!strings.HasPrefix(byTurn[1], `2 Bash completed {"command":"cp /root/first.txt /root/copy.txt && cat /root/copy.txt"`) {
		t.Errorf("tool calls by turn:\n%s", got)
	}
	msgs := stepsOf(rec, schemas.StepMessage)
	if len(msgs) == 0 || msgs[len(msgs)-1].Turn != 2 || msgs[len(msgs)-1].TextContent() != fakemodel.FinalPrefix+"falcon" {
		t.Errorf("last message %+v, want turn 2's %q", msgs, fakemodel.FinalPrefix+"falcon")
	}

	// The model's second turn saw the first: the request it answered with
	// the copy carries step 1's prompt, its Write and its answer.
	var second *fakemodel.Request
	for _, r := range srv.Requests() {
		if r.Reply == "unresolved" {
			t.Errorf("a request of the session lacked step 1's Write: %s", r.Body)
		}
		if r.Reply == "tool:Bash" && r.Prompt == prompts[1] {
			second = &r
		}
	}
	if second == nil {
		t.Fatal("the fake model never answered step 2's prompt with the copy")
	}
	if h := history(t, second.Body); !strings.Contains(h, "user: "+prompts[0]) || !strings.Contains(h, `assistant tool_use Write {"content":"falcon","file_path":"/root/first.txt"}`) ||
		!strings.Contains(h, "assistant: "+fakemodel.FinalPrefix) || !strings.Contains(h, "user: "+prompts[1]) {
		t.Errorf("step 2's request does not carry step 1's messages:\n%s", h)
	}
}

// history renders the messages of an Anthropic request one block a line:
// "ROLE: TEXT", "ROLE tool_use NAME INPUT", "ROLE tool_result".
func history(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v", err)
	}
	var lines []string
	for _, m := range req.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			lines = append(lines, m.Role+": "+text)
			continue
		}
		var blocks []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			t.Fatalf("message content: %v", err)
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				lines = append(lines, m.Role+": "+b.Text)
			case "tool_use":
				lines = append(lines, m.Role+" tool_use "+b.Name+" "+canon(t, b.Input))
			default:
				lines = append(lines, m.Role+" "+b.Type)
			}
		}
	}
	return strings.Join(lines, "\n")
}
