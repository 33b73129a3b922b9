package evaluation

import (
	"context"
	"errors"
	"testing"
	"time"

	"harness/graders"
	"harness/schemas"
)

// killedGrader answers as a grader process that died of a signal.
type killedGrader struct{ signal string }

func (g killedGrader) Name() string { return "exec:killed" }

func (g killedGrader) Grade(context.Context, *graders.Input) schemas.GraderResult {
	return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "grader was killed by " + g.signal, Signal: g.signal}}
}

// A grader killed by the SIGTERM that stops the whole of `harness grade`
// (it reaches the grader before harness) leaves its record out for the
// next run; the same death with no stop following is a grader error.
func TestRegradeGraderKilledByTheStop(t *testing.T) {
	rec := func() *schemas.CaptureRecord { return &schemas.CaptureRecord{ID: "a", Trial: 1} }
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, stop)
	_, graded, _, err := regradeRecord(ctx, rec(), RegradeOptions{Grader: killedGrader{"terminated"}}, "x:1")
	if !errors.Is(err, ErrInterrupted) || graded {
		t.Fatalf("killed by the stop: graded %v, err %v; want interrupted", graded, err)
	}
	res, graded, _, err := regradeRecord(context.Background(), rec(), RegradeOptions{Grader: killedGrader{"killed"}}, "x:1")
	if err != nil || !graded || res.Error == nil || res.Error.Signal != "killed" {
		t.Fatalf("SIGKILL without a stop: graded %v, err %v, result %+v; want a grader error", graded, err, res.Error)
	}
}

// combinedGrader answers as several graders, one of which died of a signal.
type combinedGrader struct{ killedGrader }

func (g combinedGrader) Grade(ctx context.Context, in *graders.Input) schemas.GraderResult {
	return graders.Combine([]schemas.GraderResult{{Grader: "ok", Pass: true, Score: 1}, g.killedGrader.Grade(ctx, in)})
}

// The stop reaches regrading through a combined result too.
func TestRegradeCombinedGraderKilledByTheStop(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, stop)
	_, graded, _, err := regradeRecord(ctx, &schemas.CaptureRecord{ID: "a", Trial: 1}, RegradeOptions{Grader: combinedGrader{killedGrader{"terminated"}}}, "x:1")
	if !errors.Is(err, ErrInterrupted) || graded {
		t.Fatalf("graded %v, err %v; want interrupted", graded, err)
	}
}
