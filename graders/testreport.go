package graders

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"
)

// testCase is one test of a test report.
type testCase struct {
	Name    string
	Pass    bool
	Skip    bool
	Message string // why it failed (trimmed)
}

// maxEvidence bounds a failure message kept as a check's evidence.
const maxEvidence = 2000

func trimEvidence(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxEvidence {
		s = s[:maxEvidence] + "…"
	}
	return s
}

// parseGoTestJSON reads the output of go test -json: one JSON event a
// line; a test's verdict is its pass/fail/skip action, its failure
// message the output it printed. Package-level events without a Test are
// not tests (a package that fails to build has no test events: zero
// tests, a grader error).
func parseGoTestJSON(b []byte) ([]testCase, error) {
	type event struct {
		Action  string
		Package string
		Test    string
		Output  string
	}
	order := []string{}
	byName := map[string]*testCase{}
	out := map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	lines := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		lines++
		if e.Test == "" {
			continue
		}
		key := e.Package + "." + e.Test
		if out[key] == nil {
			out[key] = &strings.Builder{}
		}
		switch e.Action {
		case "output":
			if out[key].Len() < 64<<10 {
				out[key].WriteString(e.Output)
			}
		case "pass", "fail", "skip":
			tc := byName[key]
			if tc == nil {
				tc = &testCase{Name: e.Test}
				byName[key] = tc
				order = append(order, key)
			}
			tc.Pass, tc.Skip = e.Action == "pass", e.Action == "skip"
			if e.Action == "fail" {
				tc.Message = trimEvidence(out[key].String())
			}
		}
	}
	if lines == 0 {
		return nil, fmt.Errorf("no go test -json events in the output")
	}
	cases := make([]testCase, 0, len(order))
	for _, k := range order {
		cases = append(cases, *byName[k])
	}
	return cases, nil
}

// parseJUnit reads JUnit XML (pytest, Jest, Vitest, cargo2junit,
// go-junit-report...): <testsuites>, or a single <testsuite>, of
// <testcase> elements with <failure>, <error> or <skipped> inside.
func parseJUnit(b []byte) ([]testCase, error) {
	type result struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type tcase struct {
		Name      string   `xml:"name,attr"`
		ClassName string   `xml:"classname,attr"`
		Failures  []result `xml:"failure"`
		Errors    []result `xml:"error"`
		Skipped   *result  `xml:"skipped"`
	}
	type suite struct {
		Cases  []tcase `xml:"testcase"`
		Suites []suite `xml:"testsuite"`
	}
	var root struct {
		XMLName xml.Name
		suite
	}
	if err := xml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("not JUnit XML: %v", err)
	}
	if root.XMLName.Local != "testsuites" && root.XMLName.Local != "testsuite" {
		return nil, fmt.Errorf("not JUnit XML: the root element is <%s>, not <testsuites> or <testsuite>", root.XMLName.Local)
	}
	var cases []testCase
	var walk func(s suite)
	walk = func(s suite) {
		for _, c := range s.Cases {
			name := c.Name
			if c.ClassName != "" && !strings.Contains(name, c.ClassName) {
				name = c.ClassName + " > " + name
			}
			tc := testCase{Name: name, Pass: true}
			for _, f := range append(append([]result{}, c.Failures...), c.Errors...) {
				tc.Pass = false
				tc.Message = trimEvidence(strings.TrimSpace(f.Message + "\n" + f.Text))
			}
			if c.Skipped != nil && tc.Pass {
				tc.Skip = true
			}
			cases = append(cases, tc)
		}
		for _, sub := range s.Suites {
			walk(sub)
		}
	}
	walk(root.suite)
	return cases, nil
}

// parseVitestJSON reads Vitest's (and Jest's) JSON reporter output:
// testResults[].assertionResults[] with fullName, status and
// failureMessages.
func parseVitestJSON(b []byte) ([]testCase, error) {
	var r struct {
		TestResults []struct {
			Name             string `json:"name"`
			Message          string `json:"message"`
			AssertionResults []struct {
				FullName        string   `json:"fullName"`
				Title           string   `json:"title"`
				Status          string   `json:"status"`
				FailureMessages []string `json:"failureMessages"`
			} `json:"assertionResults"`
		} `json:"testResults"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("not Vitest JSON: %v", err)
	}
	var cases []testCase
	for _, f := range r.TestResults {
		for _, a := range f.AssertionResults {
			name := a.FullName
			if name == "" {
				name = a.Title
			}
			tc := testCase{Name: name, Pass: a.Status == "passed", Skip: a.Status == "skipped" || a.Status == "pending" || a.Status == "todo"}
			if !tc.Pass && !tc.Skip {
				tc.Message = trimEvidence(strings.Join(a.FailureMessages, "\n"))
			}
			cases = append(cases, tc)
		}
	}
	return cases, nil
}

var tapLine = regexp.MustCompile(`^(not )?ok\b\s*(\d+)?\s*(?:-\s*)?([^#]*)(#\s*(\w+).*)?$`)

// parseTAP reads the Test Anything Protocol: "ok N - name" and "not ok N -
// name" lines, "# SKIP" and "# TODO" directives, indented YAML blocks
// after a failure as its message.
func parseTAP(b []byte) ([]testCase, error) {
	var cases []testCase
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r")
		m := tapLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || strings.HasPrefix(line, " ") {
			continue
		}
		name := strings.TrimSpace(m[3])
		if name == "" {
			name = "test " + m[2]
		}
		tc := testCase{Name: name, Pass: m[1] == ""}
		switch strings.ToUpper(m[5]) {
		case "SKIP":
			tc.Skip, tc.Pass = true, true
		case "TODO":
			tc.Skip = true
		}
		if !tc.Pass {
			var msg []string
			for i+1 < len(lines) && (strings.HasPrefix(lines[i+1], " ") || strings.HasPrefix(lines[i+1], "#")) {
				i++
				msg = append(msg, strings.TrimSpace(lines[i]))
			}
			tc.Message = trimEvidence(strings.Join(msg, "\n"))
		}
		cases = append(cases, tc)
	}
	return cases, nil
}
