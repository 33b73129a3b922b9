package view

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"harness/schemas"
)

// TestBrowserGridKeysNamesAndOrder: a lone file's title names it once;
// long case names are cut in the middle (their ends show) with the whole
// name a hover away; Tab reaches a row, j/k move, Enter opens; a
// permission request shows before the tool call it gated.
func TestBrowserGridKeysNamesAndOrder(t *testing.T) {
	dir := t.TempDir()
	var recs []schemas.CaptureRecord
	for i := range 3 {
		recs = append(recs, synthRecord(fmt.Sprintf("build-cython-extension-with-a-long-name-%04d", i), 1, i != 1, 4, 50))
	}
	// The first case's agent asked leave for its first tool call.
	perm := schemas.Step{StepID: recs[0].ID + "-t1-s5", Type: schemas.StepPermission, Turn: 1, ToolCallID: "call-1",
		ToolCall: mustJSON(map[string]any{"toolCallId": "call-1", "title": "Read main.go"}), OptionID: "allow", Outcome: "selected"}
	recs[0].Trajectory = append(recs[0].Trajectory, perm)
	writeRecords(t, filepath.Join(dir, "oracle-1.jsonl"), recs...)
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1100, 800)

	tb.open("#/run?src=oracle-1.jsonl")
	tb.waitJS(`document.querySelectorAll("#grid-rows .grow").length === 3`)
	if title := evalJS[string](tb, `document.getElementById("run-title").textContent`); title != "oracle-1.jsonl" {
		t.Errorf("title %q: the file's name once", title)
	}
	type idCell struct{ Text, Title string }
	c := evalJS[idCell](tb, gridRows+`.slice(0, 1).map(r => ({Text: r.querySelector(".id").textContent, Title: r.querySelector(".id").title}))[0]`)
	if c.Title != recs[0].ID || !strings.Contains(c.Text, "…") || !strings.HasSuffix(c.Text, "-0000") || !strings.HasPrefix(c.Text, "build-") {
		t.Errorf("case cell %+v: cut in the middle, its end showing", c)
	}
	if over := evalJS[bool](tb, `(() => { const s = document.querySelector("#grid-rows .grow .id"); return s.scrollWidth > s.clientWidth + 1; })()`); over {
		t.Error("the cut case name still overflows its column")
	}

	// Tab from the text filter reaches the grid's current row.
	evalJS[bool](tb, `(document.getElementById("f-text").focus(), true)`)
	for range 30 {
		if err := chromedp.Do(tb.ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		if evalJS[bool](tb, `!!(document.activeElement && document.activeElement.classList.contains("grow"))`) {
			break
		}
	}
	if pos := evalJS[string](tb, `document.activeElement.classList.contains("grow") ? document.activeElement.dataset.pos : "none"`); pos != "0" {
		t.Fatalf("Tab reaches %q, want the first row", pos)
	}
	chromedp.Do(tb.ctx, chromedp.KeyEvent("j"))
	chromedp.Do(tb.ctx, chromedp.KeyEvent("j"))
	chromedp.Do(tb.ctx, chromedp.KeyEvent("k"))
	tb.waitJS(`document.activeElement && document.activeElement.dataset.pos === "1"`)
	chromedp.Do(tb.ctx, chromedp.KeyEvent("\r"))
	tb.waitJS(`location.hash.startsWith("#/trial") && location.hash.includes("0001")`)

	// The permission request reads before the tool call it gated.
	tb.route("#/trial?src=oracle-1.jsonl&id=" + recs[0].ID + "&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") === "5"`)
	order := evalJS[[]string](tb, `[...document.querySelectorAll("#traj .step")].map(s => s.classList[1])`)
	if strings.Join(order, ",") != "permission,tool_call,message,terminal,thought" {
		t.Errorf("step order %v", order)
	}
	tb.clean()
}
