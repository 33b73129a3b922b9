package capture

import (
	"context"
	"fmt"
	"os"
	"sync"

	"harness/image"
	"harness/sandbox/egress"
	"harness/schemas"
	"harness/workspace"
)

// regrade grades a unit whose turn an earlier run played to the end and
// whose grading that run's stop cut short (Unit.Record, ungraded): the
// record as it was written, in the workspace copy or layer that run kept,
// with a task's verifier run again in the layer. The agent does not run.
// It reports false, having done nothing, when that workspace is gone: the
// unit then runs again from the start. When the run is stopping, the
// record is written back as it was, for the next --resume.
func (w *worker) regrade(ctx context.Context, u Unit) bool {
	cfg := &w.r.cfg
	rec := *u.Record
	run := &caseRun{unit: u, record: &rec, judged: make(chan struct{}), concluded: true}
	if ctx.Err() != nil || w.r.stopped() {
		w.emit(run)
		return true
	}
	if ws := rec.Workspace; ws != nil && ws.Path != "" {
		kept := *ws
		rec.Workspace = &kept
		if cfg.Image != nil {
			img, task, err := cfg.Image.For(u.Case)
			l := &image.Layer{Dir: ws.Path, Self: cfg.Image.Self}
			if err != nil || !isDir(l.Upper()) {
				return false
			}
			// The verifier runs over the image: unpacked, held until
			// the layer is done with.
			img, release, err := cfg.Image.acquire(ctx, img)
			if err != nil {
				return false
			}
			l.Image = img
			workdir := img.Workdir()
			if task != nil {
				workdir = task.Workdir(img)
			}
			run.layer = &caseLayer{layer: l, task: task, workdir: workdir, release: release}
			kept.Kept = cfg.Image.Keep
		} else {
			if !isDir(ws.Path) {
				return false
			}
			run.ws = &workspace.Workspace{Template: ws.Template, Path: ws.Path}
			kept.Kept = cfg.KeepWorkspaces
		}
	}
	// The record as the run would have graded it: no error of its own
	// (an ungraded record had none), no verdict yet.
	if n := len(rec.Errors); n > 0 && rec.Error != nil && rec.Errors[n-1] == rec.Error.Message {
		rec.Errors = rec.Errors[: n-1 : n-1]
	}
	if len(rec.Errors) == 0 {
		rec.Errors = nil
	}
	rec.Error, rec.Score, rec.Scores, rec.Outcome = nil, nil, nil, nil
	rec.Provenance.Graders = cfg.GraderNames
	if run.layer != nil && run.layer.task != nil {
		var mu sync.Mutex
		run.verdict = w.verify(run.layer, func(c egress.Connection) {
			mu.Lock()
			defer mu.Unlock()
			addVerifierStep(&rec, c)
		})
		rec.Score = run.verdict
		if rec.Score.Error == nil && len(rec.Score.Outcome) > 0 {
			rec.Outcome = rec.Score.Outcome
		}
	}
	w.emit(run)
	w.await(run)
	return true
}

// addVerifierStep puts a connection of a regraded unit's verifier at the
// end of its written trajectory: a network step of phase verifier.
func addVerifierStep(rec *schemas.CaptureRecord, c egress.Connection) {
	st := networkStep(c)
	st.Phase = schemas.PhaseVerifier
	st.StepID = fmt.Sprintf("%s-t%d-s%d", rec.ID, rec.Trial, len(rec.Trajectory)+1)
	st.Timestamp = max(c.At.UnixMilli()-rec.Timing.Start, 0)
	rec.Trajectory = append(rec.Trajectory, st)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
