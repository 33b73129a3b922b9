package view

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"testing"

	"harness/schemas"
)

// queryIDs runs a grid query given as URL parameters and returns the
// distinct case ids of the rows, in order.
func queryIDs(t *testing.T, ix *Index, src, params string) ([]string, Page) {
	t.Helper()
	v, err := url.ParseQuery(params)
	if err != nil {
		t.Fatal(err)
	}
	q, err := parseQuery(v)
	if err != nil {
		t.Fatal(err)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := ix.sources[src]
	var other *Source
	if q.Changed != "" {
		other = ix.sources[q.Changed]
	}
	p := s.query(q, other)
	var ids []string
	for _, r := range p.Rows {
		if len(ids) == 0 || ids[len(ids)-1] != r.ID {
			ids = append(ids, r.ID)
		}
	}
	return ids, p
}

// TestQuery: the grid's filters and sorts, on the report fixtures.
func TestQuery(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir, "trials_a.jsonl")
	copyFixture(t, dir, "trials_b.jsonl")
	writeRecords(t, dir+"/calc.jsonl", synthRecord("right", 1, true, 1, 10), synthRecord("wrong", 2, false, 1, 10), synthRecord("wrong", 3, false, 1, 10))
	ix := newIndex(t, dir)

	ids, _ := queryIDs(t, ix, "trials_a.jsonl", "changed=trials_b.jsonl")
	sort.Strings(ids)
	if fmt.Sprint(ids) != "[answer wrong-answer]" {
		t.Errorf("changed against B: %v", ids)
	}
	if ids, _ := queryIDs(t, ix, "trials_a.jsonl", "changed=trials_b.jsonl&chg=lost"); fmt.Sprint(ids) != "[wrong-answer]" {
		t.Errorf("lost against B (A fails where B passes): %v", ids)
	}
	if ids, _ := queryIDs(t, ix, "trials_a.jsonl", "changed=trials_b.jsonl&chg=only-here"); fmt.Sprint(ids) != "[late]" {
		t.Errorf("only in A: %v", ids)
	}
	if ids, _ := queryIDs(t, ix, "trials_a.jsonl", "st=flaky"); fmt.Sprint(ids) != "[flaky-echo]" {
		t.Errorf("flaky: %v", ids)
	}
	ids, p := queryIDs(t, ix, "trials_a.jsonl", "st=error")
	for _, r := range p.Rows {
		if r.Status != statusError {
			t.Errorf("errors filter: %s/%d is %s", r.ID, r.Trial, r.Status)
		}
	}
	if !slices.Contains(ids, "crash") || !slices.Contains(ids, "grader-hiccup") {
		t.Errorf("errors: %v", ids)
	}
	if ids, _ := queryIDs(t, ix, "trials_a.jsonl", "meta.category=files"); fmt.Sprint(ids) != "[fs terminal]" {
		t.Errorf("metadata category=files: %v", ids)
	}
	if ids, _ := queryIDs(t, ix, "trials_a.jsonl", "cat=math&st=fail"); fmt.Sprint(ids) != "[wrong-answer flaky-echo]" {
		t.Errorf("math and failed: %v", ids)
	}
	_, p = queryIDs(t, ix, "trials_a.jsonl", "dmin=4000&sort=duration")
	if p.Matched == 0 {
		t.Fatal("no trial of 4 s or more")
	}
	for i, r := range p.Rows {
		if r.Duration < 4000 || (i > 0 && r.Duration < p.Rows[i-1].Duration) {
			t.Errorf("dmin=4000 sorted by duration: row %d is %d ms", i, r.Duration)
		}
	}
	_, p = queryIDs(t, ix, "trials_a.jsonl", "dmax=100&sort=duration&desc=1")
	for i, r := range p.Rows {
		if r.Duration > 100 || (i > 0 && r.Duration > p.Rows[i-1].Duration) {
			t.Errorf("dmax=100 sorted by duration descending: row %d is %d ms", i, r.Duration)
		}
	}
	// Cost ranges and text: the synthetic records cost 0.001 per trial number.
	if ids, _ := queryIDs(t, ix, "calc.jsonl", "cmin=0.0015"); fmt.Sprint(ids) != "[wrong]" {
		t.Errorf("cost at least 0.0015: %v", ids)
	}
	if _, p := queryIDs(t, ix, "calc.jsonl", "q=PASS+(TRIAL+3)"); p.Matched != 1 || p.Rows[0].Trial != 3 {
		t.Errorf("text filter: %+v", p)
	}
	if _, p := queryIDs(t, ix, "calc.jsonl", "sort=meta.difficulty"); p.Rows[0].Meta["difficulty"] != "easy" {
		t.Errorf("sorted by metadata: first is %v", p.Rows[0].Meta)
	}
	// Paging around a trial, as the trial view's keys use it.
	_, p = queryIDs(t, ix, "trials_a.jsonl", "find=tools&ftrial=2")
	if p.At < 0 || p.Rows[p.At-p.Offset].ID != "tools" || p.Rows[p.At-p.Offset].Trial != 2 {
		t.Errorf("find tools/2: at %d offset %d", p.At, p.Offset)
	}
}

// A trial's duration is the trial's, its verification included (the agent's
// part beside it): the grid shows it and the duration filter reads it. A
// record of an older run, with the agent's time only, keeps it.
func TestQueryDurationIsTheTrials(t *testing.T) {
	dir := t.TempDir()
	verified := synthRecord("verified", 1, false, 1, 10)
	verified.Timing.Total, verified.Timing.Trial = 147, 140_000
	old := synthRecord("old", 1, true, 1, 10)
	old.Timing.Total = 2000
	writeRecords(t, dir+"/task.jsonl", verified, old)
	ix := newIndex(t, dir)

	ids, p := queryIDs(t, ix, "task.jsonl", "dmin=100000")
	if fmt.Sprint(ids) != "[verified]" {
		t.Fatalf("dmin=100000: %v, want the verified trial (140 s with its verifier)", ids)
	}
	if r := p.Rows[0]; r.Duration != 140_000 || r.AgentDuration != 147 {
		t.Errorf("verified trial: duration %d, agent %d; want 140000 and 147", r.Duration, r.AgentDuration)
	}
	if _, p := queryIDs(t, ix, "task.jsonl", "dmax=5000"); len(p.Rows) != 1 || p.Rows[0].ID != "old" || p.Rows[0].Duration != 2000 {
		t.Errorf("dmax=5000: %+v, want the older record at its 2000 ms", p.Rows)
	}
}

// A line that is not JSON in the middle of a results file is said to be
// not JSON, among the problems the run's grid shows above its rows.
func TestNotJSONLineIsAProblemOfTheGrid(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir+"/a.jsonl", synthRecord("x", 1, true, 1, 10), synthRecord("y", 1, true, 1, 10))
	b, err := os.ReadFile(dir + "/a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.IndexByte(b, '\n')
	damaged := slices.Concat(b[:i+1], []byte("this is not json\n"), b[i+1:])
	if err := os.WriteFile(dir+"/a.jsonl", damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	ix := newIndex(t, dir)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := ix.sources["a.jsonl"]
	if s == nil {
		t.Fatal("a.jsonl is not indexed")
	}
	want := "a.jsonl:2: " + schemas.NotJSONLine
	if p := s.problems(); len(p) != 1 || p[0] != want {
		t.Errorf("problems %q, want [%q]", p, want)
	}
}
