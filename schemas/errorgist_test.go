package schemas

import "testing"

// A grader error's gist is the line that says what went wrong and the
// file and line where, not a traceback's first line.
func TestErrorGist(t *testing.T) {
	py := "Traceback (most recent call last):\n  File \"/home/u/graders/check.py\", line 12, in <module>\n    main()\n  File \"/home/u/graders/check.py\", line 7, in main\n    raise ValueError(\"no answer\")\nValueError: no answer\n"
	for _, c := range []struct {
		e    ErrorInfo
		want string
	}{
		{ErrorInfo{Message: "grader exited with status 1: Traceback (most recent call last):\n  File \"/home/u/graders/check.py\", line 12", Stderr: py},
			"grader exited with status 1: ValueError: no answer (check.py:7)"},
		{ErrorInfo{Message: "grade(input) threw: Error: boom\n\tat grade (/tmp/x/grader.ts:5:8(10))\n\tat other (/tmp/x/grader.ts:9:1(3))\n"},
			"grade(input) threw: Error: boom (grader.ts:5)"},
		{ErrorInfo{Message: "grader did not finish within 1s; its process group was killed"},
			"grader did not finish within 1s; its process group was killed"},
		{ErrorInfo{Message: "judge call failed: connection refused\nmore"}, "judge call failed: connection refused"},
	} {
		if got := c.e.Gist(); got != c.want {
			t.Errorf("Gist() = %q\nwant     %q", got, c.want)
		}
	}
}
