package view

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/rundir"
	"harness/schemas"
)

// TestBrowserLiveGridFollowsTheRun: a grid opened while a run writes its
// first trials counts trials against trials and cases against cases, and
// the runs list counts a case's trials against the run's k; when the run
// ends the grid's status and filters follow it without a reload.
func TestBrowserLiveGridFollowsTheRun(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "runs", "20261127T100000Z-live")
	os.MkdirAll(run, 0o755)
	manifest := &rundir.Manifest{Suite: rundir.Suite{Name: "live"}, Started: "2026-11-27T10:00:00Z", Status: "running", K: 2, Cases: 2,
		Agents: []rundir.Agent{{Name: "agent", Output: "agent.jsonl", Status: "running"}}}
	if err := rundir.Write(run, manifest); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(run, "agent.jsonl")
	a1 := synthRecord("a", 1, true, 2, 50)
	a1.Metadata = map[string]any{"category": "cat-x", "tags": []any{"regex", "logs"}}
	writeRecords(t, out+".partial", a1)

	ix, err := New(Options{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	ix.Scan()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ix.Run(ctx)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)

	tb.open("#/")
	tb.waitJS(`document.querySelectorAll("#runs tbody tr[data-src]").length === 1`)
	if prog := evalJS[string](tb, `document.querySelector("#runs tbody tr[data-src]").textContent`); !strings.Contains(prog, "a 1/2") {
		t.Errorf("runs list progress %q: the case's trials against k", prog)
	}
	src := "runs/20261127T100000Z-live/agent.jsonl"
	tb.route("#/run?src=" + src)
	tb.waitJS(`document.body.getAttribute("data-view") === "run" && document.body.getAttribute("data-ready") === "1" && !!document.getElementById("summary-counts")`)
	if c := evalJS[string](tb, `document.getElementById("summary-counts").textContent`); !strings.HasPrefix(c, "1 of 4 trials · 1 of 2 cases") {
		t.Errorf("counts %q", c)
	}
	if s := evalJS[string](tb, `document.getElementById("run-status").textContent`); s != "running" {
		t.Errorf("status %q", s)
	}
	if n := evalJS[int](tb, `document.querySelectorAll("#f-cat option").length`); n != 2 {
		t.Errorf("category options %d, want all and cat-x", n)
	}

	// The run ends: its trials records, a new category, run.json done.
	a2 := synthRecord("a", 2, false, 2, 50)
	a2.Metadata = a1.Metadata
	b1, b2 := synthRecord("b", 1, true, 2, 50), synthRecord("b", 2, true, 2, 50)
	b1.Metadata = map[string]any{"category": "cat-y", "tags": []any{"logs"}}
	b2.Metadata = b1.Metadata
	var lines []byte
	lines = append(lines, trialsLine(t, []schemas.CaptureRecord{a1, a2})...)
	lines = append(lines, trialsLine(t, []schemas.CaptureRecord{b1, b2})...)
	if err := os.WriteFile(out, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(out + ".partial")
	manifest.Status, manifest.Ended = "done", "2026-11-27T10:01:00Z"
	if err := rundir.Write(run, manifest); err != nil {
		t.Fatal(err)
	}
	tb.waitJS(`document.getElementById("run-status").textContent === "finished"`)
	tb.waitJS(`[...document.querySelectorAll("#f-cat option")].map(o => o.value).join(",") === ",cat-x,cat-y"`)
	tb.waitJS(`document.getElementById("summary-counts").textContent.startsWith("4 of 4 trials · 2 of 2 cases")`)

	// A list in the metadata (tags) offers its items, and matches any.
	tb.route("#/run?src=" + src + "&meta.tags=")
	tb.waitJS(`document.body.getAttribute("data-ready") === "1" && !!document.querySelector("#f-metaval")`)
	vals := evalJS[[]string](tb, `[...document.querySelectorAll("#f-metaval option")].map(o => o.value)`)
	if strings.Join(vals, ",") != ",logs,regex" {
		t.Errorf("tags offered %v, want the tags", vals)
	}
	tb.route("#/run?src=" + src + "&meta.tags=regex")
	tb.waitJS(`document.body.getAttribute("data-ready") === "1" && document.querySelectorAll("#grid-rows .grow").length === 2`)
	if ids := evalJS[[]string](tb, gridRows+`.map(r => r.dataset.id)`); strings.Join(ids, ",") != "a,a" {
		t.Errorf("tags=regex rows %v", ids)
	}
	tb.clean()
}

// An empty results file gets a word on the page that it is left out until
// it holds a record, not an empty page.
func TestBrowserEmptyFileSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1200, 800)
	tb.open("#/")
	tb.waitJS(`!!document.getElementById("no-runs") && !document.getElementById("no-runs").textContent.startsWith("Searching")`)
	if s := evalJS[string](tb, `document.getElementById("no-runs").textContent`); !strings.Contains(s, "once it holds a record (an empty one is left out until then)") {
		t.Errorf("runs list: %q", s)
	}
	tb.clean()
}
