package view

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

// verifierRecord is a trial of a Harbor task graded by its verifier, whose
// test.sh ran pytest -rA (pytest's own output, from package pytestout's
// fixtures) and wrote reward.txt.
func verifierRecord(t *testing.T, id string, pass bool) schemas.CaptureRecord {
	t.Helper()
	rec := synthRecord(id, 1, pass, 4, 100)
	out, err := os.ReadFile("../pytestout/testdata/rA.txt")
	if err != nil {
		t.Fatal(err)
	}
	score, exit := 0.0, 1
	if pass {
		score, exit = 1, 0
	}
	rec.Score = &schemas.GraderResult{Pass: pass, Score: score, Grader: "harbor-verifier", DurationMs: 140_000,
		Reasoning: "reward 0 (/logs/verifier/reward.txt)",
		Outcome:   map[string]any{"exitCode": exit, "output": "+ uv run pytest /tests/test_outputs.py -rA\n" + string(out), "reward": score}}
	return rec
}

// TestBrowserVerifierOutput: a verifier's output shows on the trial page
// and side by side, folded, with pytest's failing tests first and the
// tail of the rest, the whole a click away.
func TestBrowserVerifierOutput(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, filepath.Join(dir, "a.jsonl"), verifierRecord(t, "regex-log", true))
	writeRecords(t, filepath.Join(dir, "b.jsonl"), verifierRecord(t, "regex-log", false))
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)

	tb.open("#/")
	tb.route("#/trial?src=b.jsonl&id=regex-log&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") === "4"`)
	type gout struct {
		Open                bool
		Summary, Fail, Tail string
		TailLines           int
	}
	const read = `(() => { const d = document.querySelector(SCOPE + " .grader details.gout"); if (!d) return null;
		const tail = d.querySelector("pre.gtail").textContent;
		return {Open: d.open, Summary: d.querySelector("summary").textContent, Fail: (d.querySelector("pre.gfail") || {}).textContent || "", Tail: tail, TailLines: tail.split("\n").length}; })()`
	g := evalJS[*gout](tb, strings.ReplaceAll(read, "SCOPE", `"#detail"`))
	if g == nil {
		t.Fatal("no verifier output on the trial page")
	}
	if g.Open {
		t.Error("the verifier output is not folded")
	}
	if !strings.Contains(g.Summary, "verifier output (") || !strings.Contains(g.Summary, "exit 1") || !strings.Contains(g.Summary, "3 failing tests") {
		t.Errorf("summary %q", g.Summary)
	}
	if want := "ERROR tests/test_outputs.py::test_uses_fixture - RuntimeError: fixture could ...\nFAILED tests/test_outputs.py::test_run_exists - AssertionError: File /app/run...\nFAILED tests/test_outputs.py::test_square[2-5] - assert (2 * 2) == 5"; g.Fail != want {
		t.Errorf("failing tests first: %q, want %q", g.Fail, want)
	}
	if g.TailLines != 40 || !strings.Contains(g.Tail, "2 failed, 2 passed") || strings.Contains(g.Tail, "uv run pytest") {
		t.Errorf("tail of %d lines: %q", g.TailLines, g.Tail)
	}
	tb.click("#detail details.gout summary")
	tb.click("#detail details.gout button.showall")
	if all := evalJS[string](tb, `document.querySelector("#detail details.gout pre.gtail").textContent`); !strings.HasPrefix(all, "+ uv run pytest") || !strings.Contains(all, "E       AssertionError: File /app/run.py does not exist") {
		t.Errorf("show all: %q", all)
	}

	// Side by side: each side's verifier output.
	tb.route("#/side?src=a.jsonl&src=b.jsonl&case=regex-log")
	tb.waitJS(`document.body.getAttribute("data-view") === "side" && document.body.getAttribute("data-ready") === "1" && document.querySelectorAll(".sidecol").length === 2`)
	for i, want := range []string{"exit 0", "exit 1"} {
		s := evalJS[*gout](tb, strings.ReplaceAll(read, "SCOPE", `".sidecol:nth-child(`+string(rune('1'+i))+`)"`))
		if s == nil || !strings.Contains(s.Summary, want) {
			t.Errorf("side %d verifier output: %+v", i+1, s)
		}
	}
	tb.clean()
}
