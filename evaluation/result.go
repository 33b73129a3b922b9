package evaluation

import (
	"fmt"

	"harness/capture"
	"harness/runctl"
	"harness/schemas"
	"harness/trials"
)

// Result is what a run did.
type Result struct {
	// Units is how many units the run set out to run, with those an
	// adaptive run added as it went; Finished how many ran to the end
	// (not interrupted); Done how many an output it resumed held already.
	Units, Finished, Done int
	// Stats counts the records of this run by outcome; nil when nothing
	// ran. Counts are those of every trial the output holds, an earlier
	// run's included.
	Stats  *capture.Stats
	Counts trials.Counts
	// Spent is what the run cost (nil: nothing counted), AgentReportedUSD
	// the dollars of it the agent reported itself rather than priced from
	// Options.Prices.
	Spent            *schemas.Cost
	AgentReportedUSD float64
	// Unpriced counts this run's records that Options.Prices could not
	// price because the agent reported no usage (no tokens, no cost);
	// Priced those it could. Both stay 0 without prices.
	Unpriced, Priced int
	// Stop, when set, is why the run ended before every unit ran: the
	// budget or the stop rule. A budget spent by the last unit stopped
	// nothing and is not reported.
	Stop *runctl.Stop
	// Interrupted says the run's context ended it.
	Interrupted bool
	// Summary is the run summary a trials run wrote (nil: none, as when
	// it was interrupted).
	Summary *schemas.TrialsSummary
	// Written is how many records this run wrote to the output.
	Written int
	// SharedWrites is how many units of a run without a workspace of its
	// own wrote files in the working directory they share; SharedPath is
	// one of the paths, relative to that directory.
	SharedWrites int
	SharedPath   string
}

// NotRun is how many units of the run did not run to the end.
func (r *Result) NotRun() int { return r.Units - r.Finished }

// Kind is the kind of an Error.
type Kind int

// The kinds of Error.
const (
	// KindOpen: the output could not be opened (Err may be a
	// *results.ExistsError).
	KindOpen Kind = iota + 1
	// KindResume: the output to continue could not be read back, or was
	// written by another kind of run (Err may be a *RuleMismatchError, a
	// *results.ForeignLineError or *results.ForeignLinesError).
	KindResume
	// KindAgentStart: the agent did not start (Err may be a
	// *capture.AgentError); nothing ran.
	KindAgentStart
	// KindWrite: a record, the partial file or the summary could not be
	// written.
	KindWrite
	// KindForeign: the finished output holds lines harness did not write
	// (Err is a *results.ForeignLinesError).
	KindForeign
)

// Error is a failure of a run that a caller tells apart by its Kind.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// RuleMismatchError refuses to continue an output written under another
// stopping rule: Written is the rule of the case in the output (nil: not
// adaptive), Want that of this run (nil: not adaptive).
type RuleMismatchError struct {
	ID      string
	Written *schemas.AdaptiveCase
	Want    *trials.Policy
}

func (e *RuleMismatchError) Error() string {
	switch {
	case e.Written == nil:
		return fmt.Sprintf("case %q was written by a run that is not adaptive", e.ID)
	case e.Want == nil:
		return fmt.Sprintf("case %q was written by an adaptive run", e.ID)
	}
	w := e.Written
	return fmt.Sprintf("case %q was written with min-k %d, max-k %d, ci-width %g", e.ID, w.MinK, w.MaxK, w.CIWidth)
}
