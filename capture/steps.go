package capture

import (
	"context"
	"fmt"
	"time"

	"harness/harbor"
	"harness/schemas"
)

// taskSteps plays a multi-step Harbor task ([[steps]]): each step is the
// next prompt of the unit's one session, in its one layer; before it the
// step's workdir/ is set up, after it the step's tests run. A step below
// its min_reward, or whose turn failed, ends the trial.
type taskSteps struct {
	w    *worker
	run  *caseRun
	task *harbor.Task
	// steps are the steps played so far, as they go on the record.
	steps []schemas.TaskStep
	// turnStart is when the current step's turn began.
	turnStart time.Time
}

// taskStepsOf returns the step player of a unit whose task has steps, else
// nil.
func (w *worker) taskStepsOf(run *caseRun) *taskSteps {
	if run.layer == nil || run.layer.task == nil || !run.layer.task.MultiStep() {
		return nil
	}
	st := &taskSteps{w: w, run: run, task: run.layer.task}
	run.taskSteps = st
	return st
}

// prompts are the unit's turns: one per step, the case's own input for
// the first ones when it has them (a prompts file naming the task), else
// the steps' instructions.
func (st *taskSteps) prompts(input []string) []string {
	out := st.task.Prompts()
	copy(out, input)
	return out
}

// scale is the run's timeout scale (--timeout-scale), 1 when unset.
func (st *taskSteps) scale() float64 {
	if s := st.w.r.cfg.Image.TimeoutScale; s > 0 {
		return s
	}
	return 1
}

// begin sets step i up and returns its turn's timeout; a setup that
// failed is the trial's error.
func (st *taskSteps) begin(ctx context.Context, i int) (time.Duration, *schemas.ErrorInfo) {
	cfg := st.task.Config.Steps[i]
	now := time.Now()
	ts := schemas.TaskStep{Name: cfg.Name, Turn: i + 1, MinReward: cfg.MinReward, ContributesToReward: cfg.Contributes,
		Timing: schemas.TaskStepTiming{Start: now.UnixMilli()}}
	timeout := time.Duration(float64(cfg.AgentTimeout) * st.scale())
	setup := st.task.PhaseStep(harbor.Step{Timeout: timeout}, harbor.PhaseSetup, st.w.r.cfg.Image.Egress, st.run.setupConn)
	_, err := harbor.SetupStep(ctx, st.run.layer.layer, st.task, i, setup)
	ts.Timing.Setup = time.Since(now).Milliseconds()
	st.steps = append(st.steps, ts)
	st.turnStart = time.Now()
	if err != nil {
		info := &schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: err.Error()}
		st.last().Error = info
		st.last().EndedTrial = "its setup failed"
		return 0, info
	}
	return timeout, nil
}

func (st *taskSteps) last() *schemas.TaskStep { return &st.steps[len(st.steps)-1] }

// end runs step i's tests after its turn (info is the turn's error) and
// says whether the trial goes on to the next step. A turn the run's stop
// cut short is not verified.
func (st *taskSteps) end(i int, info *schemas.ErrorInfo) bool {
	cfg := st.task.Config.Steps[i]
	ts := st.last()
	ts.Timing.Agent = time.Since(st.turnStart).Milliseconds()
	if info != nil {
		ts.Error = info
		ts.EndedTrial = "its turn ended with " + info.Class
		if info.Class == schemas.ErrInterrupted {
			return false
		}
	}
	var step harbor.Step
	step.Timeout = time.Duration(float64(cfg.VerifierTimeout) * st.scale())
	ctx := st.w.r.grading
	if ctx == nil {
		ctx = context.Background()
	}
	st.w.r.judging.Add(1)
	step = verifierStep(st.w.r.cfg.Image, st.task, step, st.run.verifierConn)
	res := harbor.VerifyStep(ctx, st.run.layer.layer, st.task, i, step)
	st.w.r.judging.Add(-1)
	ts.Verdict = &res
	ts.Timing.Verifier = res.DurationMs
	if res.Error == nil {
		r := res.Score
		ts.Reward = &r
	}
	if info != nil {
		return false
	}
	if below, why := cfg.BelowMinReward(res); below && i < len(st.task.Config.Steps)-1 {
		ts.EndedTrial = fmt.Sprintf("step %s: %s", cfg.Name, why)
		return false
	}
	return true
}

// verdict is the trial's verdict from its steps, by the task's strategy.
func (st *taskSteps) verdict() *schemas.GraderResult {
	res := st.task.StepsVerdict(st.steps)
	return &res
}
