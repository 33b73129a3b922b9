package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"harness/sandbox"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"harness/acp"
	"harness/internal/buildinfo"
	"harness/results"
	"harness/schemas"
	"harness/testkit/testagents"
)

func TestMain(m *testing.M) {
	if code, ok := sandbox.HelperMain(); ok {
		os.Exit(code) // the test binary stands in for harness in a sandbox
	}
	os.Exit(testagents.FakeAgentMain(m))
}

// testConfig is a config running the fixture agent with the given flags.
// Its turn and startup timeouts are watchdogs (see watchdog); a test of a
// timeout sets its own.
func testConfig(t *testing.T, agentArgs ...string) Config {
	t.Helper()
	argv, env := testagents.FakeAgent(agentArgs...)
	return Config{
		Agent:          argv,
		AgentEnv:       env,
		Cwd:            t.TempDir(),
		TurnTimeout:    watchdog(t),
		StartupTimeout: watchdog(t),
		CancelGrace:    2 * time.Second,
		Settle:         100 * time.Millisecond,
		Build:          buildinfo.Info{Version: "test"},
		Client:         acp.Options{ClientInfo: acp.Implementation{Name: "harness-test", Version: "0"}},
	}
}

// watchdog is how long a test lets a turn or an agent's start take before
// calling it hung: most of what the test binary's deadline leaves, so that
// a hang is reported on its record before the binary is stopped, and never
// a margin a slow or loaded machine can use up on a passing run.
func watchdog(t *testing.T) time.Duration {
	deadline, ok := t.Deadline()
	if !ok {
		return 10 * time.Minute
	}
	return max(time.Until(deadline)*9/10, time.Second)
}

func cases(inputs ...string) []Unit {
	var us []Unit
	for i, in := range inputs {
		c := &schemas.PromptCase{ID: string(rune('a' + i)), Input: schemas.SingleTurn(in)}
		us = append(us, Unit{Case: c, Trial: 1})
	}
	return us
}

// run runs the units and returns the records in unit order.
func run(t *testing.T, cfg Config, units []Unit) []*schemas.CaptureRecord {
	t.Helper()
	r := NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight: %v", err)
	}
	var mu sync.Mutex
	var recs []*schemas.CaptureRecord
	_, err := r.Run(context.Background(), slices.Values(units), func(rec *schemas.CaptureRecord) error {
		// Every record must encode.
		if _, err := json.Marshal(rec); err != nil {
			t.Errorf("record %s does not encode: %v", rec.ID, err)
		}
		mu.Lock()
		recs = append(recs, rec)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(recs) != len(units) {
		t.Fatalf("got %d records for %d units", len(recs), len(units))
	}
	order := map[string]int{}
	for i, u := range units {
		order[u.Case.ID+"/"+string(rune('0'+u.Trial))] = i
	}
	sort.Slice(recs, func(i, j int) bool {
		return order[recs[i].ID+"/"+string(rune('0'+recs[i].Trial))] < order[recs[j].ID+"/"+string(rune('0'+recs[j].Trial))]
	})
	return recs
}

func one(t *testing.T, cfg Config, input string) *schemas.CaptureRecord {
	t.Helper()
	return run(t, cfg, cases(input))[0]
}

// msOf prints an optional duration in milliseconds.
func msOf(d *int64) string {
	if d == nil {
		return "no duration"
	}
	return fmt.Sprintf("%d ms", *d)
}

func stepsOf(rec *schemas.CaptureRecord, typ string) []schemas.Step {
	var out []schemas.Step
	for _, s := range rec.Trajectory {
		if s.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

func TestEchoMergesChunksExactly(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "echo héllo, wörld <&>")
	if rec.Output != "héllo, wörld <&>" {
		t.Errorf("output = %q", rec.Output)
	}
	msgs := stepsOf(rec, schemas.StepMessage)
	if len(msgs) != 1 {
		t.Fatalf("want one merged message step, got %d: %+v", len(msgs), rec.Trajectory)
	}
	if got := msgs[0].TextContent(); got != rec.Output || msgs[0].MessageID != "m1" || msgs[0].Chunks < 6 {
		t.Errorf("message step = %q id %q chunks %d", got, msgs[0].MessageID, msgs[0].Chunks)
	}
	if rec.StopReason != "end_turn" || rec.Error != nil {
		t.Errorf("stopReason %q error %+v", rec.StopReason, rec.Error)
	}
	if rec.Provenance.AgentName != "fakeagent" || rec.Provenance.AgentVersion != "1.2.3" || rec.Provenance.ProtocolVersion != 1 {
		t.Errorf("provenance = %+v", rec.Provenance)
	}
	if msgs[0].StepID != "a-t1-s1" {
		t.Errorf("stepId = %q", msgs[0].StepID)
	}
}

func TestFullTrajectory(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "full")
	var kinds []string
	for _, s := range rec.Trajectory {
		kinds = append(kinds, s.Type)
	}
	want := "thought tool_call tool_call plan plan message user_message usage mode session_info config notice commands event"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("step types:\n got %s\nwant %s", got, want)
	}
	th := stepsOf(rec, schemas.StepThought)[0]
	if th.TextContent() != "Let me look at the file." || th.Chunks != 2 {
		t.Errorf("thought = %q (%d chunks)", th.TextContent(), th.Chunks)
	}
	tools := stepsOf(rec, schemas.StepToolCall)
	if tools[0].ToolCallID != "call-1" || tools[0].Status != "completed" || tools[0].Kind != "read" ||
		string(tools[0].Output) != `{"bytes":8}` || tools[0].Name != "Read README.md" || tools[0].Updates != 2 {
		t.Errorf("tool call 1 = %+v", tools[0])
	}
	// The first call completed before the second was seen.
	if d := tools[0].Duration; d == nil || *d < 0 || tools[0].Timestamp+*d > tools[1].Timestamp {
		t.Errorf("tool call 1 at %d ms for %s, tool call 2 at %d ms: want the time from first sight to completion", tools[0].Timestamp, msOf(d), tools[1].Timestamp)
	}
	if tools[1].Status != "failed" || !rec.ToolErrors {
		t.Errorf("tool call 2 status %q toolErrors %v", tools[1].Status, rec.ToolErrors)
	}
	var plan []map[string]any
	json.Unmarshal(rec.Plan, &plan)
	if len(plan) != 3 || len(stepsOf(rec, schemas.StepPlan)) != 2 {
		t.Errorf("latest plan has %d entries (want 3); %d plan steps (want 2)", len(plan), len(stepsOf(rec, schemas.StepPlan)))
	}
	if rec.Usage == nil || rec.Usage.Used == nil || *rec.Usage.Used != 1234 || *rec.Usage.Size != 200000 {
		t.Errorf("usage = %+v", rec.Usage)
	}
	ev := stepsOf(rec, schemas.StepEvent)[0]
	if ev.Update != "future_thing" || !strings.Contains(string(ev.Raw), `"x":1`) {
		t.Errorf("unknown variant not kept raw: %+v", ev)
	}
	// Timestamps are taken on arrival: increasing, and spread over the turn.
	last := int64(-1)
	for _, s := range rec.Trajectory {
		if s.Timestamp < last {
			t.Errorf("timestamps go back: %d after %d", s.Timestamp, last)
		}
		last = s.Timestamp
	}
	if last < 30 {
		t.Errorf("last step at %d ms: timestamps were not taken on arrival (the agent spreads 19 updates 3 ms apart)", last)
	}
	if rec.Timing.FirstResponse == nil || rec.Timing.Total < last {
		t.Errorf("timing = %+v", rec.Timing)
	}
}

// TestToolCallDuration: a tool call's duration runs from its first sight
// to its completion as the harness saw them. The agent starts its 50 ms
// only once the harness has answered a request sent after the tool call,
// so the harness had seen the call by then, whenever the lines arrive.
func TestToolCallDuration(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	script := fmt.Sprintf(`{"script":[{"update":{"sessionUpdate":"tool_call","toolCallId":"c","title":"Read","kind":"read","status":"pending"}},`+
		`{"request":{"method":"fs/read_text_file","params":{"path":%q}}},{"sleep":50},`+
		`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed"}},{"stop":"end_turn"}]}`, filepath.Join(cfg.Cwd, "missing.txt"))
	rec := one(t, cfg, script)
	tools := stepsOf(rec, schemas.StepToolCall)
	if rec.Error != nil || len(tools) != 1 || tools[0].Status != "completed" {
		t.Fatalf("error %+v, tool calls %+v", rec.Error, tools)
	}
	if d := tools[0].Duration; d == nil || *d < 50 || tools[0].Timestamp+*d > rec.Timing.Total {
		t.Errorf("tool call at %d ms for %s in a case of %d ms: want at least the 50 ms from its first sight to its completion", tools[0].Timestamp, msOf(d), rec.Timing.Total)
	}
}

func TestMessagesMergeByMessageIDAndKind(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "messages")
	var got []string
	for _, s := range rec.Trajectory {
		got = append(got, s.Type+":"+s.MessageID+":"+s.TextContent())
	}
	want := "message:m1:Hel thought::thinking message:m1:lo message:m2:World"
	if strings.Join(got, " ") != want {
		t.Errorf("steps:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if rec.Output != "HelloWorld" {
		t.Errorf("output = %q", rec.Output)
	}
	rec = one(t, testConfig(t), "empty-chunks")
	if rec.Output != "ab" || len(rec.Trajectory) != 1 || rec.Trajectory[0].Chunks != 4 {
		t.Errorf("empty chunks: output %q, %d steps", rec.Output, len(rec.Trajectory))
	}
}

func TestMultiTurn(t *testing.T) {
	t.Parallel()
	c := &schemas.PromptCase{ID: "mt", Input: schemas.Turns{List: []string{"echo one", "turn", "echo three"}, Multi: true}}
	rec := run(t, testConfig(t), []Unit{{Case: c, Trial: 2}})[0]
	if rec.Output != "three" || rec.TurnCount != 3 || len(rec.StopReasons) != 3 || rec.Trial != 2 {
		t.Errorf("output %q turnCount %d stops %v trial %d", rec.Output, rec.TurnCount, rec.StopReasons, rec.Trial)
	}
	var turns []int
	for _, s := range rec.Trajectory {
		turns = append(turns, s.Turn)
	}
	if len(turns) != 3 || turns[0] != 1 || turns[1] != 2 || turns[2] != 3 {
		t.Errorf("turns = %v", turns)
	}
	if got := rec.Trajectory[1].TextContent(); got != "turn 2" {
		t.Errorf("second turn ran in another session: %q", got)
	}
	if rec.Trajectory[2].StepID != "mt-t2-s3" {
		t.Errorf("stepId = %q", rec.Trajectory[2].StepID)
	}
}

// Step timestamps count from the case's start in every turn, so they only
// grow: a step of the third turn comes after the 80 ms the second one took.
func TestMultiTurnTimestampsCountFromCaseStart(t *testing.T) {
	t.Parallel()
	c := &schemas.PromptCase{ID: "ts", Input: schemas.Turns{List: []string{"echo one", "slow 80", "echo three"}, Multi: true}}
	rec := run(t, testConfig(t), []Unit{{Case: c, Trial: 1}})[0]
	var last int64 = -1
	for _, s := range rec.Trajectory {
		if s.Timestamp < last {
			t.Errorf("step %s at %d ms comes before the previous one at %d ms", s.StepID, s.Timestamp, last)
		}
		last = s.Timestamp
	}
	final := rec.Trajectory[len(rec.Trajectory)-1]
	if final.Turn != 3 || final.Timestamp < 80 {
		t.Errorf("last step turn %d at %d ms, want turn 3 at >= 80 ms", final.Turn, final.Timestamp)
	}
}

func TestFreshSessionPerCase(t *testing.T) {
	t.Parallel()
	recs := run(t, testConfig(t), cases("turn", "turn", "turn"))
	for _, r := range recs {
		if r.Output != "turn 1" {
			t.Errorf("case %s saw another case's session: %q", r.ID, r.Output)
		}
	}
}

func TestPermissionPolicyByKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy acp.PermissionPolicy
		want   string
		status string
	}{
		{acp.PolicyAllow, "permission outcome=selected optionId=once", "completed"},
		{acp.PolicyDeny, "permission outcome=selected optionId=reject", "failed"},
		{acp.PolicyCancel, "permission outcome=cancelled", "failed"},
	} {
		cfg := testConfig(t)
		cfg.Client.Permission = tc.policy
		rec := one(t, cfg, "permission")
		if rec.Output != tc.want {
			t.Errorf("%s: output %q, want %q", tc.policy, rec.Output, tc.want)
		}
		p := stepsOf(rec, schemas.StepPermission)
		if len(p) != 1 || p[0].ToolCallID != "call-1" || !strings.Contains(string(p[0].Options), "allow_always") || p[0].Reason == "" {
			t.Fatalf("%s: permission step = %+v", tc.policy, p)
		}
		if tools := stepsOf(rec, schemas.StepToolCall); tools[0].Status != tc.status {
			t.Errorf("%s: tool status %q", tc.policy, tools[0].Status)
		}
	}
}

func TestStringRequestIDs(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t, "--string-ids"), "permission")
	if rec.Output != "permission outcome=selected optionId=once" {
		t.Errorf("output %q", rec.Output)
	}
}

func TestFSOffAnswersMethodNotFound(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "fs-read /etc/hostname")
	if !strings.HasPrefix(rec.Output, "fs-read error -32601") {
		t.Errorf("output %q", rec.Output)
	}
	s := stepsOf(rec, schemas.StepFSRead)
	if len(s) != 1 || s[0].Allowed == nil || *s[0].Allowed || s[0].Path != "/etc/hostname" {
		t.Errorf("fs step = %+v", s)
	}
}

func TestFSConfinedToWorkspace(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644)
	cfg := testConfig(t)
	cfg.Client.FS = &acp.FSOptions{MaxBytes: 1 << 10}
	os.WriteFile(filepath.Join(cfg.Cwd, "in.txt"), []byte("inside"), 0o644)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(cfg.Cwd, "link.txt"))
	os.Symlink(outside, filepath.Join(cfg.Cwd, "linkdir"))
	os.WriteFile(filepath.Join(cfg.Cwd, "big.txt"), []byte(strings.Repeat("x", 2<<10)), 0o644)
	rel, _ := filepath.Rel(cfg.Cwd, filepath.Join(outside, "secret.txt"))
	recs := run(t, cfg, cases(
		"fs-read in.txt",
		"fs-read "+filepath.Join(outside, "secret.txt"),
		"fs-read "+rel,
		"fs-read link.txt",
		"fs-write linkdir/new.txt pwned",
		"fs-write sub/out.txt hello",
		"fs-read big.txt",
		"fs-write ../escape.txt x",
	))
	want := []string{"fs-read ok: inside", "fs-read error", "fs-read error", "fs-read error", "fs-write error", "fs-write ok", "fs-read error", "fs-write error"}
	for i, r := range recs {
		if !strings.HasPrefix(r.Output, want[i]) || strings.Contains(r.Output, "top secret") {
			t.Errorf("%s: output %q, want prefix %q", r.Trajectory[0].Path, r.Output, want[i])
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("a write through a symlink escaped the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(cfg.Cwd, "sub/out.txt")); string(b) != "hello" {
		t.Errorf("write inside the workspace: %q", b)
	}
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	rec := one(t, cfg, "terminal echo hi; exit 3")
	if !strings.HasPrefix(rec.Output, "terminal/create error -32601") {
		t.Errorf("without --terminal: %q", rec.Output)
	}
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: 5 * time.Second}
	rec = one(t, cfg, "terminal echo hi $PWD; exit 3")
	if rec.Output != "terminal exit=3 truncated=false output=hi "+cfg.Cwd+"\n" {
		t.Errorf("output %q", rec.Output)
	}
	var methods []string
	for _, s := range stepsOf(rec, schemas.StepTerminal) {
		methods = append(methods, s.Method)
	}
	if strings.Join(methods, " ") != "terminal/create terminal/wait_for_exit terminal/output terminal/release" {
		t.Errorf("terminal steps: %v", methods)
	}
	out := stepsOf(rec, schemas.StepTerminal)[2]
	if out.Text != "hi "+cfg.Cwd+"\n" || string(out.ExitStatus) == "" {
		t.Errorf("terminal/output step = %+v", out)
	}
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: 200 * time.Millisecond, MaxOutput: 4}
	rec = one(t, cfg, "terminal echo 123456789; sleep 30")
	if !strings.HasPrefix(rec.Output, "terminal exit=signal:killed truncated=true output=789\n") {
		t.Errorf("timeout and output cap: %q", rec.Output)
	}
}

func TestCrashKeepsTrajectoryAndRecovers(t *testing.T) {
	t.Parallel()
	recs := run(t, testConfig(t), cases("crash", "echo after"))
	c := recs[0]
	if c.Error == nil || c.Error.Class != schemas.ErrAgentCrash {
		t.Fatalf("crash error = %+v", c.Error)
	}
	if c.Error.ExitCode == nil || *c.Error.ExitCode != 3 || !strings.Contains(c.Error.Stderr, "panic: simulated crash") {
		t.Errorf("exit code %v stderr %q", c.Error.ExitCode, c.Error.Stderr)
	}
	if len(stepsOf(c, schemas.StepThought)) != 1 || c.Output != "about to crash" {
		t.Errorf("trajectory so far lost: %+v", c.Trajectory)
	}
	if recs[1].Output != "after" || recs[1].Error != nil {
		t.Errorf("case after the crash: %q %+v", recs[1].Output, recs[1].Error)
	}
}

func TestHangTimesOutKillsAndRecovers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TurnTimeout = 300 * time.Millisecond
	cfg.CancelGrace = 200 * time.Millisecond
	recs := run(t, cfg, cases("hang", "echo next"))
	if recs[0].Error == nil || recs[0].Error.Class != schemas.ErrTimeout || !strings.Contains(recs[0].Error.Message, "was killed") {
		t.Fatalf("hang error = %+v", recs[0].Error)
	}
	if recs[0].Output != "hanging" {
		t.Errorf("partial output lost: %q", recs[0].Output)
	}
	if recs[1].Output != "next" {
		t.Errorf("next case: %q %+v", recs[1].Output, recs[1].Error)
	}
	// The next case ran on a new agent (whose sessions count from 1), not
	// on the killed one.
	if recs[0].Session == nil || recs[1].Session == nil || recs[1].Session.ID != "sess-1" {
		t.Errorf("sessions %+v then %+v: the next case did not get a new agent", recs[0].Session, recs[1].Session)
	}
}

func TestCancelHonoured(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TurnTimeout = 100 * time.Millisecond
	rec := one(t, cfg, "slow 5000")
	if rec.StopReason != "cancelled" || rec.Error == nil || rec.Error.Class != schemas.ErrTimeout {
		t.Errorf("stopReason %q error %+v", rec.StopReason, rec.Error)
	}
	// An open permission request is answered cancelled on cancel. The
	// agent ignores the cancel and asks 300 ms later; the grace is long
	// enough that a loaded machine does not kill it before it reports the
	// answer (it ends its turn itself as soon as it has).
	cfg.CancelGrace = 30 * time.Second
	rec = one(t, cfg, `{"script":[{"ignoreCancel":true},{"sleep":300},{"request":{"method":"session/request_permission","params":{"toolCall":{"toolCallId":"x"},"options":[{"optionId":"o","name":"ok","kind":"allow_once"}]}}},{"reportLastAnswer":true},{"stop":"cancelled"}]}`)
	if !strings.Contains(rec.Output, `"outcome":"cancelled"`) {
		t.Errorf("permission after cancel answered %q (stopReason %q, error %+v)", rec.Output, rec.StopReason, rec.Error)
	}
	for _, s := range rec.Trajectory {
		if s.Type == schemas.StepPermission && s.Phase != schemas.PhaseCancel {
			t.Errorf("permission step phase %q", s.Phase)
		}
	}
}

func TestAgentErrorResponses(t *testing.T) {
	t.Parallel()
	recs := run(t, testConfig(t), cases("error", "auth", "echo fine"))
	e := recs[0].Error
	if e == nil || e.Class != schemas.ErrAgentError || e.Code == nil || *e.Code != -32603 ||
		!strings.Contains(e.Message, "simulated failure") || string(e.Data) != `{"detail":"x"}` {
		t.Errorf("error = %+v", e)
	}
	if a := recs[1].Error; a == nil || a.Class != schemas.ErrAuthRequired || !strings.Contains(a.Message, "test-key") {
		t.Errorf("auth error = %+v", a)
	}
	if recs[2].Output != "fine" {
		t.Errorf("after errors: %q", recs[2].Output)
	}
}

func TestJunkIsRecordedAndSkipped(t *testing.T) {
	t.Parallel()
	recs := run(t, testConfig(t, "--banner"), cases("junk", "echo still here"))
	r := recs[0]
	if r.Output != "before junkok" || r.Error != nil {
		t.Errorf("output %q error %+v", r.Output, r.Error)
	}
	var junk []string
	for _, s := range stepsOf(r, schemas.StepEvent) {
		junk = append(junk, s.Update)
	}
	if len(junk) < 3 {
		t.Errorf("junk lines not recorded: %v", junk)
	}
	if recs[1].Output != "still here" {
		t.Errorf("connection did not survive junk: %q", recs[1].Output)
	}
}

func TestHugeMessage(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "big 33554432")
	if len(rec.Output) != 32<<20 || strings.Trim(rec.Output, "x") != "" {
		t.Errorf("32 MiB message: got %d bytes", len(rec.Output))
	}
}

func TestLateAndEarlyUpdates(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t, "--early-updates"), "late")
	// The late chunk is on the trajectory, not in the output.
	if rec.Output != "main" || lateText(rec) != " tail" {
		t.Errorf("output %q, late text %q", rec.Output, lateText(rec))
	}
	var phases []string
	for _, s := range rec.Trajectory {
		phases = append(phases, s.Type+"/"+s.Phase)
	}
	want := "commands/setup message/ message/late tool_call/late"
	if strings.Join(phases, " ") != want {
		t.Errorf("phases:\n got %s\nwant %s", strings.Join(phases, " "), want)
	}
}

// TestStraysGoToTheRunLog: an update for a session the harness does not
// know goes on the run's log, never on a case's record.
func TestStraysGoToTheRunLog(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	var mu sync.Mutex
	var logged []Stray
	cfg.Log = func(s Stray) {
		mu.Lock()
		logged = append(logged, s)
		mu.Unlock()
	}
	recs := run(t, cfg, cases("unknown-session", "echo next"))
	for _, rec := range recs {
		for _, s := range rec.Trajectory {
			if s.Phase == "stray" || strings.Contains(s.Error, `"nope"`) {
				t.Errorf("%s: a message for another session is on the record: %+v", rec.ID, s)
			}
		}
	}
	if recs[0].Output != "ok" || recs[1].Output != "next" {
		t.Errorf("outputs %q, %q", recs[0].Output, recs[1].Output)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || logged[0].SessionID != "nope" || !strings.HasPrefix(logged[0].What, "session/update ") {
		t.Errorf("run log = %+v", logged)
	}
}

func TestDuplicateToolCalls(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "dup-tool")
	tools := stepsOf(rec, schemas.StepToolCall)
	if len(tools) != 2 || tools[0].Name != "Second title" || tools[0].Updates != 1 || tools[1].ToolCallID != "t9" || tools[1].Status != "completed" {
		t.Errorf("tool calls = %+v", tools)
	}
}

func TestPromptUsage(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t), "usage")
	if rec.Usage == nil || rec.Usage.InputTokens == nil || *rec.Usage.InputTokens != 10 || *rec.Usage.TotalTokens != 15 {
		t.Errorf("usage = %+v", rec.Usage)
	}
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	recs := run(t, testConfig(t), cases("refusal", "max-tokens"))
	if recs[0].StopReason != "refusal" || recs[1].StopReason != "max_tokens" {
		t.Errorf("stop reasons %q %q", recs[0].StopReason, recs[1].StopReason)
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	rec := one(t, testConfig(t, "--auth-required"), "echo x")
	if rec.Error == nil || rec.Error.Class != schemas.ErrAuthRequired || !strings.Contains(rec.Error.Message, "auth methods test-key") {
		t.Errorf("error = %+v", rec.Error)
	}
	cfg := testConfig(t, "--auth-required")
	cfg.Auth = "test-key"
	if rec := one(t, cfg, "echo x"); rec.Output != "x" {
		t.Errorf("with --auth: %q %+v", rec.Output, rec.Error)
	}
}

func TestStartupFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		argv  []string
		class string
		text  string
	}{
		{"exits", []string{"--exit-before-init"}, schemas.ErrAgentStart, "fatal: cannot start"},
		{"version", []string{"--protocol", "2"}, schemas.ErrProtocol, "protocol version 2"},
		{"hangs", []string{"--hang-init"}, schemas.ErrAgentStart, "did not answer initialize"},
	} {
		cfg := testConfig(t, tc.argv...)
		// Only the agent that never answers waits out the timeout; the
		// others answer, however long a loaded machine takes to start them.
		if tc.name == "hangs" {
			cfg.StartupTimeout = 300 * time.Millisecond
		}
		_, err := NewRunner(cfg).Preflight(context.Background())
		ae, ok := err.(*AgentError)
		if !ok || ae.Info.Class != tc.class || !strings.Contains(ae.Error(), tc.text) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	cfg := testConfig(t)
	cfg.Agent = []string{"/nonexistent/agent"}
	if _, err := NewRunner(cfg).Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), "/nonexistent/agent") {
		t.Errorf("unknown command: %v", err)
	}
	noexec := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	cfg.Agent = []string{noexec}
	if _, err := NewRunner(cfg).Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("not executable: %v", err)
	}
}

func TestWorkspaceCopiesAndDiffs(t *testing.T) {
	t.Parallel()
	tmpl := t.TempDir()
	os.WriteFile(filepath.Join(tmpl, "keep.txt"), []byte("same\n"), 0o644)
	os.WriteFile(filepath.Join(tmpl, "edit.txt"), []byte("old\n"), 0o644)
	cfg := testConfig(t)
	cfg.Workspace = tmpl
	c := &schemas.PromptCase{ID: "ws", Input: schemas.SingleTurn("write-file edit.txt new")}
	c2 := &schemas.PromptCase{ID: "ws2", Input: schemas.SingleTurn("write-file added.txt hello")}
	recs := run(t, cfg, []Unit{{Case: c, Trial: 1}, {Case: c, Trial: 2}, {Case: c2, Trial: 1}})
	for _, r := range recs[:2] {
		if r.Workspace == nil || len(r.Workspace.FileChanges) != 1 {
			t.Fatalf("%s: workspace = %+v", r.ID, r.Workspace)
		}
		fc := r.Workspace.FileChanges[0]
		if fc.Path != "edit.txt" || fc.Status != "modified" || !strings.Contains(fc.Diff, "-old") || !strings.Contains(fc.Diff, "+new") {
			t.Errorf("change = %+v", fc)
		}
		if r.Cwd == tmpl {
			t.Error("the template itself was used as the workspace")
		}
		if _, err := os.Stat(r.Workspace.Path); err == nil {
			t.Error("workspace copy left behind")
		}
	}
	if recs[0].Cwd == recs[1].Cwd {
		t.Error("two trials shared a workspace")
	}
	if fc := recs[2].Workspace.FileChanges; len(fc) != 1 || fc[0].Status != "added" || fc[0].Path != "added.txt" {
		t.Errorf("added file: %+v", fc)
	}
	if b, _ := os.ReadFile(filepath.Join(tmpl, "edit.txt")); string(b) != "old\n" {
		t.Errorf("template modified: %q", b)
	}
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Concurrency = 4
	var us []Unit
	for i := 0; i < 20; i++ {
		c := &schemas.PromptCase{ID: "c" + string(rune('A'+i)), Input: schemas.SingleTurn("echo " + string(rune('A'+i)))}
		us = append(us, Unit{Case: c, Trial: 1})
	}
	recs := run(t, cfg, us)
	for i, r := range recs {
		if r.Output != string(rune('A'+i)) {
			t.Errorf("%s: output %q", r.ID, r.Output)
		}
	}
}

// TestEarlyUpdatesStayWithTheirCase: updates the agent sends for a new
// session before answering session/new belong to that case, not to the
// previous one (which is still open for late updates).
func TestEarlyUpdatesStayWithTheirCase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "--early-updates")
	cfg.Settle = 2 * time.Second
	recs := run(t, cfg, cases("echo one", "echo two", "echo three"))
	for _, r := range recs {
		var setup, stray int
		for _, s := range r.Trajectory {
			switch s.Phase {
			case schemas.PhaseSetup:
				setup++
			case "stray":
				stray++
			}
		}
		if setup != 1 || stray != 0 {
			t.Errorf("%s: %d setup steps (want 1), %d strays (want 0): %+v", r.ID, setup, stray, r.Trajectory)
		}
	}
}

// TestAgentDyingBetweenCases: an agent that exits after answering is
// replaced for the next case instead of failing every case after it.
func TestAgentDyingBetweenCases(t *testing.T) {
	t.Parallel()
	recs := run(t, testConfig(t), cases(`{"script":[{"message":"bye"},{"stop":"end_turn"},{"after":[{"exit":0}]}]}`, "echo two", "echo three"))
	for i, want := range []string{"bye", "two", "three"} {
		if recs[i].Output != want || recs[i].Error != nil {
			t.Errorf("case %d: output %q error %+v", i, recs[i].Output, recs[i].Error)
		}
	}
}

// TestLateUpdatesWithBackToBackCases: late updates reach their case even
// when the next case on the same agent has already started.
// A chunk the agent writes right after its answer, with no pause, is late:
// the turn ends when the answer is read, not when the worker gets to it.
func TestChunkRightAfterTheAnswerIsLate(t *testing.T) {
	t.Parallel()
	script := `{"script":[{"message":"main","messageId":"m1"},{"stop":"end_turn"},{"message":" tail","messageId":"m1"}]}`
	var units []Unit
	for i := range 20 {
		units = append(units, Unit{Case: &schemas.PromptCase{ID: fmt.Sprint("c", i), Input: schemas.SingleTurn(script)}, Trial: 1})
	}
	for _, rec := range run(t, testConfig(t), units) {
		if rec.Output != "main" || lateText(rec) != " tail" {
			t.Errorf("case %s: output %q, late text %q", rec.ID, rec.Output, lateText(rec))
		}
	}
}

func TestLateUpdatesWithBackToBackCases(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Settle = 2 * time.Second
	recs := run(t, cfg, cases("late", "echo x", "late", "echo y"))
	for i, want := range []string{"main", "x", "main", "y"} {
		if recs[i].Output != want {
			t.Errorf("case %d: output %q, want %q", i, recs[i].Output, want)
		}
		if wantLate := map[string]string{"main": " tail"}[want]; lateText(recs[i]) != wantLate {
			t.Errorf("case %d: late text %q, want %q", i, lateText(recs[i]), wantLate)
		}
		for _, s := range recs[i].Trajectory {
			if s.Phase == "stray" {
				t.Errorf("case %d has a stray step: %+v", i, s)
			}
		}
	}
}

// TestProvenanceNamesTheBuild: every record says which harness build made
// it, revision and dirty flag included.
func TestProvenanceNamesTheBuild(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Build = buildinfo.Info{Version: "1.2.3", Revision: "0123abcd", Dirty: true}
	rec := one(t, cfg, "echo x")
	p := rec.Provenance
	if p.Harness != "1.2.3" || p.HarnessRevision != "0123abcd" || !p.HarnessDirty || p.AgentName != "fakeagent" {
		t.Errorf("provenance = %+v", p)
	}
}

// TestSessionsMadeAhead: with cases back to back on one agent, the next
// case's session is made while the current turn runs, each case still gets
// its own session, its early updates stay on its own record, and its
// timing does not include the wait for the case before it.
func TestSessionsMadeAhead(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "--early-updates", "--session-delay", "50")
	// Each of the first two turns answers only once the agent has answered
	// the session/new of the case after it, and 300 ms later: a runner
	// that made the next session after the turn ended would see the turn
	// time out instead.
	recs := run(t, cfg, cases("await-session 2 300", "await-session 3 300", "echo three"))
	ids := map[string]bool{}
	for _, r := range recs {
		if r.Error != nil {
			t.Fatalf("%s: %+v", r.ID, r.Error)
		}
		if r.Session == nil || ids[r.Session.ID] {
			t.Errorf("%s: session %+v not its own", r.ID, r.Session)
		} else {
			ids[r.Session.ID] = true
		}
		setup := 0
		for _, s := range r.Trajectory {
			if s.Phase == schemas.PhaseSetup {
				setup++
			}
		}
		if setup != 1 {
			t.Errorf("%s: %d setup steps, want 1", r.ID, setup)
		}
	}
	for i, r := range recs[1:] {
		before := recs[i]
		// A case made ahead starts its clock when the case before it has
		// ended, less what making its session took; the case's session
		// was answered at least 300 ms before that end, so a clock started
		// at the prefetch fails this (the 2 ms are the rounding of start
		// and sessionCreation to whole milliseconds).
		if r.Timing.Start+r.Timing.SessionCreation < before.Timing.End-2 {
			t.Errorf("%s: start %d + session %d ms is before the case before it ended (%d): its timing includes the wait",
				r.ID, r.Timing.Start, r.Timing.SessionCreation, before.Timing.End)
		}
		if d := r.Timing.Total - (r.Timing.End - r.Timing.Start); d < -1 || d > 1 {
			t.Errorf("%s: total %d ms, not end %d - start %d", r.ID, r.Timing.Total, r.Timing.End, r.Timing.Start)
		}
	}
	if recs[2].Output != "three" {
		t.Errorf("case c output %q", recs[2].Output)
	}
}

// TestLatePermissionNeverGranted: a permission request that arrives after
// the turn answered (while the case still listens for late updates) is
// answered cancelled, whatever the policy.
func TestLatePermissionNeverGranted(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Settle = time.Second
	rec := one(t, cfg, `{"script":[{"message":"done "},{"stop":"end_turn"},{"after":[{"sleep":50},{"request":{"method":"session/request_permission","params":{"toolCall":{"toolCallId":"x"},"options":[{"optionId":"o","name":"ok","kind":"allow_once"}]}}},{"reportLastAnswer":true}]}]}`)
	if late := lateText(rec); !strings.Contains(late, `"outcome":"cancelled"`) || strings.Contains(late, `"selected"`) {
		t.Errorf("late permission answered %q (error %+v, steps %+v)", rec.Output, rec.Error, rec.Trajectory)
	}
	p := stepsOf(rec, schemas.StepPermission)
	if len(p) != 1 || p[0].Phase != schemas.PhaseLate || !strings.Contains(p[0].Reason, "no turn running") {
		t.Errorf("permission step = %+v", p)
	}
}

// TestHostileFSFlood: an agent that floods the harness with reads of a FIFO
// (which used to block a thread each) and of large files gets errors for
// what passes the limits, never a hung or dead harness; the cases around
// it are recorded.
func TestHostileFSFlood(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Client.FS = &acp.FSOptions{MaxBytes: 4 << 20}
	cfg.Client.Limits = acp.Limits{Requests: 4, Bytes: 16 << 20}
	if err := syscall.Mkfifo(filepath.Join(cfg.Cwd, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Cwd, "big.txt"), bytes.Repeat([]byte("x"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	recs := run(t, cfg, cases("echo before", "fs-flood 2000 fifo", "fs-flood 300 big.txt", "echo after"))
	if recs[0].Output != "before" || recs[3].Output != "after" {
		t.Errorf("cases around the flood: %q, %q", recs[0].Output, recs[3].Output)
	}
	var ok, busy, byteLimit, denied, other int
	if _, err := fmt.Sscanf(recs[1].Output, "flood ok=%d busy=%d bytes=%d denied=%d other=%d", &ok, &busy, &byteLimit, &denied, &other); err != nil {
		t.Fatalf("FIFO flood: output %q, error %+v", recs[1].Output, recs[1].Error)
	}
	if ok != 0 || other != 0 || denied+busy != 2000 || denied == 0 {
		t.Errorf("FIFO flood: %s (want every read denied or refused as busy, none served)", recs[1].Output)
	}
	if _, err := fmt.Sscanf(recs[2].Output, "flood ok=%d busy=%d bytes=%d denied=%d other=%d", &ok, &busy, &byteLimit, &denied, &other); err != nil {
		t.Fatalf("big-file flood: output %q, error %+v", recs[2].Output, recs[2].Error)
	}
	if ok == 0 || ok+busy+byteLimit != 300 || busy+byteLimit == 0 || other != 0 {
		t.Errorf("big-file flood: %s (want some served, the rest refused by the limits)", recs[2].Output)
	}
}

// TestRecordCap: a record over the size limit has its largest values cut,
// each with a visible marker, says so, and stays under the limit.
func TestRecordCap(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxRecordBytes = 64 << 10
	rec := one(t, cfg, "big 2000000")
	b, _ := json.Marshal(rec)
	if int64(len(b)) > cfg.MaxRecordBytes {
		t.Errorf("record is %d bytes, over the %d limit", len(b), cfg.MaxRecordBytes)
	}
	tr := rec.Truncated
	if tr == nil || tr.Limit != cfg.MaxRecordBytes || tr.Size < 2000000 || tr.Cut <= 0 || len(tr.Fields) == 0 {
		t.Fatalf("truncated = %+v", tr)
	}
	if !strings.Contains(string(b), "bytes cut: the record was over its size limit]") {
		t.Error("no marker in the cut values")
	}
	small := one(t, cfg, "echo x")
	if small.Truncated != nil || small.Output != "x" {
		t.Errorf("a small record was cut: %+v", small.Truncated)
	}
}

// TestToolCallIDReusedInALaterTurn: an agent that numbers its tool calls
// per turn starts "call-1" again in turn 2: that is a new call, not an
// update of turn 1's.
func TestToolCallIDReusedInALaterTurn(t *testing.T) {
	t.Parallel()
	turn := func(title string) string {
		return `{"script":[{"update":{"sessionUpdate":"tool_call","toolCallId":"call-1","title":"` + title + `","status":"in_progress"}},` +
			`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"completed"}},{"message":"ok"}]}`
	}
	c := &schemas.PromptCase{ID: "a", Input: schemas.Turns{List: []string{turn("First"), turn("Second")}, Multi: true}}
	recs := run(t, testConfig(t), []Unit{{Case: c, Trial: 1}})
	tools := stepsOf(recs[0], schemas.StepToolCall)
	if len(tools) != 2 || tools[0].Name != "First" || tools[0].Turn != 1 || tools[1].Name != "Second" || tools[1].Turn != 2 ||
		tools[0].Updates != 1 || tools[1].Updates != 1 {
		t.Errorf("tool calls = %+v", tools)
	}
}

// TestOutcomeLifted: a grader's outcome data is also on the record's top
// level, where the TypeScript acp-harness puts it.
func TestOutcomeLifted(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Grade = func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) (*schemas.GraderResult, []schemas.GraderResult) {
		return &schemas.GraderResult{Pass: true, Score: 1, Outcome: map[string]any{"tests": 3.0}}, nil
	}
	rec := one(t, cfg, "echo x")
	if rec.Outcome["tests"] != 3.0 {
		t.Errorf("outcome = %v", rec.Outcome)
	}
}

// lateText is the text of a record's late message steps.
func lateText(rec *schemas.CaptureRecord) string {
	var b strings.Builder
	for _, s := range rec.Trajectory {
		if s.Type == schemas.StepMessage && s.Phase == schemas.PhaseLate {
			var text string
			json.Unmarshal(s.Content, &text)
			b.WriteString(text)
		}
	}
	return b.String()
}

// A case's simulated user holds a four-turn conversation with the agent:
// the input opens it, each turn the user writes answers the agent's last
// message and is a step of its own, and the record's input holds them all.
func TestSimulatedUser(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	user, _ := filepath.Abs("testdata/simuser.py")
	c := &schemas.PromptCase{ID: "talk", Input: schemas.SingleTurn("echo start"), User: &schemas.SimUser{Command: []string{user}}}
	rec := run(t, testConfig(t), []Unit{{Case: c, Trial: 1}})[0]
	if rec.Error != nil {
		t.Fatalf("error %+v", rec.Error)
	}
	want := []string{"echo start", "echo t2<start>", "echo t3<t2<start>>", "echo t4<t3<t2<start>>>"}
	if got := rec.Input.List; strings.Join(got, "|") != strings.Join(want, "|") || rec.TurnCount != 4 {
		t.Errorf("input %q (turnCount %d), want %q", got, rec.TurnCount, want)
	}
	if rec.Output != "t4<t3<t2<start>>>" || len(rec.StopReasons) != 4 {
		t.Errorf("output %q, stops %v", rec.Output, rec.StopReasons)
	}
	var users []string
	for _, s := range rec.Trajectory {
		if s.Type == schemas.StepSimUser {
			users = append(users, fmt.Sprintf("%d:%s%s", s.Turn, s.TextContent(), s.Outcome))
		}
	}
	if got := strings.Join(users, "|"); got != "2:echo t2<start>|3:echo t3<t2<start>>|4:echo t4<t3<t2<start>>>|4:stop" {
		t.Errorf("user steps %s", got)
	}
	if o := rec.SimulatedUser; o == nil || !reflect.DeepEqual(*o, schemas.SimUserOutcome{Turns: 4, Ended: schemas.UserEndStop, Reason: "done after 4 turns"}) {
		t.Errorf("simulatedUser %+v", o)
	}
	// The case itself is left as it was.
	if len(c.Input.List) != 1 {
		t.Errorf("the case's input changed: %q", c.Input.List)
	}
	normalize(rec)
	// The case's hash covers the user's command, an absolute path that
	// depends on where the repository is: checked here, fixed for the golden.
	if want := c.ContentHash(); rec.CaseHash != want {
		t.Errorf("caseHash %q, want the case's %q", rec.CaseHash, want)
	}
	rec.CaseHash = strings.Repeat("0", 64)
	b, err := results.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "golden_simuser.jsonl"), append(bytes.ReplaceAll(b, []byte(rec.Cwd), []byte("CWD")), '\n'))
}

// A session_info_update the agent sends right after the turn answered (a
// session title, as claude-agent-acp sends) is its case's: on its record
// as a late step while the case settles; after its record is sealed, it is
// still its case's (a late stray), never a message for no case.
func TestSessionInfoAfterTheTurnIsItsCases(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	var mu sync.Mutex
	var logged []Stray
	cfg.Log = func(s Stray) {
		mu.Lock()
		logged = append(logged, s)
		mu.Unlock()
	}
	info := `{"sessionUpdate":"session_info_update","title":"Fix the bug"}`
	// Case a: the title right after the answer. Case b, on the same agent,
	// a second later: a title for a's session (sess-1), whose record was
	// sealed after the settle time.
	right := `{"script":[{"message":"main","messageId":"m1"},{"stop":"end_turn"},{"update":` + info + `}]}`
	after := `{"script":[{"sleep":1000},{"update":{"sessionUpdate":"session_info_update","title":"Later"},"sessionId":"sess-1"},{"message":"b","messageId":"m1"},{"stop":"end_turn"}]}`
	recs := run(t, cfg, cases(right, after))
	var infos []string
	for _, s := range recs[0].Trajectory {
		if s.Type == schemas.StepSessionInfo {
			infos = append(infos, s.Phase+":"+string(s.Raw))
		}
	}
	if len(infos) < 1 || !strings.HasPrefix(infos[0], schemas.PhaseLate+":") || !strings.Contains(infos[0], "Fix the bug") {
		t.Errorf("case a's session_info steps = %q, want the title as a late step", infos)
	}
	lateOnA := len(infos) == 2 && strings.Contains(infos[1], "Later")
	if recs[1].Output != "b" {
		t.Errorf("case b output %q", recs[1].Output)
	}
	for _, s := range recs[1].Trajectory {
		if s.Type == schemas.StepSessionInfo {
			t.Errorf("case b holds a's title: %+v", s)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	late := 0
	for _, s := range logged {
		if !s.Late {
			t.Errorf("reported as a message for no case: %+v", s)
			continue
		}
		if s.SessionID != "sess-1" || s.What != "session/update session_info_update" {
			t.Errorf("late stray = %+v", s)
		}
		late++
	}
	// Sent a second after a's 100 ms settle time: a late stray (on a's
	// record only if the machine held a's record open that long).
	if late+btoi(lateOnA) != 1 {
		t.Errorf("the later title: %d late strays, on a's record %v (steps %q)", late, lateOnA, infos)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
