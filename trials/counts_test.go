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
		failOn Counting
		want   Counts
		line   string
	}{
		{"plain", Counting{}, Counts{Trials: 5, Graded: 2, Passed: 1, Ungraded: 1, Errors: map[string]int{schemas.ErrTimeout: 1, schemas.ErrGraderError: 1}},
			"5 records: pass 50.0% over 2 of 5 trials; 3 left out (grader_error: 1, timeout: 1, ungraded: 1)"},
		{"fail-on", NewCounting([]string{schemas.ErrTimeout}, nil), Counts{Trials: 5, Graded: 3, Passed: 1, Ungraded: 1, Errors: map[string]int{schemas.ErrGraderError: 1}},
			"5 records: pass 33.3% over 3 of 5 trials; 2 left out (grader_error: 1, ungraded: 1); failed by the agent: timeout 1"},
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
	if got, want := c.Line(), "4 records: pass 100.0% over 1 of 4 trials; 3 left out (agent_crash: 1, grader_timeout: 2)"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got, want := (Counts{Trials: 3}).Line(), "3 records"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}

// A failed trial counts by its owner: the agent's failures are in n (a
// trial its limit ended is graded as it stands), the others are left out
// and said by owner; the policy moves classes or owners either way, and
// a record without an owner (an older run) counts as it always did.
func TestCountsFollowOwners(t *testing.T) {
	fail := func(trial int, class, owner, limit string, score *schemas.GraderResult) schemas.CaptureRecord {
		return schemas.CaptureRecord{ID: "a", Trial: trial, Error: &schemas.ErrorInfo{Class: class, Owner: owner, Limit: limit}, Score: score,
			Provenance: schemas.Provenance{Graders: []string{"g"}}}
	}
	recs := []schemas.CaptureRecord{
		{ID: "a", Trial: 1, Score: &schemas.GraderResult{Pass: true, Score: 1}},
		fail(2, schemas.ErrAgentCrash, schemas.OwnerAgent, "", nil),
		fail(3, schemas.ErrTimeout, schemas.OwnerAgent, "timeout", &schemas.GraderResult{Pass: true, Score: 1}),
		fail(4, schemas.ErrTimeout, schemas.OwnerAgent, "timeout", &schemas.GraderResult{Pass: false}),
		fail(5, schemas.ErrAgentError, schemas.OwnerInfra, "", nil),
		{ID: "a", Trial: 6, Score: &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderTimeout, Owner: schemas.OwnerGrader}}},
		fail(7, schemas.ErrAgentCrash, "", "", nil), // an older run's record
	}
	recs[4].Attempts = []schemas.Attempt{{Attempt: 1}, {Attempt: 2}}
	// Without a grader a failure is in no n.
	ungraded := fail(8, schemas.ErrAgentCrash, schemas.OwnerAgent, "", nil)
	ungraded.Provenance.Graders = nil
	if _, excluded := Outcome(&ungraded); excluded != Ungraded {
		t.Errorf("a crash in a run without a grader: %q", excluded)
	}
	for _, tc := range []struct {
		name     string
		counting Counting
		line     string
	}{
		{"default", Counting{},
			"7 records: pass 50.0% over 4 of 7 trials; 3 left out (infra: 1, grader: 1, agent_crash: 1); failed by the agent: agent_crash 1, timeout 1; 2 failed attempts retried (1 trial)"},
		{"leave out agent", NewCounting(nil, []string{schemas.OwnerAgent}),
			"7 records: pass 100.0% over 1 of 7 trials; 6 left out (agent: 3, infra: 1, grader: 1, agent_crash: 1); 2 failed attempts retried (1 trial)"},
		{"fail on infra", NewCounting([]string{schemas.OwnerInfra, schemas.ErrAgentCrash}, nil),
			"7 records: pass 33.3% over 6 of 7 trials; 1 left out (grader: 1); failed by the agent: agent_crash 2, agent_error 1, timeout 1; 2 failed attempts retried (1 trial)"},
	} {
		var byRecord Counts
		for i := range recs {
			byRecord.Add(&recs[i], tc.counting)
		}
		tr := BuildRecordFailing(schemas.PromptCase{ID: "a"}, 7, recs, tc.counting)
		s := NewSummary(7)
		s.SetPolicy(tc.counting)
		s.Add(tr)
		var byEntry Counts
		for i := range tr.Trials {
			byEntry.AddEntry(&tr.Trials[i])
		}
		res := s.Result(1, 10)
		for name, got := range map[string]Counts{"records": byRecord, "summary": s.Counts(), "result": CountsOf(res), "entries": byEntry} {
			if got.Line() != tc.line {
				t.Errorf("%s: %s line\n%q, want\n%q", tc.name, name, got.Line(), tc.line)
			}
		}
		if res.Policy == nil || len(res.Policy.FailOn)+len(res.Policy.LeaveOut) != len(tc.counting.FailOn)+len(tc.counting.LeaveOut) {
			t.Errorf("%s: policy %+v", tc.name, res.Policy)
		}
	}
}

func TestCoverage(t *testing.T) {
	c := Counts{Trials: 98, Missing: 2, Graded: 94, LeftOut: map[string]int{schemas.OwnerInfra: 3, schemas.OwnerGrader: 1}}
	if got, want := c.Coverage(), "over 94 of 100 trials; 6 left out (infra: 3, grader: 1, missing: 2)"; got != want {
		t.Errorf("coverage %q, want %q", got, want)
	}
	if got := c.Covered(); got != 0.94 {
		t.Errorf("covered %v", got)
	}
}

// TestMeanScoreFollowsOwners: the mean score is over the trials in n, the
// agent's own failures counting 0 (or the score its grader gave with the
// verdict counted), and the trials record and the case counts agree.
func TestMeanScoreFollowsOwners(t *testing.T) {
	g := schemas.Provenance{Graders: []string{"g"}}
	fail := func(trial int, class, owner, limit string, score *schemas.GraderResult) schemas.CaptureRecord {
		return schemas.CaptureRecord{ID: "a", Trial: trial, Error: &schemas.ErrorInfo{Class: class, Owner: owner, Limit: limit}, Score: score, Provenance: g}
	}
	recs := []schemas.CaptureRecord{
		{ID: "a", Trial: 1, Score: &schemas.GraderResult{Pass: true, Score: 0.9}, Provenance: g},
		fail(2, schemas.ErrAgentCrash, schemas.OwnerAgent, "", nil),
		fail(3, schemas.ErrTimeout, schemas.OwnerAgent, "timeout", &schemas.GraderResult{Pass: false, Score: 0.3}),
		fail(4, schemas.ErrAgentCrash, schemas.OwnerInfra, "", nil),
	}
	tr := BuildRecord(schemas.PromptCase{ID: "a"}, 4, recs)
	const want = (0.9 + 0 + 0.3) / 3
	if tr.MeanScore == nil || *tr.MeanScore < want-1e-9 || *tr.MeanScore > want+1e-9 {
		t.Fatalf("trials record mean score %v, want %v (n %d)", tr.MeanScore, want, tr.N)
	}
	var cc CaseCount
	for i := range recs {
		cc.Add(&recs[i])
	}
	if m := cc.MeanScore(); m == nil || *m < want-1e-9 || *m > want+1e-9 {
		t.Errorf("case count mean score %v, want %v", m, want)
	}
	var fromEntries CaseCount
	for i := range tr.Trials {
		fromEntries.AddEntry(&tr.Trials[i])
	}
	if m := fromEntries.MeanScore(); m == nil || *m < want-1e-9 || *m > want+1e-9 {
		t.Errorf("mean score from the trials record's entries %v, want %v", m, want)
	}
}
