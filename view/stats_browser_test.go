package view

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

// TestBrowserDegenerateStatistics: twelve cases that all flipped show no
// zero-width interval but say there is none; identical runs share a
// rank; the page names each interval's method once.
func TestBrowserDegenerateStatistics(t *testing.T) {
	dir := t.TempDir()
	runOf := func(name string, pass bool) {
		var recs []schemas.CaptureRecord
		for i := range 12 {
			recs = append(recs, synthRecord(fmt.Sprintf("case-%02d", i), 1, pass, 2, 50))
		}
		writeRecords(t, filepath.Join(dir, name), recs...)
	}
	runOf("a.jsonl", true)
	runOf("b.jsonl", false)
	runOf("c.jsonl", true)
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)

	tb.open("#/run?src=a.jsonl")
	if s := evalJS[string](tb, `document.getElementById("summary").textContent`); !strings.Contains(s, "100.0% [75.8%, 100.0%] over 12 of 12 trials (Wilson 95% over graded trials)") {
		t.Errorf("grid summary %q", s)
	}

	tb.route("#/compare?src=a.jsonl&src=b.jsonl&src=c.jsonl")
	tb.waitJS(`document.body.getAttribute("data-view") === "compare" && document.body.getAttribute("data-ready") === "1" && !!document.getElementById("cmp-ranking")`)
	vs := evalJS[string](tb, `document.querySelector('.versus[data-b="b.jsonl"]').textContent`)
	if !strings.Contains(vs, "-100.0 pts (no interval: every case changed by the same amount) (paired bootstrap, 12 cases)") || strings.Contains(vs, "[-100.0 pts, -100.0 pts]") {
		t.Errorf("all flipped: %q", vs)
	}
	ranks := evalJS[[]string](tb, `[...document.querySelectorAll("#cmp-ranking tr")].slice(1).map(r => [...r.children].map(c => c.textContent).join("|"))`)
	if want := "[1|A|100.0%|[73.5%, 100.0%] exact 1|C|100.0%|[73.5%, 100.0%] exact 3|B|0.0%|[0.0%, 26.5%] exact]"; fmt.Sprint(ranks) != want {
		t.Errorf("ranking %v, want %s", ranks, want)
	}
	if m := evalJS[string](tb, `(document.getElementById("cmp-methods") || {}).textContent || ""`); !strings.Contains(m, "Wilson") || !strings.Contains(m, "paired bootstrap") || !strings.Contains(m, "Clopper–Pearson") {
		t.Errorf("methods note %q", m)
	}
	tb.clean()
}
