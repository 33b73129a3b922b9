package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"harness/internal/redact"
	"harness/schemas"
	"harness/trials"
)

func TestProgressModes(t *testing.T) {
	rec := func(id string, pass bool) *schemas.CaptureRecord {
		return &schemas.CaptureRecord{ID: id, Trial: 1, StopReason: "end_turn", Score: &schemas.GraderResult{Pass: pass}}
	}
	errRec := &schemas.CaptureRecord{ID: "e", Trial: 1, Error: &schemas.ErrorInfo{Class: "timeout", Message: "slow"}}
	stats := trials.Counts{Trials: 3, Graded: 2, Passed: 1, Errors: map[string]int{"timeout": 1}}
	for _, tc := range []struct {
		name          string
		tty, progress bool
		quiet         bool
		want, notWant []string
	}{
		{"terminal", true, false, false,
			[]string{"\r\033[K", "3/3 done, 1 passed, 1 failed, 1 errors", "ETA", "[2/3] b trial 1: fail", "3 records, 2 graded, 1 passed, errors: timeout 1"}, nil},
		{"plain", false, true, false,
			[]string{"[1/3] a trial 1: pass end_turn", "[3/3] e trial 1: ERR timeout: slow", "3 records"}, []string{"\r", "\033"}},
		{"silent pipe", false, false, false, []string{"3 records"}, []string{"[1/3]", "\r"}},
		{"quiet", true, true, true, nil, []string{"records", "[1/3]", "\r"}},
	} {
		var buf bytes.Buffer
		e := &env{stderr: &buf, stderrTTY: tc.tty}
		p := newProgress(e, &runFlags{progress: tc.progress, quiet: tc.quiet}, 3, redact.New(nil, nil))
		p.now = func() time.Time { return p.start.Add(3 * time.Second) }
		p.record(rec("a", true))
		p.record(rec("b", false))
		p.record(errRec)
		p.mu.Lock()
		p.drawStatus()
		p.mu.Unlock()
		p.stop()
		p.summary(stats)
		out := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%q", tc.name, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%s: output has %q:\n%q", tc.name, w, out)
			}
		}
		if tc.tty && !tc.quiet && !strings.HasSuffix(out, "errors: timeout 1\n") {
			t.Errorf("%s: the status line was drawn after the summary: %q", tc.name, out)
		}
	}
}

// TestErrorCause: a crashed Python grader's line shows its exception, not
// the "Traceback" header.
func TestErrorCause(t *testing.T) {
	e := &schemas.ErrorInfo{Class: "grader_error", Message: "grader exited with status 1",
		Stderr: "Traceback (most recent call last):\n  File \"g.py\", line 3, in <module>\n    x = 1 / 0\n        ~~^~~\nZeroDivisionError: division by zero\n"}
	if got := errorCause(e); got != "grader_error: grader exited with status 1 (ZeroDivisionError: division by zero)" {
		t.Errorf("cause = %q", got)
	}
	e = &schemas.ErrorInfo{Class: "agent_crash", Message: "Traceback (most recent call last):\n  File \"a.py\"\nKeyError: 'x'"}
	if got := errorCause(e); strings.Contains(got, "Traceback") {
		t.Errorf("cause = %q, a traceback header", got)
	}
	if got := errorCause(&schemas.ErrorInfo{Class: "timeout", Message: "turn 1 exceeded its 1s timeout"}); got != "timeout: turn 1 exceeded its 1s timeout" {
		t.Errorf("cause = %q", got)
	}
}

// TestProgressStopping: the first stop is said at once, and the status
// line then says what the run waits for instead of an ETA; with -q
// nothing is said.
func TestProgressStopping(t *testing.T) {
	for _, tc := range []struct {
		name           string
		turns, grading int
		want           string
	}{
		{"graders", 0, 2, "stopping: waiting for 2 graders/verifiers in flight; press Ctrl-C again to stop them"},
		{"turns and graders", 1, 1, "stopping: cancelling 1 turn in flight, waiting for 1 grader/verifier in flight; press Ctrl-C again to stop them"},
		{"turns", 3, 0, "stopping: cancelling 3 turns in flight; press Ctrl-C again to kill the agents now"},
		{"nothing", 0, 0, "stopping: no new unit starts; writing the last records"},
	} {
		var buf bytes.Buffer
		p := newProgress(&env{stderr: &buf, stderrTTY: true}, &runFlags{}, 4, redact.New(nil, nil))
		p.now = func() time.Time { return p.start.Add(3 * time.Second) }
		p.record(&schemas.CaptureRecord{ID: "a", Trial: 1, Score: &schemas.GraderResult{Pass: true}})
		p.stopping(make(chan struct{}), func() (int, int) { return tc.turns, tc.grading })
		if !strings.Contains(buf.String(), tc.want) || !strings.Contains(buf.String(), "\n") {
			t.Errorf("%s: said %q, want %q on a line", tc.name, buf.String(), tc.want)
		}
		p.mu.Lock()
		line := p.statusLine()
		p.mu.Unlock()
		if !strings.HasPrefix(line, tc.want) || !strings.Contains(line, "1/4 done") || strings.Contains(line, "ETA") {
			t.Errorf("%s: status line %q", tc.name, line)
		}
		p.stop()
	}
	var buf bytes.Buffer
	p := newProgress(&env{stderr: &buf}, &runFlags{quiet: true}, 1, redact.New(nil, nil))
	p.stopping(make(chan struct{}), func() (int, int) { return 0, 1 })
	ran := make(chan struct{})
	close(ran)
	q := newProgress(&env{stderr: &buf}, &runFlags{}, 1, redact.New(nil, nil))
	q.stopping(ran, func() (int, int) { return 0, 1 })
	if buf.Len() > 0 {
		t.Errorf("said %q with -q or after the run", buf.String())
	}
}
