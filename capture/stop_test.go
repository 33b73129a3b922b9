package capture

import (
	"context"
	"strings"
	"testing"
	"time"

	"harness/schemas"
)

func TestSettleStop(t *testing.T) {
	code := func(n int) *int { return &n }
	graderKilled := func(sig string) *schemas.CaptureRecord {
		return &schemas.CaptureRecord{ID: "a", Score: &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "grader was killed by " + sig, Signal: sig}}}
	}
	for _, tc := range []struct {
		name     string
		rec      *schemas.CaptureRecord
		stopping bool // the run is already stopping
		stopIn   time.Duration
		grading  bool // grading was stopped
		want     string
		wantMsg  string
	}{
		{name: "grader killed by SIGTERM, then the run stops", rec: graderKilled("terminated"), stopIn: 20 * time.Millisecond, want: schemas.ErrInterrupted, wantMsg: "a grader died of terminated"},
		{name: "grader killed by SIGTERM, no stop follows", rec: graderKilled("terminated"), want: ""},
		{name: "grader killed by SIGKILL while stopping", rec: graderKilled("killed"), stopping: true, want: schemas.ErrInterrupted},
		{name: "grader killed by SIGKILL, no stop", rec: graderKilled("killed"), want: ""},
		{name: "shell exit 143 then stop", rec: &schemas.CaptureRecord{Score: &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, ExitCode: code(143)}}}, stopIn: 10 * time.Millisecond, want: schemas.ErrInterrupted},
		{name: "agent crash by SIGHUP then stop", rec: &schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Signal: "hangup"}}, stopIn: 10 * time.Millisecond, want: schemas.ErrInterrupted, wantMsg: "the agent died of hangup"},
		{name: "workspace setup killed by SIGINT then stop", rec: &schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Signal: "interrupt"}}, stopIn: 10 * time.Millisecond, want: schemas.ErrInterrupted},
		{name: "resource cap while stopping", rec: &schemas.CaptureRecord{Error: &schemas.ErrorInfo{Class: schemas.ErrResourceLimit, Signal: "terminated"}}, stopping: true, want: schemas.ErrResourceLimit},
		{name: "second interrupt stops grading", rec: &schemas.CaptureRecord{Score: &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "judge: context canceled"}}}, grading: true, want: schemas.ErrInterrupted},
		{name: "a verdict is never touched", rec: &schemas.CaptureRecord{Score: &schemas.GraderResult{Pass: false}}, stopping: true, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRunner(Config{StopWait: 300 * time.Millisecond})
			run, stop := context.WithCancel(context.Background())
			defer stop()
			grading, stopGrading := context.WithCancel(context.Background())
			defer stopGrading()
			if tc.stopping {
				stop()
			}
			if tc.grading {
				stopGrading()
			}
			if tc.stopIn > 0 {
				time.AfterFunc(tc.stopIn, stop)
			}
			before := tc.rec.Error
			hadScore := tc.rec.Score
			r.settleStop(run, grading, tc.rec)
			got := ""
			if tc.rec.Error != nil {
				got = tc.rec.Error.Class
			}
			if got != tc.want && !(tc.want == "" && tc.rec.Error == before) {
				t.Fatalf("class %q, want %q (%+v)", got, tc.want, tc.rec.Error)
			}
			if tc.want == schemas.ErrInterrupted {
				if tc.rec.Score != nil || tc.rec.Scores != nil {
					t.Errorf("an interrupted record keeps its grade: %+v", tc.rec.Score)
				}
				if !strings.Contains(tc.rec.Error.Message, tc.wantMsg) {
					t.Errorf("message %q does not say %q", tc.rec.Error.Message, tc.wantMsg)
				}
			} else if tc.rec.Score != hadScore {
				t.Errorf("the grade was changed")
			}
		})
	}
}
