package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
	"harness/trials"
)

// The fixtures in testdata/report were made by running the fake agent on
// testdata/report/prompts*.jsonl with testdata/report/grader.py (see
// testdata/report/README.md).
const fixtures = "../testdata/report"

func fixture(name string) string { return filepath.Join(fixtures, name) }

// readFixture reads a results file of testdata/report.
func readFixture(t testing.TB, name string, details bool) *Run {
	t.Helper()
	f, err := os.Open(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ReadRun(name, f, RunOptions{Details: details, TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("ReadRun %s: %v", name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// writeHTML writes the report of runs into dir and returns its path.
func writeHTML(t testing.TB, dir string, opt Options, runs ...*Run) string {
	t.Helper()
	path := filepath.Join(dir, "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, opt, runs...); err != nil {
		f.Close()
		t.Fatalf("WriteHTML: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// synthRecord is one synthetic capture record with a trajectory of steps
// steps (thoughts, messages, tool calls with input and output, a plan).
func synthRecord(id string, trial int, pass bool, steps int, errClass string) schemas.CaptureRecord {
	rec := schemas.CaptureRecord{
		ID: id, Trial: trial, Input: schemas.SingleTurn("fix the bug in " + id),
		Output:   "I changed the file and the tests pass.",
		Expected: "tests pass", StopReason: "end_turn",
		Metadata:   map[string]any{"category": fmt.Sprintf("cat-%d", len(id)%4)},
		Timing:     schemas.Timing{Start: 1_700_000_000_000 + int64(trial)*1000, End: 1_700_000_000_000 + int64(trial)*1000 + 1234, Total: 1234},
		Provenance: schemas.Provenance{Harness: "test", AgentName: "synth", AgentVersion: "1"},
	}
	for s := 1; s <= steps; s++ {
		st := schemas.Step{StepID: fmt.Sprintf("%s-t%d-s%d", id, trial, s), Timestamp: int64(s * 37), Turn: 1}
		switch s % 4 {
		case 0:
			st.Type = schemas.StepThought
			st.Content = mustJSON(strings.Repeat("thinking about the code ", 8))
		case 1:
			st.Type = schemas.StepToolCall
			st.ToolCallID = fmt.Sprintf("call-%d", s)
			st.Name, st.Kind, st.Status = "Read main.go", "read", "completed"
			st.Input = mustJSON(map[string]any{"path": "/repo/src/main.go", "line": s})
			st.Output = mustJSON(map[string]any{"content": strings.Repeat("package main // line\n", 12)})
			d := int64(12)
			st.Duration = &d
		case 2:
			st.Type = schemas.StepMessage
			st.Content = mustJSON("Looking at the file, the loop is off by one. ")
		case 3:
			st.Type = schemas.StepPlan
			st.Entries = mustJSON([]map[string]string{{"content": "read", "status": "completed", "priority": "high"}, {"content": "fix", "status": "in_progress", "priority": "high"}})
		}
		rec.Trajectory = append(rec.Trajectory, st)
	}
	switch {
	case errClass != "":
		rec.Error = &schemas.ErrorInfo{Class: errClass, Message: "the agent exited during turn 1", Stderr: "panic: boom"}
	default:
		reason := "the tests pass"
		if !pass {
			reason = "the tests still fail: expected 3, got 4"
		}
		score := 0.0
		if pass {
			score = 1
		}
		rec.Score = &schemas.GraderResult{Pass: pass, Score: score, Reasoning: reason, Grader: "exec:grade.py",
			Checks: []schemas.Check{{Text: "tests pass", Pass: pass, Reason: reason}}}
	}
	return rec
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// synthRun builds a trials run of cases cases with k trials each: case i
// passes every trial when i%5 is 0..2, is flaky when 3, and errors on
// every trial when 4 (and i%10 == 4) or fails (i%10 == 9).
func synthRun(t testing.TB, cases, k, steps int, details bool) *Run {
	t.Helper()
	run, err := NewRun("synth.jsonl", RunOptions{Details: details, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	for i := range cases {
		id := fmt.Sprintf("case-%05d", i)
		var recs []schemas.CaptureRecord
		for tr := 1; tr <= k; tr++ {
			pass, errClass := true, ""
			switch i % 10 {
			case 3, 8:
				pass = tr%2 == 1
			case 4:
				errClass = schemas.ErrAgentCrash
			case 9:
				pass = false
			}
			recs = append(recs, synthRecord(id, tr, pass, steps, errClass))
		}
		tr := trials.BuildRecord(schemas.PromptCase{ID: id, Input: recs[0].Input, Expected: "tests pass",
			Metadata: recs[0].Metadata}, k, recs)
		if err := run.AddTrials(&tr); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// extractIndex returns the parsed #report-index block of a page.
func extractIndex(t testing.TB, page []byte) index {
	t.Helper()
	start := []byte(`<script type="application/json" id="report-index">`)
	i := bytes.Index(page, start)
	if i < 0 {
		t.Fatal("no report-index block")
	}
	rest := page[i+len(start):]
	j := bytes.Index(rest, []byte("</script>"))
	if j < 0 {
		t.Fatal("report-index block not closed")
	}
	var ix index
	if err := json.Unmarshal(rest[:j], &ix); err != nil {
		t.Fatalf("report-index is not JSON: %v", err)
	}
	return ix
}
