package capture

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/schemas"
)

// stopAfter is a Control that stops the run once n turns have answered.
type stopAfter struct {
	n       int
	mu      sync.Mutex
	seen    int
	stopped chan struct{}
}

func (s *stopAfter) Answered(*schemas.CaptureRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	if s.seen == s.n {
		close(s.stopped)
	}
}

func (s *stopAfter) Stopped() <-chan struct{} { return s.stopped }

// TestWarmAgentsEachUnitItsOwn: with an agent process per unit, the next
// units' agents are started ahead, each in the unit's own fresh copy; a
// prepared unit's clock starts as if it had been prepared right before its
// prompt; when the run stops, the prepared units leave no record, no
// process and no workspace copy behind, and Run returns only once every
// agent is gone (checked at once, not polled).
func TestWarmAgentsEachUnitItsOwn(t *testing.T) {
	const marker = "303.5"
	tmpl := t.TempDir()
	if err := os.WriteFile(tmpl+"/f.txt", []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copies := t.TempDir()
	cfg := testConfig(t)
	// An agent with a child, that stays when its stdin closes: it must
	// be signalled to go.
	cfg.Agent = []string{"/bin/sh", "-c", "sleep " + marker + " & exec \"$0\" --ignore-eof", os.Args[0]}
	cfg.FreshProcess = true
	cfg.Workspace = tmpl
	cfg.WorkspaceTmp = copies
	cfg.Warm = 2
	cfg.Settle = 50 * time.Millisecond
	ctl := &stopAfter{n: 3, stopped: make(chan struct{})}
	cfg.Control = ctl
	r := NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var recs []*schemas.CaptureRecord
	units := cases("sleep 100", "sleep 100", "echo three", "echo four", "echo five", "echo six")
	_, err := r.Run(context.Background(), slices.Values(units), func(rec *schemas.CaptureRecord) error {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(recs, func(a, b *schemas.CaptureRecord) int { return strings.Compare(a.ID, b.ID) })
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3 (the run stopped at the third answer)", len(recs))
	}
	paths := map[string]bool{}
	for i, r := range recs {
		if r.Error != nil {
			t.Fatalf("record %d: %+v", i, r.Error)
		}
		if r.Workspace == nil || paths[r.Workspace.Path] {
			t.Fatalf("record %d: workspace %+v is not a copy of its own", i, r.Workspace)
		}
		paths[r.Workspace.Path] = true
	}
	for i := 1; i < len(recs); i++ {
		// Its preparation overlapped the case before; its clock did not.
		prev, r := recs[i-1], recs[i]
		if r.Timing.Start+r.Timing.SessionCreation+2 < prev.Timing.End {
			t.Errorf("case %d: start %d + sessionCreation %d is before the case before it ended (%d)", i, r.Timing.Start, r.Timing.SessionCreation, prev.Timing.End)
		}
	}
	if kids, marked := children(marker); len(kids) > 0 || len(marked) > 0 {
		t.Errorf("left behind when Run returned: %q %q", kids, marked)
	}
	left, _ := os.ReadDir(copies)
	for _, e := range left {
		t.Errorf("workspace copy left behind: %s", e.Name())
	}
}

// TestWarmStepTimesWithinTheCase: a case prepared ahead, which waited for
// the case before it, counts its steps' timestamps from its own
// timing.start, as timing.total does: every step before the answer is
// within the case's time (setup steps within its session creation), and
// none is before its start.
func TestWarmStepTimesWithinTheCase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "--early-updates", "--session-delay", "30")
	cfg.Warm = 1
	cfg.Settle = 20 * time.Millisecond
	recs := run(t, cfg, cases("sleep 300", "full", "sleep 300", "full"))
	setup := 0
	for _, rec := range recs {
		if rec.Error != nil {
			t.Fatalf("%s: %+v", rec.ID, rec.Error)
		}
		for _, s := range rec.Trajectory {
			if s.Phase == schemas.PhaseLate {
				continue // after the answer: the case's time is over
			}
			if s.Timestamp < 0 || s.Timestamp > rec.Timing.Total {
				t.Errorf("%s: step %s (%s) at %d ms, outside the case's %d ms", rec.ID, s.StepID, s.Type, s.Timestamp, rec.Timing.Total)
			}
			if s.Phase == schemas.PhaseSetup {
				setup++
				if s.Timestamp > rec.Timing.SessionCreation {
					t.Errorf("%s: setup step %s at %d ms, after the session was made (%d ms)", rec.ID, s.StepID, s.Timestamp, rec.Timing.SessionCreation)
				}
			}
		}
	}
	if setup < len(recs) {
		t.Fatalf("%d setup steps in %d records: the agent's early updates were not recorded", setup, len(recs))
	}
}
