package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"harness/schemas"
)

func TestWriteHTMLSelfContained(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", true)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Options{Resamples: 50, Generated: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)}, run); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	// Nothing is fetched: no src/href to another place, no @import or url().
	for _, re := range []string{`(?i)<(script|img|link|iframe)[^>]*\s(src|href)=`, `(?i)@import`, `(?i)url\(`, `(?i)https?://[^"\s]*\.(js|css)`} {
		if m := regexp.MustCompile(re).Find(page); m != nil {
			t.Errorf("page refers to an outside resource: %q", m)
		}
	}
	if !bytes.Contains(page, []byte("generated 2026-01-02 03:04 UTC")) || !bytes.Contains(page, []byte("<svg")) {
		t.Error("page lacks the date or the SVG charts")
	}
	// Every script element is one of ours, and each closes where it should:
	// the hostile case id and input never end a block early.
	opens := regexp.MustCompile(`<script[ >]`).FindAllIndex(page, -1)
	closes := bytes.Count(page, []byte("</script>"))
	if len(opens) != 3 || closes != 3 {
		t.Errorf("%d <script> and %d </script>, want 3 each (index, one chunk, code)", len(opens), closes)
	}
	if bytes.Contains(page, []byte("<script>alert(1)")) || bytes.Contains(page, []byte("<b>bold</b>")) {
		t.Error("hostile input appears unescaped")
	}
	// The data blocks are valid JSON, and hold the hostile text intact.
	ix := extractIndex(t, page)
	var found bool
	for _, c := range ix.Cases {
		if c.ID == "html</script>" && c.Category == "<i>escaping</i>" && strings.Contains(c.Input, "</script><script>alert(1)</script>") {
			found = true
		}
	}
	if !found {
		t.Error("the hostile case did not survive the index round trip")
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" class="trial-data" id="trials-0-0">(.*?)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("no trial-data chunk")
	}
	var recs []schemas.CaptureRecord
	if err := json.Unmarshal(m[1], &recs); err != nil {
		t.Fatalf("trial-data chunk: %v", err)
	}
	if len(recs) != run.Trials() {
		t.Errorf("chunk holds %d records, want %d", len(recs), run.Trials())
	}
	// Each index trial points at its record.
	for _, c := range ix.Cases {
		for _, tr := range c.Sides[0].Trials {
			rec := recs[tr.Ref[1]]
			if rec.ID != c.ID || rec.Trial != tr.Num {
				t.Errorf("%s trial %d points at %s trial %d", c.ID, tr.Num, rec.ID, rec.Trial)
			}
		}
	}
	if n := strings.Count(buf.String(), `class="pt"`); n != 8 {
		t.Errorf("%d curve points, want 8 (k=1..4, two charts)", n)
	}
}

func TestWriteHTMLChunks(t *testing.T) {
	run := synthRun(t, 120, 5, 4, true) // 600 records: more than one chunk
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Options{Resamples: -1}, run); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	ix := extractIndex(t, page)
	chunks := map[int]int{}
	for _, c := range ix.Cases {
		for _, tr := range c.Sides[0].Trials {
			chunks[tr.Ref[0]] = max(chunks[tr.Ref[0]], tr.Ref[1]+1)
		}
	}
	re := regexp.MustCompile(`(?s)<script type="application/json" class="trial-data" id="trials-0-(\d+)">(.*?)</script>`)
	blocks := re.FindAllSubmatch(page, -1)
	if len(blocks) < 3 || len(blocks) != len(chunks) {
		t.Fatalf("%d chunks in the page, %d referenced", len(blocks), len(chunks))
	}
	for i, b := range blocks {
		var recs []json.RawMessage
		if err := json.Unmarshal(b[2], &recs); err != nil {
			t.Fatalf("chunk %s: %v", b[1], err)
		}
		if len(recs) != chunks[i] || len(recs) > chunkRecords {
			t.Errorf("chunk %d: %d records, index refers to %d", i, len(recs), chunks[i])
		}
	}
}

func TestWriteHTMLCompareAndLimits(t *testing.T) {
	a := readFixture(t, "trials_a.jsonl", false)
	b := readFixture(t, "trials_b.jsonl", false)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Options{Title: "A <vs> B", Resamples: 20}, a, b); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"<title>A &lt;vs&gt; B</title>", `id="status-matrix"`, `data-field="gained">1 gained`, `data-field="lost">1 lost`, `id="filter-change"`} {
		if !strings.Contains(page, want) {
			t.Errorf("compare page lacks %q", want)
		}
	}
	if strings.Contains(page, `class="trial-data"`) {
		t.Error("runs read without details still embedded records")
	}
	ix := extractIndex(t, buf.Bytes())
	chg := map[string]string{}
	for _, c := range ix.Cases {
		chg[c.ID] = c.Change
	}
	if chg["answer"] != "lost" || chg["wrong-answer"] != "gained" || chg["late"] != "only-a" || chg["new-case"] != "only-b" || chg["tools"] != "same" || chg["crash"] != "no-verdict" {
		t.Errorf("changes %v", chg)
	}
	if err := WriteHTML(&buf, Options{}); err == nil {
		t.Error("WriteHTML with no runs did not fail")
	}
	if err := WriteHTML(&buf, Options{}, a, b, a, b, a, b, a, b, a); err == nil {
		t.Error("WriteHTML with nine runs did not fail")
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after -= len(p); f.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriteHTMLWriteError(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", true)
	for _, after := range []int{10, 60_000, 150_000} {
		if err := WriteHTML(&failWriter{after: after}, Options{Resamples: -1}, run); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("write failing after %d bytes: %v", after, err)
		}
	}
}

func TestChartGeometry(t *testing.T) {
	est := func(k int, m float64) schemas.Estimate {
		return schemas.Estimate{K: k, Mean: m, Low: m - 0.1, High: m + 0.1, Cases: 3}
	}
	c := buildChart("pass@k", "passAt", "", []string{"A", "B"}, [][]schemas.Estimate{
		{est(1, 0.5), est(2, 0.7), est(3, 0.8)},
		{est(1, 0.2)},
	})
	if len(c.Series) != 2 || len(c.Series[0].Points) != 3 || len(c.Series[1].Points) != 1 {
		t.Fatalf("series %+v", c.Series)
	}
	p := c.Series[0].Points
	if p[0].X != chartLeft || p[2].X != chartW-chartRight || p[0].Y <= p[1].Y {
		t.Errorf("points %+v: want k=1 at the left edge, k=3 at the right, higher values higher", p)
	}
	if y := c.Series[1].Points[0].Y; y != chartTop+0.8*float64(chartH-chartBottom-chartTop) {
		t.Errorf("0.2 drawn at y=%v", y)
	}
	if empty := buildChart("x", "x", "", []string{"A"}, [][]schemas.Estimate{nil}); !empty.Empty {
		t.Error("a chart without points is not marked empty")
	}
	many := make([]schemas.Estimate, 100)
	for i := range many {
		many[i] = est(i+1, 0.5)
	}
	if c := buildChart("x", "x", "", []string{"A"}, [][]schemas.Estimate{many}); len(c.TicksX) > 14 || len(c.Series[0].Points) != 100 {
		t.Errorf("k=1..100: %d ticks, %d points", len(c.TicksX), len(c.Series[0].Points))
	}
}

// TestWriteHTMLHeadlineCountsGraded: the summary says how many cases were
// graded of how many ran, names the ungraded ones, and warns of grader
// errors.
func TestWriteHTMLHeadlineCountsGraded(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", false)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Options{Resamples: 50}, run); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`data-field="cases">12 graded of 14 run (not graded: crash, hang)</td>`,
		`data-field="grader-errors">1 trials hit grader errors: the pass rate covers only the graded trials</td>`,
		`data-field="coverage">over 47 of 56 trials; 9 left out (agent_crash: 4, grader_error: 1, timeout: 4)</div>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %s", want)
		}
	}
}

// Every run a report holds side by side has its curve styled: a stroke
// and a legend swatch of its own, up to MaxRuns.
func TestEverySeriesStyled(t *testing.T) {
	strokes := map[string]bool{}
	for i := range MaxRuns {
		line := regexp.MustCompile(fmt.Sprintf(`svg \.s%d \.line \{ stroke: ([^;]+);`, i)).FindStringSubmatch(pageCSS)
		if line == nil {
			t.Errorf("series s%d has no stroke", i)
			continue
		}
		if strokes[line[1]] {
			t.Errorf("series s%d has the stroke %s of another", i, line[1])
		}
		strokes[line[1]] = true
		if !regexp.MustCompile(fmt.Sprintf(`\.chartlegend \.s%d i \{ background: `, i)).MatchString(pageCSS) {
			t.Errorf("series s%d has no legend swatch", i)
		}
	}
}
