package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/results"
	"harness/rundir"
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
	if rep != (SuiteReports{Compare: CompareName, Report: ReportName}) {
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
	if rep != (SuiteReports{Report: ReportName}) {
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
	if rep.Compare != CompareName || rep.Report != "" {
		t.Errorf("reports %+v: want the comparison only", rep)
	}
	if strings.Join(warned, ",") != "report" {
		t.Errorf("warnings %v, want report", warned)
	}
	if got := WriteSuite(t.TempDir(), &rundir.Manifest{Agents: []rundir.Agent{{Output: "none.jsonl"}}}, SuiteOptions{}); got != (SuiteReports{}) {
		t.Errorf("no outputs: %+v", got)
	}
}
