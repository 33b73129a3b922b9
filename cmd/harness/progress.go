package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"harness/schemas"
	"harness/trials"
)

// progress reports a run on stderr. On a terminal it keeps a live status
// line (done/total, passed, failed, errors, elapsed, ETA) under the lines
// of finished records; elsewhere it prints plain lines, one per finished
// record, when asked to (--progress); with -q it prints nothing.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool // redraw a status line
	lines   bool // a line per finished record
	quiet   bool
	total   int
	done    int
	passed  int
	failed  int
	errors  int
	start   time.Time
	now     func() time.Time
	redact  interface{ String(string) string }
	ticker  *time.Ticker
	stopped chan struct{}
	once    sync.Once
	drawn   bool
	// inFlight, once the run is stopping, counts the units still in
	// their turns and those still being verified or graded.
	inFlight func() (turns, grading int)
}

func newProgress(e *env, f *runFlags, total int, red interface{ String(string) string }) *progress {
	p := &progress{
		w:       e.stderr,
		quiet:   f.quiet,
		tty:     !f.quiet && e.stderrTTY,
		lines:   !f.quiet && (f.progress || e.stderrTTY),
		total:   total,
		start:   time.Now(),
		now:     time.Now,
		redact:  red,
		stopped: make(chan struct{}),
	}
	if p.tty {
		p.ticker = time.NewTicker(time.Second)
		go func() {
			for {
				select {
				case <-p.ticker.C:
					p.mu.Lock()
					p.drawStatus()
					p.mu.Unlock()
				case <-p.stopped:
					return
				}
			}
		}()
	}
	return p
}

// grow raises the total by n units (an adaptive run adds units as it
// goes).
func (p *progress) grow(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += n
}

// stop ends the status line; it is safe to call more than once.
func (p *progress) stop() {
	p.once.Do(func() {
		close(p.stopped)
		if p.ticker != nil {
			p.ticker.Stop()
		}
		p.mu.Lock()
		p.clearStatus()
		p.tty = false // nothing is redrawn after the run
		p.mu.Unlock()
	})
}

// printf prints a message line (not with -q).
func (p *progress) printf(format string, args ...any) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearStatus()
	fmt.Fprint(p.w, p.redact.String(fmt.Sprintf(format, args...)))
	p.drawStatus()
}

// record counts a finished record and prints its line.
func (p *progress) record(rec *schemas.CaptureRecord) {
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
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	switch mark {
	case "pass":
		p.passed++
	case "fail":
		p.failed++
	case "ERR":
		p.errors++
	}
	if !p.lines {
		return
	}
	p.clearStatus()
	fmt.Fprint(p.w, p.redact.String(fmt.Sprintf("[%d/%d] %s trial %d: %s %s (%d ms)\n",
		p.done, p.total, rec.ID, rec.Trial, mark, detail, rec.Timing.Total)))
	p.drawStatus()
}

// stopping says at once, on the first stop, what the run still waits for
// and how to stop it harder; from then on the status line says so instead
// of an estimate of the time left. Nothing is said once ran is closed.
func (p *progress) stopping(ran <-chan struct{}, inFlight func() (turns, grading int)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-ran:
		return
	default:
	}
	p.inFlight = inFlight
	if p.quiet {
		return
	}
	p.clearStatus()
	fmt.Fprintf(p.w, "stopping: %s\n", p.stopNote())
	p.drawStatus()
}

// stopNote says what a stopping run waits for; p.mu is held.
func (p *progress) stopNote() string {
	turns, grading := p.inFlight()
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
		return strings.Join(parts, ", ") + "; press Ctrl-C again to stop them (finished turns are kept for --resume to grade)"
	case turns > 0:
		return strings.Join(parts, ", ") + "; press Ctrl-C again to kill the agents now"
	}
	return "no new unit starts; writing the last records"
}

// statusLine is the live line: counts, elapsed time and an estimate of
// the time left from the pace so far; when the run is stopping, what it
// waits for instead of the estimate.
func (p *progress) statusLine() string {
	elapsed := p.now().Sub(p.start).Round(time.Second)
	if p.inFlight != nil {
		return fmt.Sprintf("stopping: %s | %d/%d done, %d passed, %d failed, %d errors, %s elapsed",
			p.stopNote(), p.done, p.total, p.passed, p.failed, p.errors, elapsed)
	}
	eta := "?"
	if p.done > 0 && p.done <= p.total {
		left := time.Duration(float64(p.now().Sub(p.start)) / float64(p.done) * float64(p.total-p.done))
		eta = left.Round(time.Second).String()
	}
	return fmt.Sprintf("%d/%d done, %d passed, %d failed, %d errors, %s elapsed, ETA %s",
		p.done, p.total, p.passed, p.failed, p.errors, elapsed, eta)
}

// drawStatus redraws the status line; p.mu is held.
func (p *progress) drawStatus() {
	if !p.tty {
		return
	}
	fmt.Fprint(p.w, "\r\033[K"+p.statusLine())
	p.drawn = true
}

// clearStatus erases the status line; p.mu is held.
func (p *progress) clearStatus() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// summary prints the final counts: those of every trial in the output.
func (p *progress) summary(c trials.Counts) {
	if p.quiet {
		return
	}
	p.printf("%s\n", c.Line())
}

// errorCause is one line saying why a record failed: the error's class
// and message, and the last meaningful line of the stderr that came with
// it (the exception of a Python traceback, not its "Traceback" header).
func errorCause(e *schemas.ErrorInfo) string {
	msg := meaningfulLine(e.Message, false)
	cause := e.Class + ": " + msg
	if last := meaningfulLine(e.Stderr, true); last != "" && !strings.Contains(msg, last) {
		cause += " (" + last + ")"
	}
	return cause
}

// meaningfulLine picks a line of s that says something: the first, or
// with last the last, skipping blank lines and traceback headers.
func meaningfulLine(s string, last bool) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if last {
		slices.Reverse(lines)
	}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "Traceback (most recent call last)") || l == "^" || strings.Trim(l, "^~ ") == "" {
			continue
		}
		return l
	}
	return ""
}
