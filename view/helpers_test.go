package view

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// The fixtures of testdata/report are real output of the fake agent
// graded by a Python grader (see testdata/report/README.md).
const fixtures = "../testdata/report"

// copyFixture copies a file of testdata/report into dir.
func copyFixture(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// synthRecord is a capture record with a trajectory of steps steps, each
// carrying about stepBytes of text.
func synthRecord(id string, trial int, pass bool, steps, stepBytes int) schemas.CaptureRecord {
	rec := schemas.CaptureRecord{
		ID: id, Trial: trial, Input: schemas.SingleTurn("fix the bug in " + id),
		Output:     fmt.Sprintf("I changed %s and the tests pass (trial %d).", id, trial),
		Expected:   "tests pass",
		StopReason: "end_turn",
		Metadata:   map[string]any{"category": fmt.Sprintf("cat-%d", len(id)%3), "difficulty": []string{"easy", "hard"}[trial%2]},
		Timing:     schemas.Timing{Start: 1_700_000_000_000 + int64(trial)*1000, End: 1_700_000_000_000 + int64(trial)*1000 + 1000 + int64(len(id)*trial), Total: 1000 + int64(len(id)*trial)},
		Provenance: schemas.Provenance{Harness: "test", AgentName: "synth", AgentVersion: "1"},
	}
	usd := 0.001 * float64(trial)
	rec.Cost = &schemas.Cost{InputTokens: int64(100 * trial), OutputTokens: 50, USD: &usd}
	text := strings.Repeat("x", max(stepBytes-120, 1))
	for s := 1; s <= steps; s++ {
		st := schemas.Step{StepID: fmt.Sprintf("%s-t%d-s%d", id, trial, s), Timestamp: int64(s), Turn: 1}
		switch s % 4 {
		case 0:
			st.Type = schemas.StepThought
			st.Content = mustJSON("thinking " + text)
		case 1:
			st.Type = schemas.StepToolCall
			st.ToolCallID = fmt.Sprintf("call-%d", s)
			st.Name, st.Kind, st.Status = "Read main.go", "read", "completed"
			st.Input = mustJSON(map[string]any{"path": "main.go", "line": s})
			st.Output = mustJSON(map[string]any{"content": text})
		case 2:
			st.Type = schemas.StepMessage
			st.Content = mustJSON(fmt.Sprintf("step %d: %s", s, text))
		case 3:
			st.Type = schemas.StepTerminal
			st.Method, st.Command, st.Text = "terminal/output", "go", "ok "+text
		}
		rec.Trajectory = append(rec.Trajectory, st)
	}
	score := 0.0
	if pass {
		score = 1
	}
	rec.Score = &schemas.GraderResult{Pass: pass, Score: score, Grader: "tests", Reasoning: "1 of 2 tests passed",
		Checks: []schemas.Check{{Text: "TestAdd", Pass: pass}, {Text: "TestAddZero", Pass: true}}}
	if !pass {
		rec.Score.Reasoning = "1 of 2 tests passed"
		rec.Score.Checks[0].Evidence = "=== RUN   TestAdd\n    calc_test.go:8: Add(2, 2) = 0, want 4\n--- FAIL: TestAdd (0.00s)"
	} else {
		rec.Score.Reasoning = "2 of 2 tests passed"
	}
	return rec
}

// writeRecords writes capture records to a new results file.
func writeRecords(t testing.TB, path string, recs ...schemas.CaptureRecord) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	appendRecords(t, f, recs...)
}

func appendRecords(t testing.TB, w io.Writer, recs ...schemas.CaptureRecord) {
	t.Helper()
	for _, r := range recs {
		b, err := results.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

// trialsLine is the trials record of a case's capture records.
func trialsLine(t testing.TB, recs []schemas.CaptureRecord) []byte {
	t.Helper()
	tr := trials.BuildRecord(schemas.PromptCase{ID: recs[0].ID, Input: recs[0].Input, Expected: recs[0].Expected, Metadata: recs[0].Metadata}, len(recs), recs)
	b, err := results.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// newIndex indexes roots and scans them once.
func newIndex(t testing.TB, roots ...string) *Index {
	t.Helper()
	ix, err := New(Options{Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	ix.Scan()
	return ix
}

// serve starts the viewer over ix on a loopback test server.
func serve(t testing.TB, ix *Index, opt ServerOptions) *httptest.Server {
	t.Helper()
	opt.Loopback = true
	if opt.Resamples == 0 {
		opt.Resamples = 200
	}
	ts := httptest.NewServer(NewServer(ix, opt))
	t.Cleanup(ts.Close)
	return ts
}

// getJSON fetches an API path and decodes it.
func getJSON(t testing.TB, ts *httptest.Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", path, err, b)
		}
	}
	return resp.StatusCode
}
