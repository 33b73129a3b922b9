package capture

import (
	"context"
	"fmt"
	"strings"
	"time"

	"harness/schemas"
)

// A stop is not a verdict. When a run is stopped by a signal sent to all of
// its processes at once (Slurm's scancel and preemption, systemctl stop,
// docker stop, a Kubernetes eviction, a closed terminal), its agents and
// graders may die of that signal before harness itself sees it. A unit
// that failed that way, or failed at all once the run was stopping, was
// not judged: its record is written as interrupted, and --resume runs it
// again. The rule, per record:
//
//   - The run is stopping (the caller's context is cancelled: a signal to
//     harness) and the record holds an agent or grader error: interrupted.
//     A resource cap the sandbox enforced stays resource_limit: that is
//     the agent's own doing. (A budget or --stop-on, decided by Control,
//     cancels the turns in flight, which end interrupted; a unit that had
//     answered keeps its result, errors included: the error that stopped
//     the run is one of them.)
//   - Grading was stopped (a second interrupt): any grader error is
//     interrupted.
//
// A unit whose agent's turn was complete (no error of its own) and which
// the stop cut short only in its grading is kept: its record is written
// ungraded (interrupted, pending "grading", see CaptureRecord.Ungraded)
// with its workspace copy or layer left on disk, and --resume grades it
// there without running the agent again.
//   - A process of the unit died of SIGTERM, SIGINT or SIGHUP (or a shell
//     exited 128+N for one of them) and the run is not stopping yet: the
//     record waits up to StopWait for the stop that such a signal
//     announces. If it comes, interrupted; if not, the error stays, with
//     the signal named.
//
// A process killed by SIGKILL (the OOM killer, a timeout of harness's
// own) is never taken for a stop.

// unitErrors lists a record's errors with what each belongs to: the
// agent's run, and every grader's result.
func unitErrors(rec *schemas.CaptureRecord) (agent *schemas.ErrorInfo, graders []*schemas.ErrorInfo) {
	if rec.Error != nil && rec.Error.Class != schemas.ErrInterrupted {
		agent = rec.Error
	}
	if rec.Score != nil && rec.Score.Error != nil {
		graders = append(graders, rec.Score.Error)
	}
	for i := range rec.Scores {
		if e := rec.Scores[i].Error; e != nil {
			graders = append(graders, e)
		}
	}
	return agent, graders
}

// settleStop applies the stop rule to a finished, graded record: run is
// the run's context (cancelled when it stops), grading the graders'
// (cancelled on a second interrupt).
func (r *Runner) settleStop(run, grading context.Context, rec *schemas.CaptureRecord) {
	agentErr, graderErrs := unitErrors(rec)
	if agentErr != nil && agentErr.Class == schemas.ErrResourceLimit {
		agentErr = nil // the sandbox's cap: a real error whatever the moment
	}
	if agentErr == nil && len(graderErrs) == 0 {
		return
	}
	if len(graderErrs) > 0 && grading.Err() != nil {
		halt(rec, "grading was stopped by a second interrupt")
		return
	}
	who, sig := "", ""
	if s, ok := agentErr.DiedOfStop(); ok {
		who, sig = "the agent", s
	}
	for _, e := range graderErrs {
		if s, ok := e.DiedOfStop(); ok && who == "" {
			who, sig = "a grader", s
		}
	}
	if run.Err() == nil && who != "" {
		// The signal may be the stop itself, reaching this process first.
		t := time.NewTimer(r.cfg.StopWait)
		select {
		case <-run.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if run.Err() == nil {
		return // no stop: the error is the unit's own
	}
	what := "the run was stopping when the unit failed"
	if who != "" {
		what = fmt.Sprintf("%s died of %s as the run was stopped", who, sig)
	} else if agentErr != nil {
		line, _, _ := strings.Cut(agentErr.Message, "\n")
		what += " (" + line + ")"
	} else {
		line, _, _ := strings.Cut(graderErrs[0].Message, "\n")
		what += " (grader: " + line + ")"
	}
	halt(rec, what)
}

// halt writes a record the stop cut short: ungraded when its agent's turn
// was complete and only its grading failed, else interrupted.
func halt(rec *schemas.CaptureRecord, why string) {
	if rec.Error != nil {
		interrupt(rec, why)
		return
	}
	rec.Error = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Pending: schemas.PendingGrading,
		Message: "interrupted: " + why + "; the agent's turn is complete and kept, and resuming the run grades it"}
	rec.Errors = append(rec.Errors, rec.Error.Message)
	rec.Score, rec.Scores, rec.Outcome = nil, nil, nil
	if rec.Workspace != nil {
		rec.Workspace.Kept = true // graded there by --resume
	}
}

// interrupt rewrites a record as interrupted: not a verdict, run again by
// --resume.
func interrupt(rec *schemas.CaptureRecord, why string) {
	rec.Error = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted: " + why}
	rec.Errors = []string{rec.Error.Message}
	rec.Score, rec.Scores, rec.Outcome = nil, nil, nil
}
