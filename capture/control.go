package capture

import (
	"time"

	"harness/cost"
	"harness/ledger"
	"harness/modelgateway"
	"harness/schemas"
)

// prices is the table model calls are priced with.
func (r *Runner) prices() cost.Table {
	if r.cfg.Prices != nil {
		return r.cfg.Prices
	}
	t, _ := cost.Builtin()
	return t
}

// Control watches a run as it goes and stops it on time: it is told of
// every turn's answer the moment it arrives (before the settle time, before
// grading), and once it closes Stopped the runner starts no new unit,
// drops the units it had prepared ahead (no record: --resume runs them),
// and cancels the turns in flight (their records say interrupted). Records
// whose turns had answered are written as they are.
type Control interface {
	// Answered is told of a unit as one of its turns answers: a record
	// with the unit's id, trial, usage so far and error, if any. It is
	// called from several workers at once.
	Answered(rec *schemas.CaptureRecord)
	// Stopped is closed once the run must end.
	Stopped() <-chan struct{}
}

// GradeControl is a Control that is also told of each grading as it
// answers, before a grader's failure is graded again: its stop rule can
// then end the run on the first failed grading.
type GradeControl interface {
	Graded(rec *schemas.CaptureRecord)
}

// CallControl is a Control that is also told of a unit's spending as each
// of its model calls ends (its agent's on the run's model gateway, its
// model simulated user's), so a budget stops the run mid-turn or
// mid-conversation, after the call that spent it.
type CallControl interface {
	// Called is told of a unit as one of its calls ends: a record with
	// the unit's id, trial, its agent's model calls so far and its model
	// user's (simulatedUser.calls), priced. It is called from the
	// gateway's handlers and the unit's worker, several at once.
	Called(rec *schemas.CaptureRecord)
}

// watchCalls has the run's Control, if it takes calls, told of each model
// call of run's unit through route as the call ends, from its first
// prompt on: the route's calls not taken yet that started since then (the
// unit before it on the same agent takes its own when it is sealed).
func (w *worker) watchCalls(run *caseRun, route *modelgateway.Route) {
	if _, ok := w.r.cfg.Control.(CallControl); !ok {
		return
	}
	run.callRoute, run.callsFrom = route, time.Now().UnixMilli()
	route.Watch(func(schemas.ModelCall) { w.called(run) })
}

// called tells the run's Control, if it takes calls, of run's spending so
// far: its agent's calls on its route (once watched) and its model user's
// calls, priced. Each report carries both, as each replaces the last.
func (w *worker) called(run *caseRun) {
	cc, ok := w.r.cfg.Control.(CallControl)
	if !ok {
		return
	}
	rec := &schemas.CaptureRecord{ID: run.unit.Case.ID, Trial: run.unit.Trial}
	if route := run.callRoute; route != nil {
		for _, c := range route.Peek() {
			if c.Start >= run.callsFrom {
				rec.ModelCalls = append(rec.ModelCalls, c)
			}
		}
		ledger.Annotate(rec.ModelCalls, nil, w.r.prices())
		rec.Usage = schemas.ModelCallsUsage(rec.ModelCalls)
	}
	w.userCalls(run, rec)
	cc.Called(rec)
}

// userCalls puts the calls run's model user has made so far, priced, on
// rec (none without a model user).
func (w *worker) userCalls(run *caseRun, rec *schemas.CaptureRecord) {
	if run.userModel == nil {
		return
	}
	calls := run.userModel.Calls()
	if len(calls) == 0 {
		return
	}
	for i := range calls {
		calls[i].USD = ledger.Price(&calls[i], w.r.prices())
	}
	rec.SimulatedUser = &schemas.SimUserOutcome{Calls: calls}
}

// graded tells the run's Control, if it takes gradings, of rec's grading.
func (r *Runner) graded(rec *schemas.CaptureRecord) {
	if gc, ok := r.cfg.Control.(GradeControl); ok {
		gc.Graded(&schemas.CaptureRecord{ID: rec.ID, Trial: rec.Trial, Error: rec.Error, Score: rec.Score})
	}
}

// answered tells the run's Control, if any, that a turn of run answered.
func (w *worker) answered(run *caseRun, info *schemas.ErrorInfo) {
	ctl := w.r.cfg.Control
	if ctl == nil {
		return
	}
	rec := &schemas.CaptureRecord{ID: run.unit.Case.ID, Trial: run.unit.Trial, Usage: run.rec.usageSoFar(), Error: info}
	if route := run.modelRoute(); route != nil {
		// The budget is decided from the ledger: the calls so far.
		if calls := route.Peek(); len(calls) > 0 {
			rec.ModelCalls = calls
			ledger.Annotate(rec.ModelCalls, run.turnStarts, w.r.prices())
			rec.AgentUsage, rec.Usage = rec.Usage, schemas.ModelCallsUsage(rec.ModelCalls)
		}
	}
	w.userCalls(run, rec)
	ctl.Answered(rec)
}

// usageSoFar is the usage the case has reported up to now (nil for none).
func (r *Recorder) usageSoFar() *schemas.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.hasUsage {
		return nil
	}
	u := r.usage
	for _, f := range []**int64{&u.Used, &u.Size, &u.InputTokens, &u.OutputTokens, &u.TotalTokens, &u.ThoughtTokens, &u.CachedReadTokens, &u.CachedWriteTokens} {
		if *f != nil {
			v := **f
			*f = &v
		}
	}
	return &u
}

// stopped says whether the run's Control has stopped the run (the run's
// context follows a moment later).
func (r *Runner) stopped() bool {
	if r.cfg.Control == nil {
		return false
	}
	select {
	case <-r.cfg.Control.Stopped():
		return true
	default:
		return false
	}
}
