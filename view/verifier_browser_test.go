package view

import (
	"fmt"
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

// TestBrowserSideBySideChangesAndScale: side by side shows each trial's
// file changes and paths changed outside the working directory (folded,
// counted), and the two timing bars share one scale, so a 14 s trial's
// bar is seven times a 2 s one's; the trial page shows the outside paths
// too.
func TestBrowserSideBySideChangesAndScale(t *testing.T) {
	dir := t.TempDir()
	a, b := synthRecord("regex-log", 1, true, 3, 50), synthRecord("regex-log", 1, false, 3, 50)
	a.Timing.Total, a.Timing.SessionCreation = 14000, 0
	b.Timing.Total, b.Timing.SessionCreation = 2000, 0
	a.Workspace = &schemas.Workspace{FileChanges: []schemas.FileChange{{Path: "run.py", Status: "added", Size: 12, Diff: "+print('hi')"}}}
	var outside []schemas.PathChange
	for i := range 600 {
		outside = append(outside, schemas.PathChange{Path: fmt.Sprintf("/usr/lib/python3/x%03d.py", i), Status: "added"})
	}
	outside = append(outside, schemas.PathChange{Path: "/etc/group", Status: "modified"})
	b.Workspace = &schemas.Workspace{FileChanges: []schemas.FileChange{}, OutsideChanges: outside}
	writeRecords(t, filepath.Join(dir, "a.jsonl"), a)
	writeRecords(t, filepath.Join(dir, "b.jsonl"), b)
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)
	tb.open("#/")
	tb.route("#/side?src=a.jsonl&src=b.jsonl&case=regex-log")
	tb.waitJS(`document.body.getAttribute("data-ready") === "1" && document.querySelectorAll(".sidecol").length === 2`)
	widths := evalJS[[]float64](tb, `[...document.querySelectorAll(".sidecol .timing .tbar")].map(b => b.getBoundingClientRect().width)`)
	if len(widths) != 2 || widths[1] <= 0 || widths[0]/widths[1] < 6.5 || widths[0]/widths[1] > 7.5 {
		t.Errorf("timing bars %v: want A's 7 times B's", widths)
	}
	if fc := evalJS[string](tb, `(document.querySelector('.sidecol:nth-child(1) details.filechanges') || {}).textContent || ""`); !strings.Contains(fc, "added run.py") {
		t.Errorf("A's file changes: %q", fc)
	}
	type oc struct {
		Open       bool
		Summary    string
		Lines      int
		HasShowAll bool
	}
	const read = `(() => { const d = document.querySelector(SCOPE + " details.outsidechanges"); if (!d) return null;
		return {Open: d.open, Summary: d.querySelector("summary").textContent, Lines: d.querySelector("pre.outside").textContent.split("\n").length, HasShowAll: !!d.querySelector("button.showall")}; })()`
	o := evalJS[*oc](tb, strings.ReplaceAll(read, "SCOPE", `".sidecol:nth-child(2)"`))
	if o == nil || o.Open || o.Summary != "601 paths changed outside the working directory (600 added, 1 modified)" || o.Lines != 500 || !o.HasShowAll {
		t.Errorf("B's outside changes: %+v", o)
	}
	tb.route("#/trial?src=b.jsonl&id=regex-log&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") === "3"`)
	o = evalJS[*oc](tb, strings.ReplaceAll(read, "SCOPE", `"#detail"`))
	if o == nil || o.Open || !strings.HasPrefix(o.Summary, "601 paths changed outside") {
		t.Errorf("trial page outside changes: %+v", o)
	}
	tb.click("#detail details.outsidechanges summary")
	tb.click("#detail details.outsidechanges button.showall")
	if all := evalJS[string](tb, `document.querySelector("#detail pre.outside").textContent`); !strings.Contains(all, "modified /etc/group") {
		t.Error("show all does not list /etc/group")
	}
	tb.clean()
}
