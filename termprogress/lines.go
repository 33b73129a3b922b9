package termprogress

import (
	"fmt"
	"slices"
	"strings"

	"harness/capture"
	"harness/schemas"
)

// strayShown is how many messages that belong to no case are shown; the
// rest are counted.
const strayShown = 5

// stray shows a message of the agent that belongs to no case: output on
// stdout that is not the protocol, each time; other messages, the first
// few.
func (v *View) stray(s capture.Stray) {
	if v.settings.Quiet {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if line, ok := strings.CutPrefix(s.What, "stdout: "); ok {
		v.between(func() {
			fmt.Fprintf(v.w, "harness: the agent writes non-protocol output to stdout: %q (recorded and skipped)\n", v.settings.Redact.String(line))
		})
		return
	}
	if s.Late {
		return // its case's, sent after its record was sealed: not news
	}
	v.strays++
	if v.strays > strayShown {
		return
	}
	where := "with no session"
	if s.SessionID != "" {
		where = fmt.Sprintf("for session %q, which no case has (never created, or over)", s.SessionID)
	}
	v.between(func() {
		fmt.Fprintf(v.w, "harness: protocol: the agent sent %s %s; it is on no record\n", s.What, v.settings.Redact.String(where))
	})
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
