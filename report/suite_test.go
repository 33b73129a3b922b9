package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"harness/results"
	"harness/rundir"
	"harness/trials"
)

// suiteDir is a run directory holding the fixtures as the outputs of the
// agents named.
func suiteDir(t *testing.T, agents map[string]string) (string, *rundir.Manifest) {
	t.Helper()
	dir := t.TempDir()
	m := &rundir.Manifest{}
	for _, name := range []string{"a", "b", "c", "empty"} {
		src, ok := agents[name]
		if !ok {
			continue
		}
		var b []byte
		if src != "" {
			var err error
			if b, err = os.ReadFile(fixture(src)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m.Agents = append(m.Agents, rundir.Agent{Name: name, Output: name + ".jsonl"})
	}
	return dir, m
}

func TestWriteSuiteTwoAgents(t *testing.T) {
	dir, m := suiteDir(t, map[string]string{"a": "trials_a.jsonl", "b": "trials_b.jsonl", "empty": ""})
	var text bytes.Buffer
	var warned []string
	rep := WriteSuite(dir, m, SuiteOptions{Title: "nightly", Text: &text, Warn: func(what string, err error) {
		warned = append(warned, what+": "+err.Error())
	}})
	if len(warned) > 0 {
		t.Fatalf("warnings: %v", warned)
	}
	if !reflect.DeepEqual(rep, SuiteReports{Compare: CompareName, Report: ReportName, JUnit: JUnitName}) {
		t.Errorf("reports %+v", rep)
	}
	b, err := os.ReadFile(filepath.Join(dir, CompareName))
	if err != nil {
		t.Fatal(err)
	}
	var cmp map[string]any
	if err := json.Unmarshal(b, &cmp); err != nil {
		t.Fatalf("compare.json: %v", err)
	}
	if text.Len() < 2 || text.String()[0] != '\n' {
		t.Errorf("comparison text %q", text.String())
	}
	html, err := os.ReadFile(filepath.Join(dir, ReportName))
	if err != nil || !bytes.Contains(html, []byte("nightly")) {
		t.Errorf("report.html: %v (titled nightly: %v)", err, bytes.Contains(html, []byte("nightly")))
	}
	md, err := os.ReadFile(filepath.Join(dir, SummaryName))
	if err != nil || !strings.Contains(string(md), "nightly") {
		t.Errorf("summary.md: %v", err)
	}
}

func TestWriteSuiteOneAgentNoComparison(t *testing.T) {
	dir, m := suiteDir(t, map[string]string{"a": "trials_a.jsonl"})
	rep := WriteSuite(dir, m, SuiteOptions{})
	if !reflect.DeepEqual(rep, SuiteReports{Report: ReportName, JUnit: JUnitName}) {
		t.Errorf("reports %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, CompareName)); err == nil {
		t.Error("compare.json made for one agent")
	}
}

func TestWriteSuiteWarnsAndGoesOn(t *testing.T) {
	dir, m := suiteDir(t, map[string]string{"a": "trials_a.jsonl", "b": "trials_b.jsonl"})
	refused := errors.New("refused")
	var warned []string
	rep := WriteSuite(dir, m, SuiteOptions{
		Create: func(string) (*results.File, error) { return nil, refused },
		Warn:   func(what string, err error) { warned = append(warned, what) },
	})
	if rep.Compare != CompareName || rep.Report != "" || rep.JUnit != "" {
		t.Errorf("reports %+v: want the comparison only", rep)
	}
	if strings.Join(warned, ",") != "junit,report" {
		t.Errorf("warnings %v, want junit,report", warned)
	}
	if got := WriteSuite(t.TempDir(), &rundir.Manifest{Agents: []rundir.Agent{{Output: "none.jsonl"}}}, SuiteOptions{}); !reflect.DeepEqual(got, SuiteReports{}) {
		t.Errorf("no outputs: %+v", got)
	}
}

// The comparison gate is decided for every agent but the baseline, and its
// verdict comes first in summary.md and report.html and in the text, with
// McNemar's p-value.
func TestWriteSuiteGates(t *testing.T) {
	dir, m := suiteDir(t, map[string]string{"a": "trials_a.jsonl", "b": "trials_b.jsonl"})
	var text bytes.Buffer
	rep := WriteSuite(dir, m, SuiteOptions{Title: "pr", Text: &text, Regression: &trials.RegressionGate{Baseline: "a", MaxDrop: 0, Alpha: 0.05},
		Warn: func(what string, err error) { t.Errorf("%s: %v", what, err) }})
	if len(rep.Gates) != 1 || rep.Gates[0].Run != "b" || rep.Gates[0].Failed {
		t.Fatalf("gates %+v", rep.Gates)
	}
	reason := rep.Gates[0].Reason
	if !strings.Contains(reason, "McNemar p = 1.0000") || !strings.Contains(reason, "1 lost: answer") {
		t.Errorf("reason %q", reason)
	}
	if !strings.HasPrefix(strings.TrimSpace(text.String()), "gate passed (comparison with a): "+reason) {
		t.Errorf("text does not start with the verdict:\n%s", text.String())
	}
	md, _ := os.ReadFile(filepath.Join(dir, SummaryName))
	lines := strings.Split(string(md), "\n")
	if len(lines) < 5 || lines[2] != "**Gates passed** (1 comparison with the baseline):" || !strings.HasPrefix(lines[4], "- passed, comparison with `a`: b: pass rate") {
		t.Errorf("summary.md does not start with the verdict:\n%s", md)
	}
	html, _ := os.ReadFile(filepath.Join(dir, ReportName))
	gi, si := strings.Index(string(html), `<section id="gates">`), strings.Index(string(html), `<section id="summary">`)
	if gi < 0 || gi > si || !strings.Contains(string(html), "<h2>Gates: passed</h2>") {
		t.Errorf("report.html has no gates section before the summary")
	}

	// junit.xml: one testsuite per agent.
	var junit xSuites
	jb, _ := os.ReadFile(filepath.Join(dir, JUnitName))
	if err := xml.Unmarshal(jb, &junit); err != nil || len(junit.Suites) != 2 || junit.Suites[0].Name != "a" || junit.Suites[1].Name != "b" {
		t.Errorf("junit.xml: %v, suites %+v", err, junit.Suites)
	}

	// A baseline that wrote nothing fails every agent.
	rep = WriteSuite(dir, m, SuiteOptions{Regression: &trials.RegressionGate{Baseline: "gone", Alpha: 0.05}})
	if len(rep.Gates) != 2 || !rep.Gates[0].Failed || !strings.Contains(rep.Gates[1].Reason, "the baseline gone wrote no records") {
		t.Errorf("gates %+v", rep.Gates)
	}
	md, _ = os.ReadFile(filepath.Join(dir, SummaryName))
	if !strings.Contains(string(md), "**Gate failed** (2 of 2 comparisons with the baseline):\n\n- **failed**, comparison with `gone`: a: the baseline gone wrote no records") {
		t.Errorf("summary.md:\n%s", md)
	}
	html, _ = os.ReadFile(filepath.Join(dir, ReportName))
	if !strings.Contains(string(html), "<h2>Gates: 2 failed</h2>") || !strings.Contains(string(html), `class="warn gate-failed" data-agent="a"`) {
		t.Errorf("report.html does not show the failed gates")
	}
}
