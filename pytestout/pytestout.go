// Package pytestout reads pytest's terminal output as checks: the short
// test summary that -r prints (-rA: "PASSED path::test", "FAILED
// path::test - message", ERROR, SKIPPED, XFAIL, XPASS) and, where there
// is none, the result lines of -v ("path::test PASSED [ 50%]"). A failed
// test's evidence is its section of the FAILURES or ERRORS report, and
// the closing count line ("1 failed, 2 passed in 0.05s") gives the totals
// when the summary names only the failures.
package pytestout

import (
	"regexp"
	"strconv"
	"strings"

	"harness/schemas"
)

// maxEvidence bounds the report section kept as a failed test's evidence.
const maxEvidence = 4000

// Result is what pytest's output says about its tests.
type Result struct {
	// Checks holds one check per test the output names, in its order:
	// passed, skipped, xfailed and xpassed tests pass; failed tests and
	// errors fail, with pytest's message as the reason and the test's
	// section of the report as evidence.
	Checks []schemas.Check
	// Passed and Total count the tests, from the closing count line when
	// the output has one (so tests that -r did not list count too), else
	// from Checks.
	Passed, Total int
}

// Found reports whether the output named any test or counted any.
func (r Result) Found() bool { return len(r.Checks) > 0 || r.Total > 0 }

var (
	sepLine     = regexp.MustCompile(`^={3,} ?(.*?) ?={3,}$`)
	sectionHead = regexp.MustCompile(`^_{2,} (.+?) _{2,}$`)
	summaryLine = regexp.MustCompile(`^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$`)
	verboseLine = regexp.MustCompile(`^(\S+::.+?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \((.*)\))?\s*(?:\[\s*\d+%\])?$`)
	countWord   = regexp.MustCompile(`(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)`)
	errorTitle  = regexp.MustCompile(`^ERROR at (?:setup|teardown|call) of `)
)

type entry struct {
	status, id, msg string
}

// Parse reads pytest's output. Output with no summary, result or count
// lines gives a Result that is not Found.
func Parse(output string) Result {
	lines := strings.Split(strings.ReplaceAll(output, "\r\n", "\n"), "\n")
	var summary, verbose []entry
	sections := map[string]string{}
	counts := map[string]int{}
	haveCounts := false
	inSummary, inReport := false, false
	var secName string
	var secBody []string
	flush := func() {
		if secName != "" {
			sections[secName] = strings.TrimSpace(strings.Join(secBody, "\n"))
		}
		secName, secBody = "", nil
	}
	for _, line := range lines {
		line = strings.TrimRight(line, " \t")
		if m := sepLine.FindStringSubmatch(line); m != nil {
			flush()
			title := m[1]
			inSummary = strings.Contains(title, "short test summary info")
			inReport = title == "FAILURES" || title == "ERRORS"
			if c := countWord.FindAllStringSubmatch(title, -1); c != nil && strings.Contains(title, " in ") {
				haveCounts = true
				for _, w := range c {
					n, _ := strconv.Atoi(w[1])
					counts[strings.TrimSuffix(w[2], "s")] += n
				}
			}
			continue
		}
		if inReport {
			if m := sectionHead.FindStringSubmatch(line); m != nil {
				flush()
				secName = m[1]
				continue
			}
			if secName != "" {
				secBody = append(secBody, line)
			}
			continue
		}
		if inSummary {
			if m := summaryLine.FindStringSubmatch(line); m != nil {
				summary = append(summary, summaryEntry(m[1], m[2]))
			}
			continue
		}
		if m := verboseLine.FindStringSubmatch(line); m != nil {
			verbose = append(verbose, entry{status: m[2], id: m[1], msg: m[3]})
		}
	}
	flush()

	entries := summary
	if len(verbose) > 0 {
		byID := map[string]entry{}
		for _, e := range summary {
			if _, ok := byID[e.status+" "+e.id]; !ok {
				byID[e.status+" "+e.id] = e
			}
		}
		entries = nil
		seen := map[string]bool{}
		for _, e := range verbose {
			if s, ok := byID[e.status+" "+e.id]; ok && s.msg != "" {
				e.msg = s.msg
			}
			seen[e.status+" "+e.id] = true
			entries = append(entries, e)
		}
		for _, e := range summary {
			if !seen[e.status+" "+e.id] && e.status != "SKIPPED" {
				entries = append(entries, e)
			}
		}
	}

	var r Result
	dup := map[string]bool{}
	for _, e := range entries {
		if dup[e.status+" "+e.id] {
			continue
		}
		dup[e.status+" "+e.id] = true
		r.Checks = append(r.Checks, check(e, sections))
	}
	if haveCounts {
		for k, n := range counts {
			switch k {
			case "passed", "skipped", "xfailed", "xpassed":
				r.Passed += n
				r.Total += n
			case "failed", "error":
				r.Total += n
			}
		}
	} else {
		for _, c := range r.Checks {
			if c.Pass {
				r.Passed++
			}
		}
		r.Total = len(r.Checks)
	}
	return r
}

// summaryEntry splits a short summary line's rest: "path::test - msg",
// "path::test msg" (XPASS before pytest 8) or, for SKIPPED,
// "[n] path:line: reason".
func summaryEntry(status, rest string) entry {
	if status == "SKIPPED" {
		rest = strings.TrimSpace(strings.TrimPrefix(rest, "["))
		if i := strings.Index(rest, "] "); i >= 0 && strings.Trim(rest[:i], "0123456789") == "" {
			rest = rest[i+2:]
		}
		// path:line: reason
		if i := strings.Index(rest, ": "); i >= 0 {
			return entry{status: status, id: rest[:i], msg: rest[i+2:]}
		}
		return entry{status: status, id: rest}
	}
	id, msg := splitID(rest)
	return entry{status: status, id: id, msg: msg}
}

// splitID cuts a test id from the text after it: the id ends at the first
// space outside brackets (a parametrized id may hold spaces).
func splitID(s string) (id, msg string) {
	depth := 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ' ':
			if depth == 0 {
				msg = strings.TrimSpace(s[i+1:])
				msg = strings.TrimPrefix(msg, "- ")
				if msg == "-" {
					msg = ""
				}
				return s[:i], strings.TrimSpace(msg)
			}
		}
	}
	return s, ""
}

func check(e entry, sections map[string]string) schemas.Check {
	word := map[string]string{"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped", "XFAIL": "xfailed", "XPASS": "xpassed"}[e.status]
	c := schemas.Check{Text: e.id, Pass: e.status != "FAILED" && e.status != "ERROR", Reason: word}
	if e.msg != "" {
		c.Reason = word + ": " + e.msg
	}
	if !c.Pass {
		if sec := section(e, sections); sec != "" {
			if len(sec) > maxEvidence {
				sec = sec[:maxEvidence] + "…"
			}
			c.Evidence = sec
		}
	}
	return c
}

// section finds a failed test's part of the FAILURES or ERRORS report,
// whose heading names the test without its file ("test_x[1]",
// "TestClass.test_x", "ERROR at setup of test_x").
func section(e entry, sections map[string]string) string {
	name := e.id
	if _, rest, ok := strings.Cut(name, "::"); ok {
		name = strings.ReplaceAll(rest, "::", ".")
	}
	for title, body := range sections {
		t := errorTitle.ReplaceAllString(title, "")
		if (e.status == "ERROR") != (t != title) {
			continue
		}
		if t == name {
			return body
		}
	}
	// A failure of a test whose setup did not fail has an ERROR-less
	// heading; a teardown error of a failed test the ERROR one. Try either.
	for title, body := range sections {
		if errorTitle.ReplaceAllString(title, "") == name {
			return body
		}
	}
	return ""
}
