package realagents

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/internal/buildinfo"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// agentFile and nodeAgent find the npm-installed agents (skipping, or
// failing on CI, when they are missing).
func agentFile(t *testing.T, rel string, needNode bool) string {
	t.Helper()
	return testagents.File(t, rel, needNode)
}

func nodeAgent(t *testing.T, rel string) string {
	t.Helper()
	return testagents.NodeScript(t, rel)
}

// sandbox is the isolated world one agent runs in: a scratch HOME, a
// session directory and a minimal environment.
type sandbox struct {
	Home string
	Cwd  string
	Tmp  string
	Env  []string
}

// newSandbox makes a scratch HOME, TMPDIR and cwd under t.TempDir. The environment
// holds PATH (from the test process, to find node and sh), HOME, a neutral
// locale and extra; nothing else of the caller's environment leaks in.
func newSandbox(t *testing.T, extra ...string) *sandbox {
	t.Helper()
	root := t.TempDir()
	sb := &sandbox{Home: filepath.Join(root, "home"), Cwd: filepath.Join(root, "work"), Tmp: filepath.Join(root, "tmp")}
	for _, d := range []string{sb.Home, sb.Cwd, sb.Tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("making %s: %v", d, err)
		}
	}
	// Resolve symlinks so that the paths agents report match ours.
	for _, p := range []*string{&sb.Home, &sb.Cwd, &sb.Tmp} {
		if r, err := filepath.EvalSymlinks(*p); err == nil {
			*p = r
		}
	}
	sb.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + sb.Home,
		"TMPDIR=" + sb.Tmp,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
	}, extra...)
	return sb
}

// write creates a file in the session directory and returns its path.
func (sb *sandbox) write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(sb.Cwd, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatalf("writing %s: %v", p, err)
	}
	return p
}

// wireLog keeps every ACP line in both directions, to print when a test
// fails.
type wireLog struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (w *wireLog) tap(out bool, at time.Time, line []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.IsZero() {
		w.start = at
	}
	dir := "a2c"
	if out {
		dir = "c2a"
	}
	l := string(line)
	if len(l) > 2000 {
		l = l[:2000] + "…"
	}
	w.lines = append(w.lines, fmt.Sprintf("%6dms %s %s", at.Sub(w.start).Milliseconds(), dir, strings.TrimSpace(l)))
}

// has reports whether some line in the given direction contains s.
func (w *wireLog) has(out bool, s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir := " a2c "
	if out {
		dir = " c2a "
	}
	for _, l := range w.lines {
		if strings.Contains(l, dir) && strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// count is how many lines in the given direction contain s.
func (w *wireLog) count(out bool, s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir := " a2c "
	if out {
		dir = " c2a "
	}
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, dir) && strings.Contains(l, s) {
			n++
		}
	}
	return n
}

func (w *wireLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// baseConfig is a capture config for agent in sb, with generous timeouts
// and a wire log and stderr copy that are printed if the test fails (or
// always, with REALAGENTS_VERBOSE set).
func baseConfig(t *testing.T, sb *sandbox, agent []string) (capture.Config, *wireLog) {
	t.Helper()
	wire := &wireLog{}
	stderr := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("REALAGENTS_VERBOSE") != "" {
			t.Logf("ACP wire log:\n%s", wire)
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	return capture.Config{
		Agent:          agent,
		AgentEnv:       sb.Env,
		AgentDir:       sb.Cwd,
		Cwd:            sb.Cwd,
		TurnTimeout:    60 * time.Second,
		StartupTimeout: 60 * time.Second,
		// Claude Code and Codex ignore stdin EOF: this is also how long
		// shutdown waits before SIGTERM.
		CancelGrace: 3 * time.Second,
		Settle:      300 * time.Millisecond,
		Build:       buildinfo.Info{Version: "test"},
		StderrCopy:  stderr,
		Client: acp.Options{
			ClientInfo: acp.Implementation{Name: "harness-realagents-test", Version: "0"},
			Permission: acp.PolicyAllow,
			Tap:        wire.tap,
		},
	}, wire
}

// lockedBuffer collects an agent's stderr, capped at 1 MiB.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) < 1<<20 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// runCases runs one case per input on one agent process and returns the
// records in input order.
func runCases(t *testing.T, cfg capture.Config, inputs ...string) []*schemas.CaptureRecord {
	t.Helper()
	var cases []*schemas.PromptCase
	for i, in := range inputs {
		cases = append(cases, &schemas.PromptCase{ID: fmt.Sprintf("c%d", i+1), Input: schemas.SingleTurn(in)})
	}
	return runPromptCases(t, cfg, cases...)
}

// runPromptCases runs the cases, trial 1 each, on one agent process and
// returns the records in the cases' order.
func runPromptCases(t *testing.T, cfg capture.Config, cases ...*schemas.PromptCase) []*schemas.CaptureRecord {
	t.Helper()
	var units []capture.Unit
	for _, c := range cases {
		units = append(units, capture.Unit{Case: c, Trial: 1})
	}
	r := capture.NewRunner(cfg)
	ctx := context.Background()
	start := time.Now()
	init, err := r.Preflight(ctx)
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	t.Logf("initialize answered after %s (agent %+v)", time.Since(start).Round(time.Millisecond), init.AgentInfo)
	var mu sync.Mutex
	byID := map[string]*schemas.CaptureRecord{}
	_, err = r.Run(ctx, slices.Values(units), func(rec *schemas.CaptureRecord) error {
		if _, err := json.Marshal(rec); err != nil {
			t.Errorf("record %s does not encode: %v", rec.ID, err)
		}
		mu.Lock()
		byID[rec.ID] = rec
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	out := make([]*schemas.CaptureRecord, len(units))
	for i, u := range units {
		rec := byID[u.Case.ID]
		if rec == nil {
			t.Fatalf("no record for case %s", u.Case.ID)
		}
		t.Logf("case %s %q: stopReason %q, %d steps, session/new %d ms, total %d ms",
			rec.ID, u.Case.Input.List, rec.StopReason, len(rec.Trajectory), rec.Timing.SessionCreation, rec.Timing.Total)
		if os.Getenv("REALAGENTS_VERBOSE") != "" {
			t.Logf("record %s:\n%s", rec.ID, dump(rec))
		}
		out[i] = rec
	}
	t.Logf("whole run took %s", time.Since(start).Round(time.Millisecond))
	return out
}

// stepsOf returns the steps of one type, in order.
func stepsOf(rec *schemas.CaptureRecord, typ string) []schemas.Step {
	var out []schemas.Step
	for _, s := range rec.Trajectory {
		if s.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

// dump renders a record for failure messages.
func dump(rec *schemas.CaptureRecord) string {
	b, _ := json.MarshalIndent(rec, "", "  ")
	if len(b) > 20000 {
		b = append(b[:20000], "…"...)
	}
	return string(b)
}

// checkTurn checks what every successful case must show: no error,
// end_turn, a thought (when wantThought), a completed tool call (when
// wantTool), and a final message built from the tool's output. It returns
// the completed tool call steps.
func checkTurn(t *testing.T, rec *schemas.CaptureRecord, wantThought, wantTool bool, wantOutput string) []schemas.Step {
	t.Helper()
	if rec.Error != nil || rec.StopReason != acp.StopEndTurn {
		t.Fatalf("case %s: error %+v, stopReason %q\n%s", rec.ID, rec.Error, rec.StopReason, dump(rec))
	}
	if wantThought {
		th := stepsOf(rec, schemas.StepThought)
		found := false
		for _, s := range th {
			if strings.Contains(s.TextContent(), fakemodel.ThoughtMarker) {
				found = true
			}
		}
		if !found {
			t.Errorf("case %s: no thought step with the scripted thinking; thoughts %+v", rec.ID, th)
		}
	}
	if !strings.Contains(rec.Output, fakemodel.FinalPrefix) || !strings.Contains(rec.Output, wantOutput) {
		t.Errorf("case %s: output %q, want %q and %q", rec.ID, rec.Output, fakemodel.FinalPrefix, wantOutput)
	}
	var done []schemas.Step
	for _, s := range stepsOf(rec, schemas.StepToolCall) {
		if s.Status == "completed" {
			done = append(done, s)
		}
	}
	if wantTool && len(done) == 0 {
		t.Errorf("case %s: no completed tool call: %+v", rec.ID, stepsOf(rec, schemas.StepToolCall))
	}
	return done
}

// toolOutput is everything a tool call step says about its result.
func toolOutput(s schemas.Step) string {
	return string(s.Output) + string(s.Content)
}

// checkRequests checks that the fake model saw the main turn: a tool call
// scripted from the prompt, then a final answer from the tool result.
func checkRequests(t *testing.T, srv *fakemodel.Server, wantTool string, check func(fakemodel.Request) error) {
	t.Helper()
	var tool, fin bool
	for _, r := range srv.Requests() {
		switch {
		case r.Reply == "tool:"+wantTool:
			tool = true
			if check != nil {
				if err := check(r); err != nil {
					t.Errorf("request %s %s: %v", r.Method, r.Path, err)
				}
			}
		case r.Reply == "final":
			fin = true
		}
	}
	if !tool || !fin {
		var seen []string
		for _, r := range srv.Requests() {
			seen = append(seen, fmt.Sprintf("%s %s?%s -> %s", r.Method, r.Path, r.Query, r.Reply))
		}
		t.Errorf("fake model: want a %s call and a final answer; saw:\n  %s", wantTool, strings.Join(seen, "\n  "))
	}
}

// startModel starts a fake model server that is closed, and whose
// requests are logged if the test fails, when the test ends.
func startModel(t *testing.T, api fakemodel.API, opts fakemodel.Options) *fakemodel.Server {
	t.Helper()
	srv := fakemodel.Start(api, opts)
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() || os.Getenv("REALAGENTS_VERBOSE") != "" {
			var lines []string
			for _, r := range srv.Requests() {
				body := string(r.Body)
				if len(body) > 300 {
					body = body[:300] + "…"
				}
				lines = append(lines, fmt.Sprintf("%s %s?%s -> %s (prompt %q) %s", r.Method, r.Path, r.Query, r.Reply, r.Prompt, body))
			}
			t.Logf("fake model requests:\n  %s", strings.Join(lines, "\n  "))
		}
	})
	return srv
}

// processesWith lists the live processes whose environment contains kv,
// which marks every process an agent (and its children) started.
func processesWith(kv string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(d + "/environ")
		if err != nil {
			continue
		}
		for _, e := range strings.Split(string(env), "\x00") {
			if e == kv {
				if stat, err := os.ReadFile(d + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
					out = append(out, "zombie "+string(stat))
					break
				}
				cmd, _ := os.ReadFile(d + "/cmdline")
				out = append(out, strings.ReplaceAll(string(cmd), "\x00", " "))
				break
			}
		}
	}
	return out
}

// checkNoLeftovers waits up to 5 s for every process of sb to be gone.
func checkNoLeftovers(t *testing.T, sb *sandbox) {
	t.Helper()
	var left []string
	for i := 0; i < 50; i++ {
		if left = processesWith("HOME=" + sb.Home); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("processes left behind: %q", left)
}

// checkCancelled checks a case whose turn timed out on a slow model: the
// model call was in flight, and the agent answered session/cancel with
// stopReason cancelled, or the turn ended with a timeout error.
func checkCancelled(t *testing.T, srv *fakemodel.Server, rec *schemas.CaptureRecord, start time.Time, timeout time.Duration) {
	t.Helper()
	inFlight := false
	for _, r := range srv.Requests() {
		if fakemodel.ParseCommand(r.Prompt).Slow && r.Reply != "final" {
			inFlight = true
		}
	}
	if !inFlight {
		t.Error("the fake model never saw the slow prompt: the cancel did not interrupt a model call")
	}
	if rec.StopReason != acp.StopCancelled && (rec.Error == nil || rec.Error.Class != schemas.ErrTimeout) {
		t.Errorf("stopReason %q error %+v, want cancelled or a timeout\n%s", rec.StopReason, rec.Error, dump(rec))
	}
	if rec.Error == nil || rec.Error.Class != schemas.ErrTimeout {
		t.Errorf("error %+v, want class timeout", rec.Error)
	}
	if strings.Contains(rec.Output, fakemodel.FinalPrefix) {
		t.Errorf("the turn finished despite the cancel: %q", rec.Output)
	}
	if d := time.Since(start); d > timeout+30*time.Second {
		t.Errorf("cancel took %s", d)
	}
}
