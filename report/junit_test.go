package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"harness/schemas"
)

// The shape JUnit consumers read, decoded independently of junit.go's types.
type xSuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    string   `xml:"tests,attr"`
	Failures string   `xml:"failures,attr"`
	Errors   string   `xml:"errors,attr"`
	Skipped  string   `xml:"skipped,attr"`
	Time     string   `xml:"time,attr"`
	Suites   []xSuite `xml:"testsuite"`
}

type xSuite struct {
	Name       string  `xml:"name,attr"`
	Tests      string  `xml:"tests,attr"`
	Failures   string  `xml:"failures,attr"`
	Errors     string  `xml:"errors,attr"`
	Skipped    string  `xml:"skipped,attr"`
	Time       string  `xml:"time,attr"`
	Timestamp  string  `xml:"timestamp,attr"`
	Properties []xProp `xml:"properties>property"`
	Cases      []xCase `xml:"testcase"`
}

type xProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type xCase struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	Time      string `xml:"time,attr"`
	Failure   *xMsg  `xml:"failure"`
	Error     *xMsg  `xml:"error"`
	Skipped   *xMsg  `xml:"skipped"`
	SystemOut string `xml:"system-out"`
}

type xMsg struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func parseJUnit(t *testing.T, b []byte) xSuites {
	t.Helper()
	var s xSuites
	if err := xml.Unmarshal(b, &s); err != nil {
		t.Fatalf("JUnit XML does not parse: %v\n%s", err, b)
	}
	return s
}

func atoi(t *testing.T, what, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s = %q, not a count", what, s)
	}
	return n
}

func junitOf(t *testing.T, opt JUnitOptions, runs ...*Run) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, opt, runs...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteJUnit(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", false)
	b := junitOf(t, JUnitOptions{}, run)
	if !bytes.HasPrefix(b, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)) {
		t.Errorf("no XML declaration: %.60s", b)
	}
	doc := parseJUnit(t, b)
	if len(doc.Suites) != 1 {
		t.Fatalf("%d suites", len(doc.Suites))
	}
	s := doc.Suites[0]
	// The counts on both elements match the test cases.
	var fails, errs, skips int
	byName := map[string]xCase{}
	for _, c := range s.Cases {
		byName[c.Name] = c
		if c.Failure != nil {
			fails++
		}
		if c.Error != nil {
			errs++
		}
		if c.Skipped != nil {
			skips++
		}
		if _, err := strconv.ParseFloat(c.Time, 64); err != nil || c.Classname == "" {
			t.Errorf("case %s: time %q classname %q", c.Name, c.Time, c.Classname)
		}
	}
	if atoi(t, "tests", s.Tests) != 14 || atoi(t, "failures", s.Failures) != fails || atoi(t, "errors", s.Errors) != errs || atoi(t, "skipped", s.Skipped) != skips {
		t.Errorf("suite counts tests=%s failures=%s errors=%s skipped=%s; cases say %d/%d/%d", s.Tests, s.Failures, s.Errors, s.Skipped, fails, errs, skips)
	}
	if doc.Tests != s.Tests || doc.Failures != s.Failures || doc.Errors != s.Errors || doc.Time != s.Time {
		t.Errorf("testsuites totals %+v differ from the suite", doc)
	}
	// RuleAll: the failing and the flaky case fail; crash and hang are errors.
	if fails != 2 || errs != 2 || skips != 0 {
		t.Errorf("rule all: %d failures, %d errors, %d skipped; want 2, 2, 0", fails, errs, skips)
	}
	if s.Name != "trials_a" || s.Timestamp == "" {
		t.Errorf("suite name %q timestamp %q", s.Name, s.Timestamp)
	}
	wa := byName["wrong-answer"]
	if wa.Failure == nil || wa.Classname != "math" || wa.Failure.Type != "failed" ||
		!strings.Contains(wa.Failure.Message, "0 of 4 graded trials passed") ||
		!strings.Contains(wa.Failure.Text, "trial 1: FAIL (score 0.00)") ||
		!strings.Contains(wa.Failure.Text, "output lacks '42' (trial 1)") ||
		!strings.Contains(wa.Failure.Text, "✗ output contains the expected text: looked for '42'") {
		t.Errorf("wrong-answer: %+v %+v", wa, wa.Failure)
	}
	if c := byName["crash"]; c.Error == nil || c.Error.Type != "agent_crash 4" || !strings.Contains(c.Error.Text, "panic: simulated crash") {
		t.Errorf("crash: %+v", c.Error)
	}
	if c := byName["grader-hiccup"]; c.Failure != nil || c.Error != nil || !strings.Contains(c.SystemOut, "grader_error 1") {
		t.Errorf("grader-hiccup (3/3 graded, 1 grader error) = %+v", c)
	}
	if c, ok := byName["html</script>"]; !ok || c.Classname != "<i>escaping</i>" {
		t.Errorf("hostile id or category did not round-trip: %+v", byName)
	}
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	if props["k"] != "4" || props["rule"] != "all" || props["passRate"] == "" || props["passAtK"] == "" {
		t.Errorf("properties %v", props)
	}

	// The other rules only change the flaky case.
	for rule, wantFails := range map[CaseRule]int{RuleMajority: 2, RuleAny: 1} {
		d := parseJUnit(t, junitOf(t, JUnitOptions{Rule: rule}, run))
		if got := atoi(t, "failures", d.Suites[0].Failures); got != wantFails {
			t.Errorf("rule %s: %d failures, want %d", rule, got, wantFails)
		}
	}
}

func TestWriteJUnitEdgeCases(t *testing.T) {
	run, err := NewRun("dir/live.jsonl.zst", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ungraded := synthRecord("no-grader", 1, true, 1, "")
	ungraded.Score = nil
	ugly := synthRecord("ugly", 1, false, 1, "")
	ugly.Score.Reasoning = "colour \x1b[31mred\x1b[0m, NUL \x00, ]]> and <tags> & \"quotes\""
	for _, r := range []*schemas.CaptureRecord{&ungraded, &ugly} {
		if err := run.AddCapture(r); err != nil {
			t.Fatal(err)
		}
	}
	b := junitOf(t, JUnitOptions{Name: "ci"}, run, run)
	doc := parseJUnit(t, b)
	if len(doc.Suites) != 2 || doc.Tests != "4" || doc.Skipped != "2" || doc.Failures != "2" || doc.Suites[0].Name != "live" {
		t.Errorf("totals %+v, suite %q", doc, doc.Suites[0].Name)
	}
	f := doc.Suites[0].Cases[1].Failure
	if f == nil || !strings.Contains(f.Text, "]]> and <tags> & \"quotes\"") {
		t.Errorf("failure text did not round-trip: %+v", f)
	}
}

// TestJUnitPython reads the XML as Python JUnit tooling does (ElementTree:
// testsuites > testsuite > testcase with failure/error/skipped children
// and the count attributes).
func TestJUnitPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil || exec.Command(py, "-c", "import xml.etree.ElementTree").Run() != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("python3 with xml.etree is needed (HARNESS_REQUIRE_AGENTS is set)")
		}
		t.Skip("python3 with xml.etree not available")
	}
	a := readFixture(t, "trials_a.jsonl", false)
	c := readFixture(t, "capture.jsonl", false)
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(path, junitOf(t, JUnitOptions{}, a, c), 0o644); err != nil {
		t.Fatal(err)
	}
	const script = `
import json, sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
out = {"suites": [], "tests": int(root.get("tests")), "time": float(root.get("time"))}
for s in root.findall("testsuite"):
    cases = s.findall("testcase")
    kinds = {"failure": 0, "error": 0, "skipped": 0}
    for c in cases:
        assert c.get("name") and c.get("classname"), c.attrib
        float(c.get("time"))
        for k in kinds:
            if c.find(k) is not None:
                kinds[k] += 1
    assert int(s.get("tests")) == len(cases)
    assert int(s.get("failures")) == kinds["failure"], (s.get("failures"), kinds)
    assert int(s.get("errors")) == kinds["error"]
    assert int(s.get("skipped")) == kinds["skipped"]
    float(s.get("time"))
    out["suites"].append({"name": s.get("name"), "tests": len(cases), **kinds,
        "failing": sorted(c.get("name") for c in cases if c.find("failure") is not None)})
print(json.dumps(out))
`
	cmd := exec.Command(py, "-c", script, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var got struct {
		Tests  int `json:"tests"`
		Suites []struct {
			Name    string   `json:"name"`
			Tests   int      `json:"tests"`
			Failure int      `json:"failure"`
			Error   int      `json:"error"`
			Failing []string `json:"failing"`
		} `json:"suites"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("python output %s: %v", out, err)
	}
	if got.Tests != 28 || len(got.Suites) != 2 || got.Suites[0].Name != "trials_a" || got.Suites[0].Failure != 2 || got.Suites[0].Error != 2 ||
		strings.Join(got.Suites[0].Failing, ",") != "flaky-echo,wrong-answer" || got.Suites[1].Name != "capture" || got.Suites[1].Error != 2 {
		t.Errorf("python read %s", out)
	}
}

// Agents side by side: one testsuite each, no two testcases sharing a
// classname and name, and real times: a case's is its trials' time with
// grading (start to record written), a suite's the run's wall time.
func TestJUnitAgentsSideBySide(t *testing.T) {
	var runs []*Run
	for _, name := range []string{"main.jsonl", "candidate.jsonl"} {
		r, err := NewRun(name, RunOptions{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		for tr := 1; tr <= 2; tr++ {
			rec := synthRecord("a", tr, true, 1, "")
			// A 1.234 s turn, graded until 2.5 s after its start.
			rec.Timing.Written = rec.Timing.Start + 2500
			if err := r.AddCapture(&rec); err != nil {
				t.Fatal(err)
			}
		}
		runs = append(runs, r)
	}
	var b bytes.Buffer
	if err := WriteJUnit(&b, JUnitOptions{}, runs...); err != nil {
		t.Fatal(err)
	}
	var doc xSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 2 || doc.Suites[0].Name != "main" || doc.Suites[1].Name != "candidate" {
		t.Fatalf("suites %+v", doc.Suites)
	}
	seen := map[string]bool{}
	for _, s := range doc.Suites {
		// Trial 1 starts at 1 s, trial 2 is written at 2 s + 2.5 s.
		if s.Time != "3.500" {
			t.Errorf("suite %s time %s, want the wall 3.500", s.Name, s.Time)
		}
		for _, c := range s.Cases {
			key := c.Classname + "/" + c.Name
			if seen[key] {
				t.Errorf("two testcases are %s", key)
			}
			seen[key] = true
			if c.Time != "5.000" {
				t.Errorf("case %s time %s, want 5.000 (two trials of 2.5 s)", key, c.Time)
			}
		}
	}
	if !seen["main.cat-1/a"] || !seen["candidate.cat-1/a"] {
		t.Errorf("classnames %v", seen)
	}
}
