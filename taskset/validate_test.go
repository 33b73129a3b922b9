package taskset

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"harness/harbor"
	"harness/image"
	"harness/schemas"
)

func code(n int) *int { return &n }

// A verifier error is no verdict once the run is stopping; one that died
// of a stop signal is named so.
func TestStopped(t *testing.T) {
	stopped, stop := context.WithCancel(context.Background())
	stop()
	running := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  *schemas.ErrorInfo
		want string
	}{
		{"no error", stopped, nil, ""},
		{"the verifier's own error", running, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(1)}, ""},
		{"died of SIGTERM, no stop followed", running, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(143)}, ""},
		{"died of SIGTERM as the run stopped", stopped, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(143)}, "the verifier died of exit status 143 as the run was stopped"},
		{"killed by the run's stop", stopped, &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "tests/test.sh wrote neither\nmore", ExitCode: code(-1)}, "the run was stopping when the verifier failed (tests/test.sh wrote neither)"},
	} {
		if got := Stopped(c.ctx, c.err, 0); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A verifier that died of a stop signal waits for the stop it announces:
// the stop arriving within the wait makes it no verdict.
func TestStoppedWaitsForTheStop(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	go stop()
	verr := &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", Signal: "terminated"}
	if got := Stopped(ctx, verr, time.Hour); got != "the verifier died of terminated as the run was stopped" {
		t.Errorf("%q", got)
	}
}

// fakeRuns is a reference runner that answers from a table, by
// "task agent".
type fakeRuns struct {
	results map[string]*harbor.ReferenceResult
	errs    map[string]error
	// before, when set, runs before the answer (to stop the run).
	before map[string]func()
	ran    []string
	images []*image.Image
}

func (f *fakeRuns) run(ctx context.Context, t *harbor.Task, img *image.Image, agent string, o harbor.TrialOptions) (*harbor.ReferenceResult, error) {
	key := t.Name + " " + agent
	f.ran = append(f.ran, key)
	f.images = append(f.images, img)
	if b := f.before[key]; b != nil {
		b()
	}
	if err := f.errs[key]; err != nil {
		return nil, err
	}
	r := f.results[key]
	if r == nil {
		want := 1.0
		if agent == harbor.Nop {
			want = 0
		}
		r = &harbor.ReferenceResult{Verdict: schemas.GraderResult{Grader: harbor.GraderName, Score: want, Pass: want == 1}, Want: want, OK: true}
	}
	r.Task, r.Agent = t.Name, agent
	return r, nil
}

// Each task runs with the oracle, then the no-op agent; a wrong score is
// misjudged, a verifier error a grader error, and each run's line says
// what was wanted.
func TestValidateVerdicts(t *testing.T) {
	set := dataset(t)
	imgs := map[string]*image.Image{"alpha": {Ref: "a"}, "zeta": {Ref: "z"}}
	solve := &harbor.Ran{ExitCode: 2, Duration: 1500 * time.Millisecond, Output: "no\n"}
	f := &fakeRuns{results: map[string]*harbor.ReferenceResult{
		"alpha nop":    {Verdict: schemas.GraderResult{Score: 1, Pass: true}, Want: 0},
		"zeta oracle":  {Verdict: schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", ExitCode: code(1)}}, Want: 1, Solve: solve},
		"alpha oracle": {Verdict: schemas.GraderResult{Score: 1, Pass: true}, Want: 1, OK: true, Solve: &harbor.Ran{}},
	}}
	var got []Outcome
	tally, err := set.Validate(context.Background(), ValidateOptions{Images: imgs, Run: f.run, Each: func(o Outcome) error {
		got = append(got, o)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha oracle", "alpha nop", "zeta oracle", "zeta nop"}; !reflect.DeepEqual(f.ran, want) {
		t.Errorf("ran %v, want %v", f.ran, want)
	}
	if f.images[0] != imgs["alpha"] || f.images[3] != imgs["zeta"] {
		t.Errorf("images %v", f.images)
	}
	want := Tally{Runs: 4, Checked: 4, Misjudged: []string{"alpha (nop)"}, GraderErrors: []string{"zeta (oracle)"}}
	if !reflect.DeepEqual(tally, want) || tally.Correct() != 2 {
		t.Errorf("tally %+v (correct %d), want %+v", tally, tally.Correct(), want)
	}
	if len(got) != 4 {
		t.Fatalf("%d outcomes", len(got))
	}
	for i, c := range []struct {
		kind, want, ref                   string
		correct, misjudged, graderErr, sf bool
	}{
		{schemas.RefPositive, "pass", "solution/solve.sh", true, false, false, false},
		{schemas.RefNegative, "fail", "", false, true, false, false},
		{schemas.RefPositive, "pass", "solution/solve.sh", false, false, true, true},
		{schemas.RefNegative, "fail", "", true, false, false, false},
	} {
		o := got[i]
		v := o.Result
		if v.ID != o.Task.Name || v.Kind != c.kind || v.Want != c.want || v.Reference != c.ref || v.Correct != c.correct || v.Passes != o.Ref.Verdict.Pass {
			t.Errorf("%s: result %+v", o.Label(), v)
		}
		if o.Misjudged() != c.misjudged || o.GraderError() != c.graderErr || o.SolveFailed() != c.sf || o.Stopped != "" {
			t.Errorf("%s: misjudged %v, grader error %v, solve failed %v, stopped %q", o.Label(), o.Misjudged(), o.GraderError(), o.SolveFailed(), o.Stopped)
		}
	}
	if s := got[2].Result.Solve; s == nil || *s != (schemas.SolveRun{ExitCode: 2, DurationMs: 1500, Output: "no\n"}) {
		t.Errorf("solve %+v", s)
	}
	if got[1].Result.Solve != nil {
		t.Errorf("the no-op run has a solve run: %+v", got[1].Result.Solve)
	}
}

// A run the stop ended is no verdict, and no run starts after it; a
// verifier killed by the stop is named so.
func TestValidateStopped(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		result  *harbor.ReferenceResult
		stopped string
	}{
		{"the run failed", errors.New("killed"), nil, "the run was stopped"},
		{"the verifier died", nil, &harbor.ReferenceResult{Verdict: schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward", Signal: "interrupt"}}, Want: 0}, "the verifier died of interrupt as the run was stopped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := dataset(t)
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			f := &fakeRuns{
				before:  map[string]func(){"alpha nop": stop},
				errs:    map[string]error{"alpha nop": c.err},
				results: map[string]*harbor.ReferenceResult{"alpha nop": c.result},
			}
			var got []Outcome
			tally, err := set.Validate(ctx, ValidateOptions{Run: f.run, Each: func(o Outcome) error {
				got = append(got, o)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.ran, []string{"alpha oracle", "alpha nop"}) {
				t.Errorf("ran %v", f.ran)
			}
			if want := (Tally{Runs: 4, Checked: 1}); !reflect.DeepEqual(tally, want) {
				t.Errorf("tally %+v, want %+v", tally, want)
			}
			if len(got) != 2 {
				t.Fatalf("%d outcomes", len(got))
			}
			o := got[1]
			verr := o.Result.GraderResult.Error
			if o.Stopped != c.stopped || verr == nil || verr.Class != schemas.ErrInterrupted || verr.Message != "interrupted: "+c.stopped || o.Result.Correct || o.GraderError() || o.Misjudged() {
				t.Errorf("outcome %+v, result %+v", o, o.Result)
			}
			if o.Result.GraderResult.Grader != harbor.GraderName || o.Label() != "alpha (nop)" {
				t.Errorf("grader %q, label %q", o.Result.GraderResult.Grader, o.Label())
			}
		})
	}
}

// A run that could not be made ends the validation with an error naming
// it; so does an error from Each.
func TestValidateErrors(t *testing.T) {
	set := dataset(t)
	boom := errors.New("boom")
	f := &fakeRuns{errs: map[string]error{"alpha nop": boom}}
	n := 0
	_, err := set.Validate(context.Background(), ValidateOptions{Run: f.run, Each: func(Outcome) error { n++; return nil }})
	if !errors.Is(err, boom) || err.Error() != "task alpha, nop: boom" || n != 1 {
		t.Errorf("error %v after %d outcomes", err, n)
	}
	f = &fakeRuns{}
	_, err = set.Validate(context.Background(), ValidateOptions{Run: f.run, Each: func(Outcome) error { return boom }})
	if !errors.Is(err, boom) || len(f.ran) != 1 {
		t.Errorf("error %v after %v", err, f.ran)
	}
}
