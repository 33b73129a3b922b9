package termprogress

import (
	"fmt"
	"io"
	"strings"
	"time"

	"harness/schemas"
	"harness/trials"
)

// status counts a run's finished records and keeps the live status line
// (done/total, passed, failed, errors, elapsed, ETA) of a terminal. The
// View's mutex guards it.
type status struct {
	tty   bool // redraw a status line
	lines bool // a line per finished record
	drawn bool // the status line is on the screen

	total, done, passed, failed, errors int

	start time.Time
	now   func() time.Time
	// inFlight, once the run is stopping, counts the units still in
	// their turns and those still being verified or graded.
	inFlight func() (turns, grading int)
}

// count counts a finished record and returns its line.
func (s *status) count(rec *schemas.CaptureRecord) string {
	mark, detail := "ok", rec.StopReason
	// A trial counts here as it counts everywhere (trials.Outcome).
	switch pass, excluded := trials.Outcome(rec); {
	case rec.Error != nil:
		mark, detail = "ERR", errorCause(rec.Error)
	case excluded == trials.Ungraded:
	case excluded != "":
		mark, detail = "ERR", errorCause(rec.Score.Error)
	case pass:
		mark = "pass"
	default:
		mark = "fail"
	}
	s.done++
	switch mark {
	case "pass":
		s.passed++
	case "fail":
		s.failed++
	case "ERR":
		s.errors++
	}
	took := fmt.Sprintf("%d ms", schemas.RecordDuration(rec))
	if a := schemas.AgentDuration(rec); a != schemas.RecordDuration(rec) {
		took += fmt.Sprintf(", agent %d ms", a)
	}
	return fmt.Sprintf("[%d/%d] %s trial %d: %s %s (%s)\n",
		s.done, s.total, rec.ID, rec.Trial, mark, detail, took)
}

// stopNote says what a stopping run waits for; resume names how a later
// run continues the output.
func (s *status) stopNote(resume string) string {
	turns, grading := s.inFlight()
	var parts []string
	if turns > 0 {
		parts = append(parts, "cancelling "+plural(turns, "turn")+" in flight")
	}
	if grading > 0 {
		noun := "graders/verifiers"
		if grading == 1 {
			noun = "grader/verifier"
		}
		parts = append(parts, fmt.Sprintf("waiting for %d %s in flight", grading, noun))
	}
	switch {
	case grading > 0:
		return strings.Join(parts, ", ") + "; press Ctrl-C again to stop them (finished turns are kept for " + resume + " to grade)"
	case turns > 0:
		return strings.Join(parts, ", ") + "; press Ctrl-C again to kill the agents now"
	}
	return "no new unit starts; writing the last records"
}

// line is the live line: counts, elapsed time and an estimate of the
// time left from the pace so far; when the run is stopping, what it
// waits for instead of the estimate.
func (s *status) line(resume string) string {
	elapsed := s.now().Sub(s.start).Round(time.Second)
	if s.inFlight != nil {
		return fmt.Sprintf("stopping: %s | %d/%d done, %d passed, %d failed, %d errors, %s elapsed",
			s.stopNote(resume), s.done, s.total, s.passed, s.failed, s.errors, elapsed)
	}
	eta := "?"
	if s.done > 0 && s.done <= s.total {
		left := time.Duration(float64(s.now().Sub(s.start)) / float64(s.done) * float64(s.total-s.done))
		eta = left.Round(time.Second).String()
	}
	return fmt.Sprintf("%d/%d done, %d passed, %d failed, %d errors, %s elapsed, ETA %s",
		s.done, s.total, s.passed, s.failed, s.errors, elapsed, eta)
}

// draw redraws the status line on a terminal.
func (s *status) draw(w io.Writer, resume string) {
	if !s.tty {
		return
	}
	fmt.Fprint(w, "\r\033[K"+s.line(resume))
	s.drawn = true
}

// clear erases the status line.
func (s *status) clear(w io.Writer) {
	if s.tty && s.drawn {
		fmt.Fprint(w, "\r\033[K")
		s.drawn = false
	}
}
