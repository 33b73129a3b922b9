package evaluation

import (
	"sync"

	"harness/acp"
	"harness/capture"
	"harness/runctl"
	"harness/schemas"
)

// Events receives the events of a run. Run calls Event for one event at a
// time, in the order they happen, from whichever goroutine did the work:
// an implementation must return quickly and must not call back into the
// run.
type Events interface {
	Event(Event)
}

// EventsFunc is a function that receives events.
type EventsFunc func(Event)

// Event calls f(e).
func (f EventsFunc) Event(e Event) { f(e) }

// Event is one of the event types below.
type Event interface{ event() }

// Planned is the first event: the units the run sets out to run (Total,
// none of them done yet; 0 when everything is done already) and those an
// output it resumes holds already (Done).
type Planned struct {
	Total, Done int
}

// Started says the agent answered initialize (Agent) or, headless, that
// its adapter is ready (Adapter names it); units start now.
type Started struct {
	Agent   *acp.InitializeResponse
	Adapter string
	Total   int
	// Adaptive says the run adds units as the cases' intervals ask for
	// them.
	Adaptive bool
}

// UnitsAdded says an adaptive run asked for N more trials.
type UnitsAdded struct{ N int }

// TurnAnswered says a turn of a unit answered: Record holds the unit's
// id, trial, usage so far and error, if any.
type TurnAnswered struct{ Record *schemas.CaptureRecord }

// RecordWritten says a unit finished: its record (graded, priced) went to
// the output, or, in a trials run, to its case's trials.
type RecordWritten struct{ Record *schemas.CaptureRecord }

// CaseFinished says a trials record went to the output.
type CaseFinished struct{ Record *schemas.TrialsRecord }

// Stray is a message of the agent that belongs to no case.
type Stray struct{ Stray capture.Stray }

// StopRequested says the budget or the stop rule ended the run: no new
// unit starts.
type StopRequested struct{ Stop runctl.Stop }

// SummaryWritten says the run summary was written: to Path, or to the
// output when Path is "".
type SummaryWritten struct {
	Summary schemas.TrialsSummary
	Path    string
}

// Stopping says the run's context ended while units were in flight: no
// new unit starts, and InFlight counts the units still in their turns and
// those still being graded.
type Stopping struct {
	InFlight func() (turns, grading int)
}

// Finished is the last event: the run is over and its output closed.
type Finished struct{ Result *Result }

func (Planned) event()        {}
func (Started) event()        {}
func (UnitsAdded) event()     {}
func (TurnAnswered) event()   {}
func (RecordWritten) event()  {}
func (CaseFinished) event()   {}
func (Stray) event()          {}
func (StopRequested) event()  {}
func (Stopping) event()       {}
func (SummaryWritten) event() {}
func (Finished) event()       {}

// emitter hands events to the subscriber one at a time.
type emitter struct {
	mu sync.Mutex
	to Events
}

func (e *emitter) emit(ev Event) {
	if e == nil || e.to == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.to.Event(ev)
}

// control is the run's controller, telling the subscriber of every turn
// that answers.
type control struct {
	*runctl.Controller
	events *emitter
}

func (c control) Answered(rec *schemas.CaptureRecord) {
	c.Controller.Answered(rec)
	c.events.emit(TurnAnswered{Record: rec})
}
