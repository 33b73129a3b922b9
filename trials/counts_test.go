package trials

import (
	"testing"

	"harness/schemas"
)

// The counts of records, of the trials records built from them (through
// Summary) and of those records' entries read back are the same, with or
// without --fail-on.
func TestCountsOneSource(t *testing.T) {
	graded := func(trial int, pass bool) schemas.CaptureRecord {
		return schemas.CaptureRecord{ID: "a", Trial: trial, Score: &schemas.GraderResult{Pass: pass}}
	}
	recs := []schemas.CaptureRecord{
		graded(1, true),
		graded(2, false),
		// An agent error its grader graded anyway: left out of n.
		{ID: "a", Trial: 3, Error: &schemas.ErrorInfo{Class: schemas.ErrTimeout}, Score: &schemas.GraderResult{Pass: true}},
		{ID: "a", Trial: 4, Score: &schemas.GraderResult{Error: &schemas.ErrorInfo{Message: "exit 2"}}},
		{ID: "a", Trial: 5},
	}
	for _, tc := range []struct {
		name   string
		failOn map[string]bool
		want   Counts
		line   string
	}{
		{"plain", nil, Counts{Trials: 5, Graded: 2, Passed: 1, Ungraded: 1, Errors: map[string]int{schemas.ErrTimeout: 1, schemas.ErrGraderError: 1}},
			"5 records, 2 graded, 1 passed, errors: timeout 1, grader errors 1"},
		{"fail-on", map[string]bool{schemas.ErrTimeout: true}, Counts{Trials: 5, Graded: 3, Passed: 1, Ungraded: 1, Errors: map[string]int{schemas.ErrGraderError: 1}},
			"5 records, 3 graded, 1 passed, grader errors 1"},
	} {
		var byRecord Counts
		for i := range recs {
			byRecord.Add(&recs[i], tc.failOn)
		}
		tr := BuildRecordFailing(schemas.PromptCase{ID: "a"}, 5, recs, tc.failOn)
		s := NewSummary(5)
		s.Add(tr)
		var byEntry Counts
		for i := range tr.Trials {
			byEntry.AddEntry(&tr.Trials[i])
		}
		for name, got := range map[string]Counts{"records": byRecord, "summary": s.Counts(), "result": CountsOf(s.Result(1, 10)), "entries": byEntry} {
			if got.Line() != tc.line || got.Trials != tc.want.Trials || got.Graded != tc.want.Graded || got.Passed != tc.want.Passed ||
				got.Ungraded != tc.want.Ungraded || ClassCounts(got.Errors) != ClassCounts(tc.want.Errors) {
				t.Errorf("%s: %s counts %+v (%q), want %+v (%q)", tc.name, name, got, got.Line(), tc.want, tc.line)
			}
		}
	}
}

func TestCountsLineGraderClasses(t *testing.T) {
	c := Counts{Trials: 4, Graded: 1, Passed: 1, Errors: map[string]int{schemas.ErrGraderTimeout: 2, schemas.ErrAgentCrash: 1}}
	if got, want := c.Line(), "4 records, 1 graded, 1 passed, errors: agent_crash 1, grader errors 2 (grader_timeout 2)"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got, want := (Counts{Trials: 3}).Line(), "3 records"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}
