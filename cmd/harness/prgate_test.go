package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/rundir"
)

// prGrader fails the records of the agent command that names itself
// "worse", but on cases c9 and c10.
const prGrader = `#!/bin/sh
rec=$(cat)
case "$rec" in
*'--name worse"'*)
  case "$rec" in
  *'"id":"c9",'*|*'"id":"c10",'*) ;;
  *) echo '{"pass":false,"score":0,"reasoning":"wrong"}'; exit 0 ;;
  esac ;;
esac
echo '{"pass":true,"score":1}'
`

// prDir is a directory holding ten cases and the grader.
func prDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var cases strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&cases, `{"id":"c%d","input":"echo %d"}`+"\n", i, i)
	}
	write(t, filepath.Join(dir, "cases.jsonl"), cases.String(), 0o644)
	write(t, filepath.Join(dir, "grader.sh"), prGrader, 0o755)
	return dir
}

// A pull request's run as CI has it: two configurations of an agent, the
// candidate significantly worse than the baseline. harness run fails by
// the suite's comparison gate (exit 1), and summary.md, the comment,
// opens with the reason; run.json holds the verdict.
func TestSuiteComparisonGateFailsTheBuild(t *testing.T) {
	dir := prDir(t)
	write(t, filepath.Join(dir, "suite.yaml"), `name: pr
prompts: cases.jsonl
agents:
  baseline: fakeagent
  candidate: fakeagent --name worse
graders: [./grader.sh]
gates:
  baseline: baseline
  max-regression: 0.1
`, 0o644)
	stderr := countsRun(t, dir, 1, "run", "suite.yaml", "-o", "run")
	if !strings.Contains(stderr, "gate FAILED (comparison with baseline): candidate:") {
		t.Errorf("the terminal does not say which gate failed:\n%s", stderr)
	}
	md, err := os.ReadFile(filepath.Join(dir, "run", "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(md), "\n")
	if len(lines) < 5 || lines[2] != "**Gate failed** (1 of 1 comparison with the baseline):" ||
		!strings.Contains(lines[4], "a drop of 0.800, over the 0.1 allowed, and significant (McNemar p = 0.0078 &lt; 0.05; 8 lost: c1,") {
		t.Errorf("summary.md does not open with the gate's verdict and reason:\n%s", md)
	}
	m, err := rundir.Read(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Gates) != 1 || !m.Gates[0].Failed || m.Gates[0].Run != "candidate" || math.Abs(m.Gates[0].PValue-0.0078125) > 1e-9 {
		b, _ := json.Marshal(m.Gates)
		t.Errorf("run.json gates: %s", b)
	}
	if m.Agents[1].Status != statusGateFailed {
		t.Errorf("candidate status %q", m.Agents[1].Status)
	}
}

// A run stopped by its budget (exit 4) still writes summary.md and
// report.html of what ran, saying that the budget stopped it and what did
// not run.
func TestSuiteBudgetStopStillReports(t *testing.T) {
	dir := prDir(t)
	write(t, filepath.Join(dir, "suite.yaml"), `name: pr
prompts: cases.jsonl
agents:
  baseline: {command: fakeagent --usage, model: m}
  candidate: {command: fakeagent --usage --name worse, model: m}
graders: [./grader.sh]
prices:
  m: {input: 1000, output: 1000}
max-cost: 0.05
gates:
  baseline: baseline
`, 0o644)
	countsRun(t, dir, 4, "run", "suite.yaml", "-o", "run")
	for _, name := range []string{"summary.md", "report.html"} {
		b, err := os.ReadFile(filepath.Join(dir, "run", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, want := range []string{"Stopped early:", "the budget (max-cost 0.05 (suite.yaml line 9)) was spent; not run: baseline (", "candidate ("} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not say %q", name, want)
			}
		}
	}
}
