package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/internal/buildinfo"
	"harness/runctl"
	"harness/sandbox"
	"harness/schemas"
	"harness/testkit/testagents"
	"harness/trials"
)

func TestMain(m *testing.M) {
	if code, ok := sandbox.HelperMain(); ok {
		os.Exit(code) // the test binary stands in for harness in a sandbox
	}
	os.Exit(testagents.FakeAgentMain(m))
}

// grade is a grader verdict by case and trial.
type grade func(id string, trial int) bool

// options runs the fixture agent (with agentArgs) over the cases, one
// prompt each (id: prompt), written to a prompts file in dir, graded by
// pass, writing to dir/out.jsonl.
func options(t *testing.T, dir string, cases [][2]string, k, workers int, pass grade, agentArgs ...string) Options {
	t.Helper()
	var lines []string
	for _, c := range cases {
		b, _ := json.Marshal(map[string]string{"id": c[0], "input": c[1]})
		lines = append(lines, string(b))
	}
	prompts := filepath.Join(dir, "prompts.jsonl")
	if err := os.WriteFile(prompts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv, env := testagents.FakeAgent(agentArgs...)
	cfg := capture.Config{
		Agent:          argv,
		AgentEnv:       env,
		Cwd:            t.TempDir(),
		TurnTimeout:    10 * time.Second,
		StartupTimeout: 10 * time.Second,
		CancelGrace:    2 * time.Second,
		Settle:         10 * time.Millisecond,
		Concurrency:    workers,
		Build:          buildinfo.Info{Version: "test"},
		Client:         acp.Options{ClientInfo: acp.Implementation{Name: "harness-test", Version: "0"}},
	}
	if pass != nil {
		cfg.GraderNames = []string{"test"}
		cfg.Grade = func(_ context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) (*schemas.GraderResult, []schemas.GraderResult) {
			ok := pass(c.ID, rec.Trial)
			score := 0.0
			if ok {
				score = 1
			}
			return &schemas.GraderResult{Pass: ok, Score: score, Grader: "test"}, nil
		}
	}
	return Options{
		Config:  cfg,
		Prompts: Prompts{Name: prompts, Path: prompts},
		K:       k,
		Output:  filepath.Join(dir, "out.jsonl"),
	}
}

// trialsOf adds trials options with the summary written beside the output.
func trialsOf(opts Options, dir string) Options {
	opts.Trials = &TrialsOptions{SummaryPath: filepath.Join(dir, "summary.json"), Seed: trials.DefaultSeed, Resamples: 100}
	return opts
}

// recorder keeps the events of a run.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// lines reads the JSON lines of a file.
func lines[T any](t *testing.T, name string) []T {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%s: %v: %s", name, err, l)
		}
		out = append(out, v)
	}
	return out
}

func ids(recs []schemas.TrialsRecord) string {
	var s []string
	for _, r := range recs {
		s = append(s, fmt.Sprintf("%s:%d/%d", r.ID, r.C, r.N))
	}
	return strings.Join(s, " ")
}

// TestTrialsRecordsInFileOrder checks that the trials records go out in
// the order of the prompts file although the first case finishes last,
// each with all its trials, and that the events come in order: Planned
// first, Finished last, a CaseFinished per case in file order.
func TestTrialsRecordsInFileOrder(t *testing.T) {
	dir := t.TempDir()
	cases := [][2]string{{"slow", "sleep 400"}, {"b", "echo b"}, {"c", "echo c"}}
	opts := trialsOf(options(t, dir, cases, 2, 3, func(id string, trial int) bool { return trial == 1 }), dir)
	rec := &recorder{}
	opts.Events = rec
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	got := lines[schemas.TrialsRecord](t, opts.Output)
	if want := "slow:1/2 b:1/2 c:1/2"; ids(got) != want {
		t.Errorf("trials records %q, want %q", ids(got), want)
	}
	if res.Units != 6 || res.Finished != 6 || res.Summary == nil || res.Summary.Cases != 3 {
		t.Errorf("result %+v, summary %+v", res, res.Summary)
	}
	if _, err := os.Stat(opts.Output + ".partial"); !os.IsNotExist(err) {
		t.Errorf("partial file left behind: %v", err)
	}
	var order []string
	written := 0
	for _, e := range rec.events {
		switch e := e.(type) {
		case CaseFinished:
			order = append(order, e.Record.ID)
		case RecordWritten:
			written++
		}
	}
	if p, ok := rec.events[0].(Planned); !ok || p.Total != 6 {
		t.Errorf("first event %#v, want Planned{Total: 6}", rec.events[0])
	}
	if _, ok := rec.events[len(rec.events)-1].(Finished); !ok {
		t.Errorf("last event %#v, want Finished", rec.events[len(rec.events)-1])
	}
	if strings.Join(order, " ") != "slow b c" || written != 6 {
		t.Errorf("cases finished %v, records %d", order, written)
	}
}

// TestBudgetStopThenResume stops a trials run by its token budget after
// the first turn, then resumes it without a budget: the second run runs
// only the units the first did not finish, takes the finished trial from
// the partial file, and writes every case whole.
func TestBudgetStopThenResume(t *testing.T) {
	dir := t.TempDir()
	cases := [][2]string{{"a", "echo a"}, {"b", "echo b"}, {"c", "echo c"}}
	opts := trialsOf(options(t, dir, cases, 2, 1, func(string, int) bool { return true }, "--usage"), dir)
	opts.Limits = runctl.Limits{MaxTokens: 1}
	rec := &recorder{}
	opts.Events = rec
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop == nil || res.Stop.Kind != runctl.KindBudget || res.Finished != 1 || res.NotRun() != 5 {
		t.Fatalf("first run: stop %+v, finished %d, not run %d", res.Stop, res.Finished, res.NotRun())
	}
	stopped := false
	for _, e := range rec.events {
		if s, ok := e.(StopRequested); ok && s.Stop.Kind == runctl.KindBudget {
			stopped = true
		}
	}
	if !stopped {
		t.Error("no StopRequested event")
	}
	if res.Summary != nil {
		t.Errorf("a run the budget stopped wrote a summary: %+v", res.Summary)
	}
	if n := len(lines[schemas.CaptureRecord](t, opts.Output+".partial")); n != 1 {
		t.Errorf("partial file holds %d trials, want 1", n)
	}

	opts.Limits, opts.Resume, opts.Events = runctl.Limits{}, true, nil
	res, err = Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 1 || res.Units != 5 || res.Finished != 5 {
		t.Errorf("resumed run: done %d, units %d, finished %d; want 1, 5, 5", res.Done, res.Units, res.Finished)
	}
	if got := lines[schemas.TrialsRecord](t, opts.Output); ids(got) != "a:2/2 b:2/2 c:2/2" {
		t.Errorf("trials records after resume: %s", ids(got))
	}
	if _, err := os.Stat(opts.Output + ".partial"); !os.IsNotExist(err) {
		t.Errorf("partial file left behind: %v", err)
	}
}

// TestResumeCaptureRunsOnlyNewUnits resumes a capture run over a prompts
// file that gained cases: only the new ones run.
func TestResumeCaptureRunsOnlyNewUnits(t *testing.T) {
	dir := t.TempDir()
	opts := options(t, dir, [][2]string{{"a", "echo a"}, {"b", "echo b"}}, 1, 2, nil)
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	more := options(t, dir, [][2]string{{"a", "echo a"}, {"b", "echo b"}, {"c", "echo c"}}, 1, 2, nil)
	more.Resume = true
	res, err := Run(context.Background(), more)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 2 || res.Units != 1 || res.Written != 1 {
		t.Errorf("done %d, units %d, written %d; want 2, 1, 1", res.Done, res.Units, res.Written)
	}
	var got []string
	for _, r := range lines[schemas.CaptureRecord](t, opts.Output) {
		got = append(got, r.ID)
	}
	if strings.Join(got, " ") != "a b c" {
		t.Errorf("records %v", got)
	}
}

// TestResumeRefusesAnotherStoppingRule resumes an adaptive output with
// another rule and with none.
func TestResumeRefusesAnotherStoppingRule(t *testing.T) {
	dir := t.TempDir()
	opts := trialsOf(options(t, dir, [][2]string{{"a", "echo a"}}, 1, 1, func(string, int) bool { return true }), dir)
	opts.Trials.Adaptive = &trials.Policy{MinK: 2, MaxK: 4, CIWidth: 0.9}
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*trials.Policy{{MinK: 2, MaxK: 5, CIWidth: 0.9}, nil} {
		opts.Resume, opts.Trials.Adaptive = true, p
		_, err := Run(context.Background(), opts)
		var rm *RuleMismatchError
		var e *Error
		if !errorsAs(err, &e) || e.Kind != KindResume || !errorsAs(err, &rm) || rm.ID != "a" || rm.Written == nil {
			t.Errorf("policy %v: error %v, want a RuleMismatchError of kind resume", p, err)
		}
	}
}

// TestAdaptiveSpendsTrialsWhereUncertain runs a case that always passes
// and one that passes every other trial: the first stops when its
// interval is narrow, the second gets trials up to max-k, and the units
// the run added are reported.
func TestAdaptiveSpendsTrialsWhereUncertain(t *testing.T) {
	dir := t.TempDir()
	cases := [][2]string{{"flaky", "echo f"}, {"sure", "echo s"}}
	pass := func(id string, trial int) bool { return id == "sure" || trial%2 == 0 }
	opts := trialsOf(options(t, dir, cases, 1, 2, pass), dir)
	policy := trials.Policy{MinK: 3, MaxK: 12, CIWidth: 0.45}
	opts.Trials.Adaptive = &policy
	rec := &recorder{}
	opts.Events = rec
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	got := lines[schemas.TrialsRecord](t, opts.Output)
	if len(got) != 2 || got[0].ID != "flaky" || got[1].ID != "sure" {
		t.Fatalf("records %s", ids(got))
	}
	flaky, sure := got[0], got[1]
	if flaky.Adaptive == nil || sure.Adaptive == nil {
		t.Fatal("records without adaptive")
	}
	if flaky.N != policy.MaxK || flaky.Adaptive.Stop != trials.StopMaxK || sure.Adaptive.Stop != trials.StopWidth || sure.N >= flaky.N {
		t.Errorf("flaky n=%d stop %s, sure n=%d stop %s", flaky.N, flaky.Adaptive.Stop, sure.N, sure.Adaptive.Stop)
	}
	added := 0
	for _, e := range rec.events {
		if u, ok := e.(UnitsAdded); ok {
			added += u.N
		}
	}
	if first := 2 * policy.MinK; res.Units != flaky.N+sure.N || added != res.Units-first {
		t.Errorf("units %d (added %d), trials %d", res.Units, added, flaky.N+sure.N)
	}
}

// TestShardsSplitTheUnits runs a trials run in two shards: each writes
// capture records, the shards share no unit and together hold all.
func TestShardsSplitTheUnits(t *testing.T) {
	cases := [][2]string{{"a", "echo a"}, {"b", "echo b"}, {"c", "echo c"}}
	seen := map[string]int{}
	for i := 1; i <= 2; i++ {
		dir := t.TempDir()
		opts := trialsOf(options(t, dir, cases, 2, 1, func(string, int) bool { return true }), dir)
		opts.Shard = Shard{I: i, N: 2}
		res, err := Run(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Units != 3 || res.Summary != nil {
			t.Errorf("shard %d: %d units, summary %v", i, res.Units, res.Summary)
		}
		for _, r := range lines[schemas.CaptureRecord](t, opts.Output) {
			seen[fmt.Sprintf("%s/%d", r.ID, r.Trial)]++
		}
	}
	if len(seen) != 6 {
		t.Errorf("units %v, want all 6", seen)
	}
	for u, n := range seen {
		if n != 1 {
			t.Errorf("unit %s ran %d times", u, n)
		}
	}
}

// TestValidate names what is wrong with options.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Prompts: Prompts{Path: "p"}}, "k must be at least 1"},
		{Options{K: 1, Prompts: Prompts{Path: "p"}, Resume: true, Force: true, Output: "o"}, "contradict"},
		{Options{K: 1, Prompts: Prompts{Path: "p"}, Resume: true}, "needs an output file"},
		{Options{K: 1, Prompts: Prompts{Path: "p"}, Shard: Shard{1, 2}, Trials: &TrialsOptions{Adaptive: &trials.Policy{MinK: 1, MaxK: 2, CIWidth: 0.5}}}, "cannot be sharded"},
	} {
		err := tc.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
	if _, err := ParseShard("3/2"); err == nil {
		t.Error("shard 3/2 accepted")
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestResumeRefusesChangedCaseInPartialFile stops a trials run with one
// trial of case a in the partial file, changes a's prompt, and resumes:
// refused, naming a; with RerunChanged its trials run again on the new
// prompt, and a further resume finds nothing changed.
func TestResumeRefusesChangedCaseInPartialFile(t *testing.T) {
	dir := t.TempDir()
	opts := trialsOf(options(t, dir, [][2]string{{"a", "echo old"}, {"b", "echo b"}}, 2, 1, func(string, int) bool { return true }, "--usage"), dir)
	opts.Limits = runctl.Limits{MaxTokens: 1}
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if n := len(lines[schemas.CaptureRecord](t, opts.Output+".partial")); n != 1 {
		t.Fatalf("partial file holds %d trials, want 1", n)
	}
	changed := trialsOf(options(t, dir, [][2]string{{"a", "echo new"}, {"b", "echo b"}}, 2, 1, func(string, int) bool { return true }, "--usage"), dir)
	changed.Resume = true
	_, err := Run(context.Background(), changed)
	var cc *ChangedCasesError
	if !errorsAs(err, &cc) || fmt.Sprint(cc.IDs) != "[a]" {
		t.Fatalf("resume after a changed: %v, want a *ChangedCasesError naming a", err)
	}
	changed.RerunChanged = true
	res, err := Run(context.Background(), changed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 0 || res.Finished != 4 {
		t.Errorf("rerun: done %d, finished %d; want 0 and 4 (a's old trial run again)", res.Done, res.Finished)
	}
	got := lines[schemas.TrialsRecord](t, changed.Output)
	if ids(got) != "a:2/2 b:2/2" {
		t.Fatalf("trials records: %s", ids(got))
	}
	for _, e := range got[0].Trials {
		if e.Record.Output != "new" {
			t.Errorf("a trial %d answered %q, want the new prompt's", e.TrialNum, e.Record.Output)
		}
	}
	changed.RerunChanged = false
	if res, err := Run(context.Background(), changed); err != nil || res.Units != 0 {
		t.Errorf("a further resume: %v, %d units; want nothing to run", err, res.Units)
	}
}
