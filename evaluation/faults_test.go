package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/capture"
	"harness/schemas"
	"harness/trials"
)

// faultSuite writes the prompts of a suite of 20 cases, k 3 (60 trials),
// with faults injected or not: 6 cases whose model provider fails the
// first two prompts (503, 429 with a Retry-After, a lost connection: 12
// failed attempts, 20% of the trials), 2 cases whose agent hangs past its
// time limit (6 trials, 10%), 1 whose agent crashes (3 trials, 5%), and
// the rest answering right or wrong. Without faults the flaky cases
// answer at once; the hanging and crashing cases answer wrong, as the
// agent failing them is what the faulty run must count.
func faultSuite(t testing.TB, dir string, faults bool) string {
	return faultSuiteOf(t, dir, faults, faults)
}

// faultSuiteOf is faultSuite with the provider's faults and the agent's
// (hangs, crashes) chosen apart.
func faultSuiteOf(t testing.TB, dir string, provider, agent bool) string {
	t.Helper()
	var lines []string
	add := func(id, input string) {
		b, _ := json.Marshal(map[string]any{"id": id, "input": input})
		lines = append(lines, string(b))
	}
	kinds := []string{"503", "429", "drop", "503", "429", "drop"}
	for i, kind := range kinds {
		input := "echo ok"
		if provider {
			input = fmt.Sprintf("flaky %s 2 %s ok", filepath.Join(dir, fmt.Sprintf("flaky-%d", i)), kind)
		}
		add(fmt.Sprintf("flaky-%d", i), input)
	}
	for i := range 2 {
		input := "echo wrong"
		if agent {
			input = "hang"
		}
		add(fmt.Sprintf("hang-%d", i), input)
	}
	crash := "echo wrong"
	if agent {
		crash = "crash"
	}
	add("crash", crash)
	for i := range 11 {
		answer := "ok"
		if i%4 == 3 {
			answer = "wrong"
		}
		add(fmt.Sprintf("plain-%d", i), "echo "+answer)
	}
	name := filepath.Join(dir, "suite.jsonl")
	if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// faultRun runs the suite with retries up to max and returns its summary
// and trials records.
func faultRun(t *testing.T, faults bool, max int) (schemas.TrialsSummary, []schemas.TrialsRecord) {
	t.Helper()
	dir := t.TempDir()
	res, out := faultRunOf(t, dir, faultSuite(t, dir, faults), max)
	return *res.Summary, lines[schemas.TrialsRecord](t, out)
}

// faultRunOf runs the prompts with retries up to max, in dir.
func faultRunOf(t *testing.T, dir, prompts string, max int) (*Result, string) {
	t.Helper()
	opts := trialsOf(options(t, dir, nil, 3, 4, nil, "--usage"), dir)
	opts.Prompts = Prompts{Name: "suite.jsonl", Path: prompts}
	opts.Config.TurnTimeout = 2 * time.Second
	opts.Config.CancelGrace = 200 * time.Millisecond
	opts.Config.Retry = capture.Retry{Max: max, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	opts.Config.GraderNames = []string{"ok"}
	opts.Config.Grade = func(_ context.Context, rec *schemas.CaptureRecord, _ *schemas.PromptCase) (*schemas.GraderResult, []schemas.GraderResult) {
		ok := strings.TrimSpace(rec.Output) == "ok"
		score := 0.0
		if ok {
			score = 1
		}
		return &schemas.GraderResult{Pass: ok, Score: score, Grader: "ok"}, nil
	}
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary == nil {
		t.Fatal("no summary")
	}
	return res, opts.Output
}

// TestFaultRetriesCost measures what retrying the provider's failures
// costs the injected run against the clean one, with the agent's own
// faults left out (their time limit would swamp the figure): the wall of
// each run and the failed attempts' spend, logged for BENCHMARKS.md
// (go test -run TestFaultRetriesCost -v ./evaluation/). It checks only
// what does not depend on the machine: every trial graded, the failed
// attempts counted apart.
func TestFaultRetriesCost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider bool
		retries  int
	}{{"clean", false, 2}, {"provider faults, retries 2", true, 2}, {"provider faults, retries 0", true, 0}} {
		dir := t.TempDir()
		start := time.Now()
		res, _ := faultRunOf(t, dir, faultSuiteOf(t, dir, tc.provider, false), tc.retries)
		wall := time.Since(start)
		c := trials.CountsOf(*res.Summary)
		t.Logf("%s: wall %v, %s; tokens %d, failed attempts' tokens %d", tc.name, wall.Round(time.Millisecond), c.Line(),
			res.Summary.Cost.Tokens(), c.AttemptsCost.Tokens())
		want := 60
		if tc.provider && tc.retries == 0 {
			want = 48
		}
		if c.Graded != want {
			t.Errorf("%s: %d graded, want %d", tc.name, c.Graded, want)
		}
	}
}

// Faults injected into a run leave its headline where the clean run's is:
// the provider's failures are retried and end graded, each failed attempt
// on its trial's record and none counted as a trial; the agent's hangs
// and crashes count as its failures; the coverage says every trial is in.
// Without retries, the provider's failures are left out and said so, and
// a gate on the under-covered run fails for that reason.
func TestFaultInjection(t *testing.T) {
	clean, _ := faultRun(t, false, 2)
	got, recs := faultRun(t, true, 2)
	if clean.Graded != 60 || got.Graded != clean.Graded || got.Passes != clean.Passes {
		t.Fatalf("faulty run %d of %d passed, clean run %d of %d", got.Passes, got.Graded, clean.Passes, clean.Graded)
	}
	if *got.PassRate != *clean.PassRate {
		t.Errorf("pass rate %v, clean %v", *got.PassRate, *clean.PassRate)
	}
	if got.Failures[schemas.ErrTimeout] != 6 || got.Failures[schemas.ErrAgentCrash] != 3 || len(got.LeftOut) != 0 {
		t.Errorf("failures %v, left out %v", got.Failures, got.LeftOut)
	}
	if got.Retries == nil || got.Retries.Attempts != 12 {
		t.Fatalf("retries %+v, want 12 failed attempts", got.Retries)
	}
	c := trials.CountsOf(got)
	if line := c.Line(); !strings.Contains(line, "over 60 of 60 trials") || !strings.Contains(line, "12 failed attempts retried") {
		t.Errorf("line %q", line)
	}
	attempts := 0
	for _, tr := range recs {
		for _, e := range tr.Trials {
			rec := e.Capture()
			for _, a := range rec.Attempts {
				attempts++
				if a.Error == nil || a.Error.Owner != schemas.OwnerInfra || !strings.HasPrefix(tr.ID, "flaky-") {
					t.Errorf("%s trial %d: attempt %+v", tr.ID, rec.Trial, a.Error)
				}
				if !strings.Contains(a.Error.Evidence, "provider") {
					t.Errorf("%s: evidence %q", tr.ID, a.Error.Evidence)
				}
			}
			switch {
			case strings.HasPrefix(tr.ID, "hang-"):
				if rec.Error == nil || rec.Error.Owner != schemas.OwnerAgent || rec.Error.Limit != "timeout" || rec.Score == nil || e.Pass == nil || *e.Pass {
					t.Errorf("%s: hang recorded as %+v, score %+v", tr.ID, rec.Error, rec.Score)
				}
			case tr.ID == "crash":
				if rec.Error == nil || rec.Error.Owner != schemas.OwnerAgent || rec.Error.Class != schemas.ErrAgentCrash {
					t.Errorf("crash recorded as %+v", rec.Error)
				}
			case rec.Error != nil:
				t.Errorf("%s trial %d: error %+v after its retries", tr.ID, rec.Trial, rec.Error)
			}
		}
	}
	if attempts != 12 {
		t.Errorf("%d attempts on the records, want 12", attempts)
	}

	// No retries: the provider's failures are left out, said by owner,
	// and no gate is decided on what is left.
	bare, _ := faultRun(t, true, 0)
	bc := trials.CountsOf(bare)
	if bare.Graded != 48 || bare.LeftOut[schemas.OwnerInfra] != 12 || bare.Retries != nil {
		t.Fatalf("without retries: graded %d, left out %v, retries %+v", bare.Graded, bare.LeftOut, bare.Retries)
	}
	if cov := bc.Coverage(); cov != "over 48 of 60 trials; 12 left out (infra: 12)" {
		t.Errorf("coverage %q", cov)
	}
	fails := trials.CheckGates([]trials.Gate{{Metric: trials.GatePassRate, Min: 0.1}}, bare)
	if len(fails) != 1 || !strings.Contains(fails[0], "under-covered") {
		t.Errorf("gate on the under-covered run: %q", fails)
	}
}
