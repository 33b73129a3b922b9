package view

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stepsFixture returns the multi-step trial of testdata/results with
// artifacts added (one copied, one missing) and the second step's turn
// given an error, as one JSON line.
func stepsFixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/results/capture_steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["artifacts"] = map[string]any{"dir": "out.artifacts/three-steps-t1", "paths": []string{"report.txt"}, "missing": []string{"/app/gone.log: no such file"}}
	steps := rec["taskSteps"].([]any)
	steps[1].(map[string]any)["error"] = map[string]any{"class": "timeout", "message": "the step's turn ran past 15s"}
	out, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// stepsRows reads the task steps table and the artifacts list under scope.
const stepsRows = `(() => { const t = document.querySelector(SCOPE + " table.tasksteps"); if (!t) return null;
	const rows = [...t.querySelectorAll("tr.taskstep")].map(r => [...r.querySelectorAll("td")].map(c => c.textContent));
	const a = document.querySelector(SCOPE + " .artifacts");
	return {Rows: rows, Ended: [...t.querySelectorAll("tr.ended td.name")].map(c => c.textContent),
		Artifacts: a ? [...a.querySelectorAll("li")].map(l => l.textContent) : null, Dir: a ? a.querySelector(".adir").textContent : ""}; })()`

type stepsView struct {
	Rows      [][]string
	Ended     []string
	Artifacts []string
	Dir       string
}

// checkStepsView asserts what the record head shows of the fixture's
// steps and artifacts.
func checkStepsView(t *testing.T, v *stepsView) {
	t.Helper()
	if v == nil {
		t.Fatal("no task steps table in the record head")
	}
	want := [][]string{
		{"write", "1.00", "", "no", "", "7 ms", "145 ms", "", ""},
		{"extend", "0.00", "order 1", "yes", "23 ms", "15 ms", "44 ms", "timeout: the step's turn ran past 15s", "step extend: order 0 is below min_reward 1"},
	}
	if len(v.Rows) != len(want) {
		t.Fatalf("%d step rows %q, want %d", len(v.Rows), v.Rows, len(want))
	}
	for i := range want {
		if strings.Join(v.Rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("step row %d: %q, want %q", i+1, v.Rows[i], want[i])
		}
	}
	if len(v.Ended) != 1 || v.Ended[0] != "extend" {
		t.Errorf("steps marked as ending the trial: %q", v.Ended)
	}
	if strings.Join(v.Artifacts, "|") != "report.txt|missing: /app/gone.log: no such file" || !strings.Contains(v.Dir, "out.artifacts/three-steps-t1") {
		t.Errorf("artifacts %q in %q", v.Artifacts, v.Dir)
	}
}

// TestBrowserTaskSteps: a multi-step trial's page shows its steps (reward,
// min_reward, whether it counts, timing, error, why the trial ended) and
// its artifacts in the record head.
func TestBrowserTaskSteps(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), stepsFixture(t), 0o644); err != nil {
		t.Fatal(err)
	}
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)
	tb.open("#/")
	tb.route("#/trial?src=steps.jsonl&id=three-steps&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") === "2"`)
	checkStepsView(t, evalJS[*stepsView](tb, strings.ReplaceAll(stepsRows, "SCOPE", `"#detail"`)))
	tb.clean()
}
