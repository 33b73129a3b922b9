package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestBrowserTaskSteps: the report's trial panel shows a multi-step
// trial's steps (reward, min_reward, whether it counts, timing, error, why
// the trial ended) and its artifacts, as the viewer does (the same
// transcript.js).
func TestBrowserTaskSteps(t *testing.T) {
	b, err := os.ReadFile("../testdata/results/capture_steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["artifacts"] = map[string]any{"dir": "out.artifacts/three-steps-t1", "paths": []string{"report.txt", "logs"}, "missing": []string{"/app/gone.log: no such file"}}
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	run, err := ReadRun("steps.jsonl", bytes.NewReader(append(line, '\n')), RunOptions{Details: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	path := writeHTML(t, t.TempDir(), Options{}, run)
	tb := newTab(t, 1200, 900)
	tb.open(path, "case=three-steps")
	tb.waitJS(`document.getElementById("detail").getAttribute("data-case") === "three-steps" && !!document.querySelector("#detail table.tasksteps")`)
	rows := evalJS[[][]string](tb, `[...document.querySelectorAll("#detail table.tasksteps tr.taskstep")].map(r => [...r.querySelectorAll("td")].map(c => c.textContent))`)
	want := [][]string{
		{"write", "1.00", "", "no", "", "7 ms", "145 ms", "", ""},
		{"extend", "0.00", "order 1", "yes", "23 ms", "15 ms", "44 ms", "", "step extend: order 0 is below min_reward 1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("step rows %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("step row %d: %q, want %q", i+1, rows[i], want[i])
		}
	}
	if arts := evalJS[[]string](tb, `[...document.querySelectorAll("#detail .artifacts li")].map(l => l.textContent)`); strings.Join(arts, "|") != "report.txt|logs|missing: /app/gone.log: no such file" {
		t.Errorf("artifacts %q", arts)
	}
	if h := evalJS[string](tb, `[...document.querySelectorAll("#detail h4")].map(h => h.textContent).join("|")`); !strings.Contains(h, "task steps (2)") || !strings.Contains(h, "artifacts (2 copied, 1 missing)") {
		t.Errorf("headings %q", h)
	}
	tb.clean()
}
