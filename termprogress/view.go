// Package termprogress shows a run of the evaluation engine on a terminal
// or in a log: a line per finished record, a live status line on a
// terminal (counts, elapsed time, the time left), what a stopping run
// waits for, messages of the agent that belong to no case, the summary
// table and the final counts. It subscribes to the engine's events like
// any front end.
package termprogress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"harness/evaluation"
	"harness/schemas"
	"harness/trials"
)

// Redactor hides secrets in a line before it is shown.
type Redactor interface {
	String(string) string
}

// Notes word the lines of a run that depend on how the run was asked
// for (a command line's flags); the front end that starts the run
// supplies them. A line has no trailing newline. The View calls them with
// its lock held: they must not call the View.
type Notes interface {
	// Adapter names the adapter of a headless agent in its line: "agent
	// NAME, headless (ADAPTER); N units".
	Adapter(name string) string
	// Started returns the lines shown after the agent's line.
	Started(evaluation.Started) []string
	// Finished returns the lines shown after the final counts.
	Finished(*evaluation.Result) []string
	// Resume names how a later run continues the output, in what a
	// stopping run says: "finished turns are kept for RESUME to grade".
	Resume() string
}

// Settings say what a View shows.
type Settings struct {
	// Terminal says the writer is a terminal: a status line is kept under
	// the lines and redrawn every second, and every finished record has
	// its line.
	Terminal bool
	// Lines asks for a line per finished record when the writer is not a
	// terminal.
	Lines bool
	// Quiet shows nothing.
	Quiet bool
	// Output names the run's output in the line of a run with nothing
	// left to do.
	Output string
	// Redact hides secrets in the lines that show what the agent or the
	// user wrote; nil hides nothing.
	Redact Redactor
	// Notes word the lines that depend on how the run was asked for; nil:
	// the adapter by its name, no other lines.
	Notes Notes
}

// View shows the events of one run on a writer. Its methods may be
// called from any goroutine.
type View struct {
	w        io.Writer
	settings Settings
	// ticks starts the clock that redraws the status line.
	ticks func() (<-chan time.Time, func())
	now   func() time.Time

	mu      sync.Mutex
	status  *status // nil until the run is planned
	strays  int     // stray messages seen
	stopped chan struct{}
	once    sync.Once
	// graderErrs are the distinct grader errors of the records written,
	// by gist, in the order first met.
	graderErrs []gistCount
}

// gistCount is one distinct grader error and how many records had it.
type gistCount struct {
	gist string
	n    int
}

// New returns a View that writes to w.
func New(w io.Writer, s Settings) *View {
	if s.Redact == nil {
		s.Redact = noRedaction{}
	}
	if s.Notes == nil {
		s.Notes = plainNotes{}
	}
	return &View{
		w:        w,
		settings: s,
		ticks: func() (<-chan time.Time, func()) {
			t := time.NewTicker(time.Second)
			return t.C, t.Stop
		},
		now:     time.Now,
		stopped: make(chan struct{}),
	}
}

// Event shows one event of the run.
func (v *View) Event(ev evaluation.Event) {
	switch ev := ev.(type) {
	case evaluation.Planned:
		v.planned(ev)
	case evaluation.Started:
		v.started(ev)
	case evaluation.UnitsAdded:
		v.grow(ev.N)
	case evaluation.Stopping:
		v.stopping(ev.InFlight)
	case evaluation.RecordWritten:
		v.record(ev.Record)
	case evaluation.Stray:
		v.stray(ev.Stray)
	case evaluation.SummaryWritten:
		v.summaryTable(ev)
	case evaluation.Finished:
		v.finished(ev.Result)
	}
}

// Printf shows a message line, once the run is planned (not when Quiet).
// The line is redacted.
func (v *View) Printf(format string, a ...any) {
	if v.settings.Quiet {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.status == nil {
		return
	}
	v.between(func() {
		fmt.Fprint(v.w, v.settings.Redact.String(fmt.Sprintf(format, a...)))
	})
}

// Stop ends the status line and says how many stray messages were not
// shown; it is safe to call more than once.
func (v *View) Stop() {
	v.stopStatus()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.strays > strayShown {
		fmt.Fprintf(v.w, "harness: protocol: ... and %d more such messages\n", v.strays-strayShown)
		v.strays = strayShown
	}
}

// planned starts the counts and, on a terminal, the status line.
func (v *View) planned(ev evaluation.Planned) {
	v.mu.Lock()
	v.status = &status{
		tty:   !v.settings.Quiet && v.settings.Terminal,
		lines: !v.settings.Quiet && (v.settings.Lines || v.settings.Terminal),
		total: ev.Total,
		start: v.now(),
		now:   v.now,
	}
	tty := v.status.tty
	v.mu.Unlock()
	if tty {
		ticks, stop := v.ticks()
		go v.redraw(ticks, stop)
	}
	if ev.Total == 0 {
		v.Printf("nothing to run: all %s in %s\n", plural(ev.Done, "unit"), v.settings.Output)
	}
}

// redraw redraws the status line at every tick until the view stops.
func (v *View) redraw(ticks <-chan time.Time, stop func()) {
	defer stop()
	for {
		select {
		case <-ticks:
			v.mu.Lock()
			v.draw()
			v.mu.Unlock()
		case <-v.stopped:
			return
		}
	}
}

// started shows the agent that answered and the notes that follow it.
func (v *View) started(ev evaluation.Started) {
	switch {
	case ev.Adapter != "":
		v.Printf("agent %s, headless (%s); %s\n", ev.Agent.AgentInfo.Name, v.settings.Notes.Adapter(ev.Adapter), unitCount(ev))
	case ev.Agent != nil && ev.Agent.AgentInfo != nil:
		v.Printf("agent %s %s (ACP %d); %s\n", ev.Agent.AgentInfo.Name, ev.Agent.AgentInfo.Version, ev.Agent.ProtocolVersion, unitCount(ev))
	}
	for _, line := range v.settings.Notes.Started(ev) {
		v.Printf("%s\n", line)
	}
}

// unitCount says how many units a run starts with.
func unitCount(ev evaluation.Started) string {
	if ev.Adaptive {
		return plural(ev.Total, "unit") + " to start (more as the cases' intervals ask for them)"
	}
	return plural(ev.Total, "unit")
}

// grow raises the total by n units (an adaptive run adds units as it
// goes).
func (v *View) grow(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.status != nil {
		v.status.total += n
	}
}

// record counts a finished record and shows its line.
func (v *View) record(rec *schemas.CaptureRecord) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.status == nil {
		return
	}
	if rec.Error == nil && rec.Score != nil && rec.Score.Error != nil {
		v.countGraderError(rec.Score.Error.Gist())
	}
	line := v.status.count(rec)
	if !v.status.lines {
		return
	}
	v.between(func() { fmt.Fprint(v.w, v.settings.Redact.String(line)) })
}

// countGraderError counts one record's grader error by its gist; v.mu is
// held.
func (v *View) countGraderError(gist string) {
	for i := range v.graderErrs {
		if v.graderErrs[i].gist == gist {
			v.graderErrs[i].n++
			return
		}
	}
	v.graderErrs = append(v.graderErrs, gistCount{gist, 1})
}

// stopping says at once, on the first stop, what the run still waits
// for and how to stop it harder; from then on the status line says so
// instead of an estimate of the time left.
func (v *View) stopping(inFlight func() (turns, grading int)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.status == nil {
		return
	}
	v.status.inFlight = inFlight
	if v.settings.Quiet {
		return
	}
	v.between(func() { fmt.Fprintf(v.w, "stopping: %s\n", v.status.stopNote(v.settings.Notes.Resume())) })
}

// summaryTable shows the table of a trials run's summary, without its
// cost (the run's cost line follows the counts), and where it went.
func (v *View) summaryTable(ev evaluation.SummaryWritten) {
	if v.settings.Quiet {
		return
	}
	table := ev.Summary
	table.Cost = nil
	v.mu.Lock()
	defer v.mu.Unlock()
	v.between(func() {
		trials.WriteSummaryTable(v.w, table)
		if ev.Path != "" {
			fmt.Fprintf(v.w, "summary: %s\n", ev.Path)
		}
	})
}

// finished ends the status line and shows the counts of every trial in
// the output and the notes that follow them; a run in which nothing ran
// shows nothing.
func (v *View) finished(res *evaluation.Result) {
	if res.Stats == nil {
		return
	}
	v.stopStatus()
	v.Printf("%s\n", res.Counts.Line())
	v.mu.Lock()
	errs := v.graderErrs
	v.mu.Unlock()
	// Each distinct grader error once, with where it happened.
	for _, g := range errs {
		v.Printf("grader error on %d record%s: %s\n", g.n, map[bool]string{true: "", false: "s"}[g.n == 1], g.gist)
	}
	for _, line := range v.settings.Notes.Finished(res) {
		v.Printf("%s\n", line)
	}
}

// stopStatus erases the status line and stops redrawing it.
func (v *View) stopStatus() {
	v.once.Do(func() {
		close(v.stopped)
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.status != nil {
			v.status.clear(v.w)
			v.status.tty = false // nothing is redrawn after the run
		}
	})
}

// between writes lines with the status line erased before and redrawn
// after; v.mu is held.
func (v *View) between(write func()) {
	if v.status != nil {
		v.status.clear(v.w)
	}
	write()
	v.draw()
}

// draw redraws the status line; v.mu is held.
func (v *View) draw() {
	if v.status != nil {
		v.status.draw(v.w, v.settings.Notes.Resume())
	}
}

// plural writes a count and a noun, with an s when the count is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

type noRedaction struct{}

func (noRedaction) String(s string) string { return s }

// plainNotes are the Notes of a View given none.
type plainNotes struct{}

func (plainNotes) Adapter(name string) string               { return "adapter " + name }
func (plainNotes) Started(evaluation.Started) []string      { return nil }
func (plainNotes) Finished(res *evaluation.Result) []string { return nil }
func (plainNotes) Resume() string                           { return "a resumed run" }
