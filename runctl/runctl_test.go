package runctl

import (
	"slices"
	"testing"

	"harness/schemas"
)

// tokens prices a record at one dollar per thousand tokens of usage.
func tokens(rec *schemas.CaptureRecord) *schemas.Cost {
	if rec.Usage == nil || rec.Usage.InputTokens == nil {
		return nil
	}
	n := *rec.Usage.InputTokens
	usd := float64(n) / 1000
	return &schemas.Cost{InputTokens: n, USD: &usd}
}

func rec(id string, trial int, n int64) *schemas.CaptureRecord {
	r := &schemas.CaptureRecord{ID: id, Trial: trial}
	if n > 0 {
		r.Usage = &schemas.Usage{InputTokens: &n}
		r.Cost = tokens(r)
	}
	return r
}

func stopped(c *Controller) bool {
	select {
	case <-c.Stopped():
		return true
	default:
		return false
	}
}

func TestBudgetStopsWhenATurnAnswers(t *testing.T) {
	c := New(Limits{MaxUSD: 0.03}, tokens)
	c.Answered(rec("a", 1, 20))
	if stopped(c) {
		t.Fatal("stopped at $0.02 of $0.03")
	}
	// Before a's record is in, b's answer brings the run to $0.04.
	c.Answered(rec("b", 1, 20))
	if !stopped(c) {
		t.Fatal("not stopped at $0.04 of $0.03")
	}
	s := c.Stop()
	if s.Kind != KindBudget || s.Limit.MaxUSD != 0.03 || s.Limit.MaxTokens != 0 || s.Spent.USD == nil || *s.Spent.USD < 0.04-1e-9 {
		t.Fatalf("stop = %+v", s)
	}
}

func TestRecordReplacesItsTurnsCost(t *testing.T) {
	c := New(Limits{MaxTokens: 50}, tokens)
	c.Answered(rec("a", 1, 10))
	c.Answered(rec("a", 1, 30)) // the second turn: usage so far
	if got := c.Spent().Tokens(); got != 30 {
		t.Fatalf("spent %d tokens, want 30 (a unit counts once)", got)
	}
	c.Record(rec("a", 1, 35)) // late usage
	if got := c.Spent().Tokens(); got != 35 {
		t.Fatalf("spent %d tokens, want 35", got)
	}
	if stopped(c) {
		t.Fatal("stopped under the budget")
	}
	c.Record(rec("b", 1, 15))
	if !stopped(c) || c.Stop().Limit.MaxTokens != 50 {
		t.Fatalf("not stopped at 50 tokens: %+v", c.Stop())
	}
}

func TestStopOnClass(t *testing.T) {
	c := New(Limits{StopOn: []string{schemas.ErrAuthRequired}}, tokens)
	r := rec("a", 2, 0)
	r.Error = &schemas.ErrorInfo{Class: schemas.ErrAgentError}
	c.Answered(r)
	if stopped(c) {
		t.Fatal("stopped on agent_error")
	}
	r = rec("b", 1, 0)
	r.Error = &schemas.ErrorInfo{Class: schemas.ErrAuthRequired, Message: "login"}
	c.Record(r) // a setup failure: no turn ever answered
	s := c.Stop()
	if !stopped(c) || s.Kind != KindStopOn || s.ID != "b" || s.Trial != 1 || !slices.Equal(s.Limit.StopOn, []string{"auth_required"}) {
		t.Fatalf("stop = %+v", s)
	}
	// The first stop stays.
	r = rec("c", 1, 0)
	r.Error = &schemas.ErrorInfo{Class: schemas.ErrAuthRequired}
	c.Answered(r)
	if c.Stop().ID != "b" {
		t.Fatalf("stop moved to %q", c.Stop().ID)
	}
}

// A grader's error class stops the run when the record is graded.
func TestStopOnGraderClass(t *testing.T) {
	for _, class := range []string{schemas.ErrGraderError, schemas.ErrGraderTimeout, schemas.ErrGraderInvalid} {
		c := New(Limits{StopOn: []string{class}}, tokens)
		ok := rec("a", 1, 0)
		ok.Score = &schemas.GraderResult{Pass: false}
		c.Record(ok)
		if stopped(c) {
			t.Fatalf("--stop-on %s: a failing verdict stopped the run", class)
		}
		r := rec("b", 2, 0)
		r.Score = &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: class, Message: "grader broke"}}
		c.Record(r)
		s := c.Stop()
		if !stopped(c) || s.Kind != KindStopOn || s.ID != "b" || s.Trial != 2 || !slices.Equal(s.Limit.StopOn, []string{class}) || s.Error.Message != "grader broke" {
			t.Fatalf("--stop-on %s: stop = %+v", class, s)
		}
	}
	// A grader error without a class is a grader_error.
	c := New(Limits{StopOn: []string{" " + schemas.ErrGraderError}}, tokens)
	r := rec("a", 1, 0)
	r.Score = &schemas.GraderResult{Error: &schemas.ErrorInfo{Message: "exit status 2"}}
	c.Record(r)
	if s := c.Stop(); s == nil || s.Error.Class != schemas.ErrGraderError {
		t.Fatalf("stop = %+v, want one on grader_error", s)
	}
}

func TestInterruptedRecordsStopNothing(t *testing.T) {
	c := New(Limits{StopOn: []string{schemas.ErrInterrupted}}, tokens)
	r := rec("a", 1, 0)
	r.Error = &schemas.ErrorInfo{Class: schemas.ErrInterrupted}
	c.Record(r)
	if stopped(c) {
		t.Fatal("an interrupted record stopped the run")
	}
}

func TestResetForgetsOnlyABudget(t *testing.T) {
	c := New(Limits{MaxTokens: 10}, tokens)
	c.Record(rec("a", 1, 10))
	if c.Stop() == nil {
		t.Fatal("no stop")
	}
	c.Reset()
	if c.Stop() != nil {
		t.Fatal("budget stop not reset")
	}
	c = New(Limits{StopOn: []string{schemas.ErrTimeout}}, tokens)
	r := rec("a", 1, 0)
	r.Error = &schemas.ErrorInfo{Class: schemas.ErrTimeout}
	c.Record(r)
	c.Reset()
	if c.Stop() == nil {
		t.Fatal("stop-on stop reset")
	}
}

func TestNoLimitsNeverStop(t *testing.T) {
	c := New(Limits{}, tokens)
	for i := range 100 {
		c.Answered(rec("a", i, 1000))
		c.Record(rec("a", i, 1000))
	}
	if stopped(c) {
		t.Fatal("stopped without limits")
	}
}

// The run stops when its first N graded records all had the same grader
// error, and not when one differs, passes, or was not graded.
func TestSameGraderError(t *testing.T) {
	broken := func(id, msg string) *schemas.CaptureRecord {
		r := rec(id, 1, 0)
		r.Score = &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: msg}}
		return r
	}
	c := New(Limits{SameGraderError: 3}, tokens)
	ungraded := rec("u", 1, 0)
	agentErr := broken("e", "boom")
	agentErr.Error = &schemas.ErrorInfo{Class: schemas.ErrAgentError, Message: "crash"}
	for _, r := range []*schemas.CaptureRecord{broken("a", "boom"), ungraded, agentErr, broken("b", "boom")} {
		c.Record(r)
	}
	if stopped(c) {
		t.Fatal("stopped after two graded records")
	}
	c.Record(broken("c", "boom"))
	s := c.Stop()
	if s == nil || s.Kind != KindSameGraderError || s.ID != "c" || s.Error.Message != "boom" || s.Limit.SameGraderError != 3 {
		t.Fatalf("stop = %+v", s)
	}
	for _, seq := range [][]*schemas.CaptureRecord{
		{broken("a", "boom"), broken("b", "bang"), broken("c", "boom")},
		{broken("a", "boom"), rec("b", 1, 0), broken("c", "boom"), broken("d", "boom")},
	} {
		c := New(Limits{SameGraderError: 3}, tokens)
		for _, r := range seq {
			if r.Score == nil {
				r.Score = &schemas.GraderResult{Pass: true, Score: 1}
			}
			c.Record(r)
		}
		if stopped(c) {
			t.Errorf("stopped: %+v", c.Stop())
		}
	}
}

// TestGradedDecidesOnFirstGrading: a grading that failed is judged as it
// answers, before the grader is tried again; the record that follows is
// not counted a second time.
func TestGradedDecidesOnFirstGrading(t *testing.T) {
	broken := func(id string) *schemas.CaptureRecord {
		r := rec(id, 1, 0)
		r.Score = &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderTimeout, Message: "slow"}}
		return r
	}
	c := New(Limits{StopOn: []string{schemas.ErrGraderTimeout}}, tokens)
	c.Graded(broken("a"))
	if s := c.Stop(); s == nil || s.Kind != KindStopOn || s.ID != "a" {
		t.Fatalf("stop-on at the first failed grading: %+v", s)
	}
	c = New(Limits{SameGraderError: 2}, tokens)
	a := broken("a")
	c.Graded(a)
	// Graded again, it passed: its record is in, counted once.
	a.Score = &schemas.GraderResult{Pass: true, Score: 1}
	c.Record(a)
	if stopped(c) {
		t.Fatal("stopped after one graded unit")
	}
	c.Graded(broken("b"))
	if s := c.Stop(); s == nil || s.Kind != KindSameGraderError || s.ID != "b" {
		t.Fatalf("same grader error after two first gradings: %+v", s)
	}
}

func TestBudgetStopsWhenACallEnds(t *testing.T) {
	c := New(Limits{MaxUSD: 0.03}, tokens)
	c.Record(rec("a", 1, 10))
	c.Called(rec("b", 1, 10))
	if stopped(c) {
		t.Fatal("stopped at $0.02 of $0.03")
	}
	// b's next call brings the run to $0.03, before its turn answers.
	c.Called(rec("b", 1, 20))
	if !stopped(c) {
		t.Fatalf("not stopped at $%v of $0.03", *c.Spent().USD)
	}
	if s := c.Stop(); s.Kind != KindBudget || s.Limit.MaxUSD != 0.03 || *s.Spent.USD < 0.03-1e-9 {
		t.Fatalf("stop = %+v", s)
	}
}

func TestCalledKeepsTheUnitsLatestSpending(t *testing.T) {
	c := New(Limits{MaxTokens: 100}, tokens)
	c.Called(rec("a", 1, 30))
	// An earlier call's report arriving late takes nothing back.
	c.Called(rec("a", 1, 20))
	if got := c.Spent().Tokens(); got != 30 {
		t.Fatalf("spent %d tokens, want 30", got)
	}
	// Once the record is in, a late call's report is not counted again.
	c.Record(rec("a", 1, 40))
	c.Called(rec("a", 1, 40))
	if got := c.Spent().Tokens(); got != 40 {
		t.Fatalf("spent %d tokens after the record, want 40 (a unit counts once)", got)
	}
}

func TestCalledDecidesOnlyTheBudget(t *testing.T) {
	c := New(Limits{StopOn: []string{schemas.ErrAgentError}}, tokens)
	r := rec("a", 1, 10)
	r.Error = &schemas.ErrorInfo{Class: schemas.ErrAgentError}
	c.Called(r)
	if stopped(c) {
		t.Fatal("a call's report stopped the run on an error class")
	}
}
