package taskset

import (
	"context"
	"fmt"
	"strings"
	"time"

	"harness/harbor"
	"harness/image"
	"harness/schemas"
)

// StopWait is how long a reference run whose verifier died of a stop
// signal waits, by default, for the stop such a signal announces (as
// capture's StopWait).
const StopWait = 2 * time.Second

// Runner runs a task once with a reference agent (harbor.Oracle or
// harbor.Nop) in a fresh layer over img, then its verifier, as
// harbor.RunReference does.
type Runner func(ctx context.Context, t *harbor.Task, img *image.Image, agent string, o harbor.TrialOptions) (*harbor.ReferenceResult, error)

// ValidateOptions say how the reference runs run and where their outcomes
// go.
type ValidateOptions struct {
	// Images are the tasks' images, by task name (ResolveImages).
	Images map[string]*image.Image
	// Trial says where each run's layer goes and whether it is kept.
	Trial harbor.TrialOptions
	// Run runs one reference run (nil: harbor.RunReference).
	Run Runner
	// StopWait is how long a run whose verifier died of a stop signal
	// waits for the stop (0: StopWait).
	StopWait time.Duration
	// Each is told of every run's outcome as it ends, in order: task by
	// task, the oracle first. An error from it ends the validation.
	Each func(Outcome) error
}

// Outcome is one reference run and what it says.
type Outcome struct {
	Task  *harbor.Task
	Agent string
	// Ref is the run's result; a run stopped before it ended has only
	// its task and agent, and its verdict is the stop.
	Ref *harbor.ReferenceResult
	// Result is the validation result line of the run.
	Result schemas.ValidationResult
	// Stopped says why the run is no verdict (it was stopped), or "".
	Stopped string
}

// Label names the run: "task (agent)".
func (o Outcome) Label() string { return o.Task.Name + " (" + o.Agent + ")" }

// GraderError says the verifier failed to grade the run.
func (o Outcome) GraderError() bool { return o.Stopped == "" && o.Ref.Verdict.Error != nil }

// Misjudged says the verifier graded the run, and wrongly: the oracle did
// not score 1 or the no-op agent did not score 0.
func (o Outcome) Misjudged() bool {
	return o.Stopped == "" && o.Ref.Verdict.Error == nil && !o.Ref.OK
}

// SolveFailed says the oracle's solve.sh failed (it timed out or exited
// non-zero) in a run that was not correct: the likely reason.
func (o Outcome) SolveFailed() bool {
	r := o.Ref.Solve
	return r != nil && !o.Ref.OK && (r.TimedOut || r.ExitCode != 0)
}

// Tally counts the outcomes of a validation.
type Tally struct {
	// Runs is the number of runs planned: two a task.
	Runs int
	// Checked counts the runs that ended with a verdict (not stopped).
	Checked int
	// Misjudged and GraderErrors are the labels of the runs that were
	// misjudged or not graded.
	Misjudged, GraderErrors []string
}

// Correct counts the checked runs the verifier judged right.
func (t Tally) Correct() int { return t.Checked - len(t.Misjudged) - len(t.GraderErrors) }

// Validate runs each task with the oracle (solution/solve.sh: it must
// score 1) and with an agent that does nothing (it must score 0), as
// Harbor's CI does, and tells o.Each of each run. Once ctx ends no run
// starts, and a run it stopped is no verdict; the tally then counts the
// runs that ended before. A run that could not be made is an error naming
// the task and the agent.
func (s *Set) Validate(ctx context.Context, o ValidateOptions) (Tally, error) {
	run, wait := o.Run, o.StopWait
	if run == nil {
		run = harbor.RunReference
	}
	if wait == 0 {
		wait = StopWait
	}
	tally := Tally{Runs: 2 * len(s.Tasks)}
	for _, t := range s.Tasks {
		for _, agent := range []string{harbor.Oracle, harbor.Nop} {
			if ctx.Err() != nil {
				return tally, nil
			}
			res, err := run(ctx, t, o.Images[t.Name], agent, o.Trial)
			if err != nil && ctx.Err() == nil {
				return tally, fmt.Errorf("task %s, %s: %w", t.Name, agent, err)
			}
			out := outcome(ctx, t, agent, res, err, wait)
			tally.add(out)
			if o.Each != nil {
				if err := o.Each(out); err != nil {
					return tally, err
				}
			}
		}
	}
	return tally, nil
}

// add counts an outcome.
func (t *Tally) add(o Outcome) {
	if o.Stopped != "" {
		return
	}
	t.Checked++
	switch {
	case o.GraderError():
		t.GraderErrors = append(t.GraderErrors, o.Label())
	case o.Misjudged():
		t.Misjudged = append(t.Misjudged, o.Label())
	}
}

// outcome judges one reference run: res and err are what the runner
// returned, err only once ctx has ended.
func outcome(ctx context.Context, t *harbor.Task, agent string, res *harbor.ReferenceResult, err error, wait time.Duration) Outcome {
	var stopped string
	if err != nil {
		res, stopped = &harbor.ReferenceResult{Task: t.Name, Agent: agent}, "the run was stopped"
	} else {
		stopped = Stopped(ctx, res.Verdict.Error, wait)
	}
	if stopped != "" {
		// Not a verdict: the run was stopped under the verifier.
		res.Verdict = schemas.GraderResult{Grader: harbor.GraderName, Error: &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted: " + stopped}}
		res.OK = false
	}
	v := schemas.ValidationResult{ID: t.Name, Passes: res.Verdict.Pass, GraderResult: res.Verdict, Correct: res.OK, Network: res.Network}
	if agent == harbor.Oracle {
		v.Kind, v.Want, v.Reference = schemas.RefPositive, "pass", "solution/solve.sh"
		if r := res.Solve; r != nil {
			v.Solve = &schemas.SolveRun{ExitCode: r.ExitCode, TimedOut: r.TimedOut, DurationMs: r.Duration.Milliseconds(), Output: r.Output}
		}
	} else {
		v.Kind, v.Want = schemas.RefNegative, "fail"
	}
	return Outcome{Task: t, Agent: agent, Ref: res, Result: v, Stopped: stopped}
}

// Stopped applies capture's stop rule to a reference run whose verifier
// failed with verr: a verifier error once the run is stopping (ctx ended),
// or a verifier that died of SIGTERM, SIGINT or SIGHUP followed by the
// run's stop within wait, is no verdict. It says why, or "" when the error
// is the verifier's own (or there is none).
func Stopped(ctx context.Context, verr *schemas.ErrorInfo, wait time.Duration) string {
	if verr == nil {
		return ""
	}
	sig, died := verr.DiedOfStop()
	if died && ctx.Err() == nil {
		// The signal may be the stop itself, reaching the verifier first.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() == nil {
		return ""
	}
	if died {
		return fmt.Sprintf("the verifier died of %s as the run was stopped", sig)
	}
	line, _, _ := strings.Cut(verr.Message, "\n")
	return "the run was stopping when the verifier failed (" + line + ")"
}
