package schemas

import (
	"path/filepath"
	"regexp"
	"strings"
)

// Frames of a stack trace that name a file and a line: Python's
// `File "x.py", line 5`, and JavaScript's `at f (x.js:5:9)` or `at x.js:5:9`.
var (
	pyFrame = regexp.MustCompile(`File "([^"]+)", line (\d+)`)
	jsFrame = regexp.MustCompile(`\bat (?:[^\n()]*\()?([^\s()]+?):(\d+):\d+`)
)

// Gist is an error in one line, for people looking at many: the line that
// says what went wrong (a traceback's last line, not its first) and where,
// as the file and line of the innermost frame that names one ("ValueError:
// bad (grader.py:7)"). Errors with no trace are their message's first line.
func (e *ErrorInfo) Gist() string {
	if e == nil {
		return ""
	}
	text := e.Message
	if e.Stderr != "" && !strings.Contains(text, e.Stderr) {
		text += "\n" + e.Stderr
	}
	head, _, _ := strings.Cut(strings.TrimSpace(e.Message), "\n")
	where := ""
	if m := pyFrame.FindAllStringSubmatch(text, -1); len(m) > 0 {
		// Most recent call last: the innermost frame is the last, and the
		// exception the last line that is not part of a frame.
		last := m[len(m)-1]
		where = filepath.Base(last[1]) + ":" + last[2]
		lines := strings.Split(strings.TrimSpace(text), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(lines[i], " ") && !strings.HasPrefix(l, "File ") {
				head = l
				break
			}
		}
		// What harness said of it ("grader exited with status 1") stays.
		if prefix, _, ok := strings.Cut(e.Message, ": "); ok && !strings.Contains(prefix, "\n") && !strings.Contains(head, prefix) {
			head = prefix + ": " + head
		}
	} else if m := jsFrame.FindStringSubmatch(text); m != nil {
		// The innermost frame comes first.
		where = filepath.Base(m[1]) + ":" + m[2]
	}
	if where == "" || strings.Contains(head, where) {
		return head
	}
	return head + " (" + where + ")"
}
