package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CaseRule says when a case with graded trials passes, for JUnit and for
// the failing list of the markdown summary. The zero value is RuleAll.
type CaseRule int

// The case rules. Trials with infrastructure errors and ungraded trials are
// never in n, so they never make a case fail under any rule.
const (
	// RuleAll: every graded trial passed (c = n); a flaky case fails.
	RuleAll CaseRule = iota
	// RuleMajority: more than half of the graded trials passed (2c > n),
	// the rule of harness compare.
	RuleMajority
	// RuleAny: at least one graded trial passed (c ≥ 1), pass@n.
	RuleAny
)

// ParseCaseRule reads "all", "majority" or "any".
func ParseCaseRule(s string) (CaseRule, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all", "":
		return RuleAll, nil
	case "majority":
		return RuleMajority, nil
	case "any":
		return RuleAny, nil
	}
	return RuleAll, fmt.Errorf("unknown rule %q: want all, majority or any", s)
}

// String returns the rule's name.
func (r CaseRule) String() string {
	switch r {
	case RuleMajority:
		return "majority"
	case RuleAny:
		return "any"
	}
	return "all"
}

// Passes says whether c passes out of n ≥ 1 graded trials satisfy the rule.
func (r CaseRule) Passes(n, c int) bool {
	switch r {
	case RuleMajority:
		return 2*c > n
	case RuleAny:
		return c >= 1
	}
	return c == n
}

// Verdicts of a case in CI terms.
const (
	VerdictPass    = "pass"
	VerdictFail    = "fail"    // graded trials break the rule
	VerdictError   = "error"   // no graded trial; some trial had an infrastructure error
	VerdictSkipped = "skipped" // no graded trial and no error: run without a grader
)

// Verdict is what CI is told about a case: with n ≥ 1 graded trials, pass
// or fail by the rule; with none, error when some trial failed for
// infrastructure reasons, else skipped.
func (c *Case) Verdict(rule CaseRule) string {
	switch {
	case c.Count.N > 0 && rule.Passes(c.Count.N, c.Count.C):
		return VerdictPass
	case c.Count.N > 0:
		return VerdictFail
	case len(c.Count.Errors) > 0:
		return VerdictError
	}
	return VerdictSkipped
}

// JUnitOptions controls WriteJUnit.
type JUnitOptions struct {
	// Rule decides when a case with graded trials passes (default RuleAll).
	Rule CaseRule
	// Name names the <testsuites> element (default "harness").
	Name string
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes JUnit XML for the runs: a <testsuites> element with
// one <testsuite> per run (named by the run's file name) and one
// <testcase> per case: name is the case id, classname its category
// (metadata.category; the suite's name when there is none; with several
// runs, the suite's name and the category), time the time its trials took
// in seconds, grading included (a suite's time is its run's wall time). Each case's Verdict decides its
// child: <failure> (type "failed"; the text lists the failing trials with
// the grader's reasoning and failed checks), <error> (type: the error
// classes; the text has each trial's error message and stderr tail) or
// <skipped>. The counts on both elements are filled in (tests, failures,
// errors, skipped, time), and each suite carries the run's pass rate,
// pass@k and pass^k as properties. A case's <system-out> tells its
// counts, including trials left out of n.
func WriteJUnit(w io.Writer, opt JUnitOptions, runs ...*Run) error {
	doc := junitSuites{Name: opt.Name}
	if doc.Name == "" {
		doc.Name = "harness"
	}
	var total float64
	for _, r := range runs {
		s := junitSuiteOf(r, opt.Rule, len(runs) > 1)
		doc.Suites = append(doc.Suites, s)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
		f, _ := strconv.ParseFloat(s.Time, 64)
		total += f
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	return nil
}

// junitSuiteOf is the testsuite of run r. Its time is the run's wall time
// (first start to last record written) and a case's the time its trials
// took, grading included; with several runs (agents side by side) a
// case's classname starts with its run's name, so that no two testcases
// of the document share a classname and name.
func junitSuiteOf(r *Run, rule CaseRule, several bool) junitSuite {
	name := suiteName(r.Name)
	s := junitSuite{Name: name}
	if r.Start > 0 {
		s.Timestamp = time.UnixMilli(r.Start).UTC().Format("2006-01-02T15:04:05")
	}
	sum := r.Summary(1, 0) // only counts and means: no bootstrap needed
	s.Properties = append(s.Properties,
		junitProperty{"kind", r.Kind},
		junitProperty{"rule", rule.String()},
		junitProperty{"trials", strconv.Itoa(sum.Trials)},
		junitProperty{"graded", strconv.Itoa(sum.Graded)},
		junitProperty{"passed", strconv.Itoa(sum.Passes)})
	if sum.PassRate != nil {
		s.Properties = append(s.Properties, junitProperty{"passRate", strconv.FormatFloat(*sum.PassRate, 'f', 4, 64)})
	}
	if sum.PassAtK != nil {
		s.Properties = append(s.Properties,
			junitProperty{"k", strconv.Itoa(sum.K)},
			junitProperty{"passAtK", strconv.FormatFloat(sum.PassAtK.Mean, 'f', 4, 64)},
			junitProperty{"passExpK", strconv.FormatFloat(sum.PassExpK.Mean, 'f', 4, 64)})
	}
	if r.Agent != "" {
		s.Properties = append(s.Properties, junitProperty{"agent", strings.TrimSpace(r.Agent + " " + r.AgentVersion)})
	}
	var total float64
	for _, c := range r.Cases {
		var ms int64
		for _, t := range c.Trials {
			if t.Start > 0 && t.Written > t.Start {
				ms += t.Written - t.Start
			} else {
				ms += t.Duration
			}
		}
		secs := float64(ms) / 1000
		total += secs
		jc := junitCase{Name: c.ID, Classname: c.Category, Time: seconds(secs), SystemOut: caseCounts(c)}
		switch {
		case jc.Classname == "":
			jc.Classname = name
		case several:
			jc.Classname = name + "." + jc.Classname
		}
		s.Tests++
		switch c.Verdict(rule) {
		case VerdictFail:
			s.Failures++
			jc.Failure = &junitMessage{Type: "failed", Message: failMessage(c, rule), Text: failText(c)}
		case VerdictError:
			s.Errors++
			jc.Error = &junitMessage{Type: classList(c.Count.Errors), Message: fmt.Sprintf(
				"no graded trial: %d of %d trials failed for infrastructure reasons (%s)",
				c.ErrorCount(), len(c.Trials), classList(c.Count.Errors)), Text: errorText(c)}
		case VerdictSkipped:
			s.Skipped++
			jc.Skipped = &junitMessage{Message: "no grader verdict (run without a grader)"}
		}
		s.Cases = append(s.Cases, jc)
	}
	if r.Start > 0 && r.End > r.Start {
		total = float64(r.End-r.Start) / 1000
	}
	s.Time = seconds(total)
	return s
}

func suiteName(file string) string {
	base := filepath.Base(file)
	for _, ext := range []string{".zst", ".gz", ".jsonl", ".json"} {
		base = strings.TrimSuffix(base, ext)
	}
	if base == "" || base == "-" || base == "." {
		return "harness"
	}
	return base
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

func failMessage(c *Case, rule CaseRule) string {
	return fmt.Sprintf("%d of %d graded trials passed (rule %q: %s)", c.Count.C, c.Count.N, rule.String(), ruleText(rule))
}

func ruleText(rule CaseRule) string {
	switch rule {
	case RuleMajority:
		return "more than half must pass"
	case RuleAny:
		return "at least one must pass"
	}
	return "every graded trial must pass"
}

// failText lists the failing trials with the grader's reasoning and the
// checks that failed.
func failText(c *Case) string {
	var b strings.Builder
	for _, t := range c.Trials {
		if t.Status != StatusFail {
			continue
		}
		fmt.Fprintf(&b, "trial %d: FAIL", t.Num)
		if t.Score != nil {
			fmt.Fprintf(&b, " (score %.2f)", *t.Score)
		}
		if t.Grader != "" {
			fmt.Fprintf(&b, " by %s", t.Grader)
		}
		b.WriteString("\n")
		if t.Reasoning != "" {
			fmt.Fprintf(&b, "  %s\n", indent(t.Reasoning, "  "))
		}
		for _, ch := range t.Checks {
			if ch.Pass {
				continue
			}
			fmt.Fprintf(&b, "  ✗ %s", ch.Text)
			if ch.Reason != "" {
				fmt.Fprintf(&b, ": %s", ch.Reason)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func errorText(c *Case) string {
	var b strings.Builder
	for _, t := range c.Trials {
		if t.Error == nil {
			continue
		}
		fmt.Fprintf(&b, "trial %d: %s: %s\n", t.Num, t.Error.Class, indent(t.Error.Message, "  "))
		if t.Error.Stderr != "" {
			fmt.Fprintf(&b, "  stderr: %s\n", indent(t.Error.Stderr, "  "))
		}
	}
	return b.String()
}

func caseCounts(c *Case) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d graded trials passed; %d trials", c.Count.C, c.Count.N, len(c.Trials))
	if len(c.Count.Errors) > 0 {
		fmt.Fprintf(&b, "; left out of n for infrastructure errors: %s", classList(c.Count.Errors))
	}
	if c.Count.Ungraded > 0 {
		fmt.Fprintf(&b, "; ungraded %d", c.Count.Ungraded)
	}
	if m := c.Missing(); m > 0 {
		fmt.Fprintf(&b, "; missing %d", m)
	}
	return b.String()
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
