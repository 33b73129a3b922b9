package replay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/internal/buildinfo"
	"harness/replay"
	"harness/results"
	"harness/schemas"
	"harness/testkit/replaytest"
	"harness/testkit/testagents"
)

func TestMain(m *testing.M) { os.Exit(replaytest.Main(m)) }

// config is a capture config for agent, serving fs and terminals in cwd.
func config(argv, env []string, cwd string) capture.Config {
	return capture.Config{
		Agent:          argv,
		AgentEnv:       env,
		Cwd:            cwd,
		TurnTimeout:    10 * time.Second,
		StartupTimeout: 10 * time.Second,
		CancelGrace:    2 * time.Second,
		Settle:         500 * time.Millisecond,
		Build:          buildinfo.Info{Version: "test"},
		Client: acp.Options{
			ClientInfo: acp.Implementation{Name: "harness-test", Version: "0"},
			FS:         &acp.FSOptions{},
			Terminal:   &acp.TerminalOptions{Timeout: 10 * time.Second},
		},
	}
}

// capture runs the units and returns the records in unit order.
func runUnits(t *testing.T, cfg capture.Config, units []capture.Unit) []*schemas.CaptureRecord {
	t.Helper()
	r := capture.NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight: %v", err)
	}
	var mu sync.Mutex
	var recs []*schemas.CaptureRecord
	_, err := r.Run(context.Background(), slices.Values(units), func(rec *schemas.CaptureRecord) error {
		mu.Lock()
		recs = append(recs, rec)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(recs) != len(units) {
		t.Fatalf("%d records for %d units", len(recs), len(units))
	}
	order := map[string]int{}
	for i, u := range units {
		order[fmt.Sprintf("%s/%d", u.Case.ID, u.Trial)] = i
	}
	sort.Slice(recs, func(i, j int) bool {
		return order[fmt.Sprintf("%s/%d", recs[i].ID, recs[i].Trial)] < order[fmt.Sprintf("%s/%d", recs[j].ID, recs[j].Trial)]
	})
	return recs
}

// writeResults writes records as a capture file.
func writeResults(t *testing.T, recs []*schemas.CaptureRecord) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "recorded.jsonl")
	var b strings.Builder
	for _, r := range recs {
		line, err := results.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// compare checks that a replayed record reproduces the recorded one:
// the trajectory byte for byte (times zeroed unless keepTimes), the
// output, the stop reasons, the plan, the usage and the tool errors.
func compare(t *testing.T, want, got *schemas.CaptureRecord, keepTimes bool) {
	t.Helper()
	w, err := testagents.TrajectoryBytes(want, keepTimes)
	if err != nil {
		t.Fatal(err)
	}
	g, err := testagents.TrajectoryBytes(got, keepTimes)
	if err != nil {
		t.Fatal(err)
	}
	if w != g {
		t.Errorf("case %s trial %d: the replayed trajectory differs\nrecorded %s\nreplayed %s", want.ID, want.Trial, w, g)
	}
	if want.Output != got.Output || want.StopReason != got.StopReason || !slices.Equal(want.StopReasons, got.StopReasons) ||
		string(want.Plan) != string(got.Plan) || want.ToolErrors != got.ToolErrors {
		t.Errorf("case %s trial %d: output %q/%q, stop %q %v / %q %v, plan %s / %s, toolErrors %v/%v", want.ID, want.Trial,
			want.Output, got.Output, want.StopReason, want.StopReasons, got.StopReason, got.StopReasons, want.Plan, got.Plan, want.ToolErrors, got.ToolErrors)
	}
	wu, _ := results.Marshal(want.Usage)
	gu, _ := results.Marshal(got.Usage)
	if string(wu) != string(gu) {
		t.Errorf("case %s trial %d: usage %s, replayed %s", want.ID, want.Trial, wu, gu)
	}
}

func unit(id string, trial int, turns ...string) capture.Unit {
	in := schemas.SingleTurn(turns[0])
	if len(turns) > 1 {
		in = schemas.Turns{List: turns}
	}
	return capture.Unit{Case: &schemas.PromptCase{ID: id, Input: in}, Trial: trial}
}

// script is a fixture agent script prompt.
func script(steps ...string) string {
	return `{"script":[` + strings.Join(steps, ",") + `]}`
}

// A capture of the fixture agent, replayed, captures the same
// trajectories byte for byte (times aside): every kind of step, chunk
// counts, tool call updates, permission, fs and terminal round trips,
// junk, late updates, setup updates, errors, timeouts, several turns.
func TestReplayReproducesFixtureTrajectories(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "README.md"), []byte("# Readme\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	units := []capture.Unit{
		unit("full", 1, "full"),
		unit("permission", 1, "permission"),
		unit("messages", 1, "messages"),
		unit("echo", 1, "echo a <b> & c, ünïcödé 𝄞 text in pieces"),
		unit("empty", 1, "empty-chunks"),
		unit("junk", 1, "junk"),
		unit("late", 1, "late"),
		unit("dup", 1, "dup-tool"),
		unit("usage", 1, "usage"),
		unit("error", 1, "error"),
		unit("refusal", 1, "refusal"),
		unit("fs", 1, "fs-read README.md"),
		unit("fs-denied", 1, "fs-read ../outside.txt"),
		unit("terminal", 1, "terminal echo hi from the terminal"),
		unit("turns", 1, "turn", "echo second", "turn"),
		unit("blocks", 1, script(
			`{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"aGk=","mimeType":"image/png"},"messageId":"m1"}}`,
			`{"message":"with an image","messageId":"m1"}`,
			`{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text"}}}`,
			`{"update":{"sessionUpdate":"tool_call","toolCallId":"x","title":"T","rawOutput":null}}`,
			`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"x","content":[{"type":"content","content":{"type":"text","text":"c"}}]}}`,
			`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"completed"}}`,
			`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"in_progress"}}`,
			`{"raw":"{\"jsonrpc\":\"2.0\",\"method\":\"custom/notice\",\"params\":{\"x\":\"<&>\"}}"}`,
			`{"request":{"method":"custom/ask","params":{"q":1}}}`,
			`{"stop":"end_turn","usage":{"inputTokens":7,"outputTokens":3}}`)),
		unit("timeout", 1, script(`{"message":"working"}`, `{"waitCancel":true}`, `{"message":"stopping"}`, `{"stop":"cancelled"}`)),
		unit("crash", 1, "crash"),
	}
	units[len(units)-2].Case.Timeout = schemas.Duration(300 * time.Millisecond)
	argv, env := testagents.FakeAgent("--early-updates")
	recorded := runUnits(t, config(argv, env, cwd), units)
	for _, r := range recorded {
		if len(r.Trajectory) == 0 {
			t.Fatalf("case %s recorded no steps: %+v", r.ID, r.Error)
		}
	}
	file := writeResults(t, recorded)

	rargv, renv := replaytest.Agent(file, replay.Options{})
	replayed := runUnits(t, config(rargv, renv, cwd), units)
	for i := range recorded {
		compare(t, recorded[i], replayed[i], false)
		want, got := recorded[i].Error, replayed[i].Error
		switch {
		case recorded[i].ID == "crash":
			// A crash is answered with an error naming it: the replay
			// keeps its process for the trials that follow.
			if got == nil || got.Class != schemas.ErrAgentError || !strings.Contains(got.Message, "agent_crash") {
				t.Errorf("crash: replayed error %+v", got)
			}
		case (want == nil) != (got == nil) || want != nil && (want.Class != got.Class || want.Message != got.Message || code(want) != code(got) || string(want.Data) != string(got.Data)):
			t.Errorf("case %s: error %+v, replayed %+v", recorded[i].ID, want, got)
		}
	}
}

func code(e *schemas.ErrorInfo) string {
	if e.Code == nil {
		return "none"
	}
	return fmt.Sprint(*e.Code)
}

// With --timing every step comes no sooner after the start of its turn
// than it did in the recording (the sleeps are lower bounds; a loaded
// machine can only make them later).
func TestReplayTiming(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	units := []capture.Unit{unit("slow", 1, script(
		`{"thought":"thinking"}`,
		`{"sleep":120}`,
		`{"update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run","kind":"execute","status":"in_progress"}}`,
		`{"sleep":80}`,
		`{"update":{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}}`,
		`{"sleep":50}`,
		`{"message":"done"}`))}
	argv, env := testagents.FakeAgent()
	recorded := runUnits(t, config(argv, env, cwd), units)
	file := writeResults(t, recorded)
	rargv, renv := replaytest.Agent(file, replay.Options{Timing: true})
	replayed := runUnits(t, config(rargv, renv, cwd), units)
	compare(t, recorded[0], replayed[0], false)
	offsets := func(r *schemas.CaptureRecord) []int64 {
		if r.Timing.FirstResponse == nil || len(r.Trajectory) == 0 {
			t.Fatalf("record without a first response: %+v", r.Timing)
		}
		turnStart := r.Trajectory[0].Timestamp - *r.Timing.FirstResponse
		var out []int64
		for _, s := range r.Trajectory {
			out = append(out, s.Timestamp-turnStart)
		}
		return out
	}
	want, got := offsets(recorded[0]), offsets(replayed[0])
	if want[len(want)-1] < 250 {
		t.Fatalf("the recording took %d ms, less than its sleeps", want[len(want)-1])
	}
	for i := range want {
		// 2 ms: both ends are rounded down to milliseconds.
		if got[i] < want[i]-2 {
			t.Errorf("step %d came %d ms into the replayed turn, %d ms in the recording", i+1, got[i], want[i])
		}
	}
}

// In workspace copies, the replay's fs and terminal requests go to the same
// places in the new copy, the files it wrote placeholders to are put back,
// and with ApplyChanges the copy ends as the recorded one did: the same
// file changes, whether the client wrote them (fs) or the agent did.
func TestReplayWorkspace(t *testing.T) {
	t.Parallel()
	template := t.TempDir()
	if err := os.WriteFile(filepath.Join(template, "README.md"), []byte("# Readme\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	units := []capture.Unit{
		unit("fs-write", 1, "fs-write out.txt written through fs"),
		unit("fs-overwrite", 1, "fs-write README.md new readme"),
		unit("agent-write", 1, "write-file made.txt made by the agent"),
		unit("fs-read", 1, "fs-read README.md"),
		unit("terminal", 1, "terminal cat README.md"),
	}
	cfg := func(argv, env []string) capture.Config {
		c := config(argv, env, t.TempDir())
		c.Workspace = template
		return c
	}
	argv, env := testagents.FakeAgent()
	recorded := runUnits(t, cfg(argv, env), units)
	file := writeResults(t, recorded)
	for _, apply := range []bool{false, true} {
		rargv, renv := replaytest.Agent(file, replay.Options{ApplyChanges: apply})
		replayed := runUnits(t, cfg(rargv, renv), units)
		for i, want := range recorded {
			got := replayed[i]
			if want.Workspace == nil || got.Workspace == nil {
				t.Fatalf("case %s: no workspace on the record", want.ID)
			}
			w, _ := testagents.TrajectoryBytes(want, false)
			g, _ := testagents.TrajectoryBytes(got, false)
			// Each run has its own copy. The replay sends what the agent
			// reported (tool calls) as recorded, naming the recorded copy,
			// and moves its requests (fs, terminal) to the new one.
			w = strings.ReplaceAll(w, want.Workspace.Path, "CWD")
			g = strings.ReplaceAll(strings.ReplaceAll(g, want.Workspace.Path, "CWD"), got.Workspace.Path, "CWD")
			if w != g {
				t.Errorf("apply %v, case %s: the replayed trajectory differs\nrecorded %s\nreplayed %s", apply, want.ID, w, g)
			}
			if want.Output != got.Output {
				t.Errorf("apply %v, case %s: output %q, replayed %q", apply, want.ID, want.Output, got.Output)
			}
			wc, _ := results.Marshal(want.Workspace.FileChanges)
			gc, _ := results.Marshal(got.Workspace.FileChanges)
			switch {
			case apply && string(wc) != string(gc):
				t.Errorf("case %s: file changes %s, replayed %s", want.ID, wc, gc)
			case !apply && string(gc) != "[]":
				t.Errorf("case %s without ApplyChanges: the copy changed: %s", want.ID, gc)
			}
		}
	}
	if len(recorded[0].Workspace.FileChanges) == 0 || len(recorded[2].Workspace.FileChanges) == 0 {
		t.Fatalf("the recording changed no files: %+v %+v", recorded[0].Workspace, recorded[2].Workspace)
	}
}
