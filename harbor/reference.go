package harbor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"harness/image"
	"harness/sandbox/egress"
	"harness/schemas"
)

// Reference agents, as Harbor's CI runs them on every task.
const (
	// Oracle runs solution/solve.sh; the task must then score 1.
	Oracle = "oracle"
	// Nop does nothing; the task must then score 0.
	Nop = "nop"
)

// TrialOptions say where a trial's layer goes and how it runs.
type TrialOptions struct {
	// LayerDir is where layers are made ("" = the system temp dir).
	LayerDir string
	// Self is the command that runs image.Main (default: this binary).
	Self []string
	// Keep leaves the layer on disk.
	Keep bool
	// Step applies to the solution and the verifier.
	Step Step
	// Egress is the proxy set up as the solution's and the verifier's
	// way out when the task gives them an allowlist: each reaches its
	// phase's hosts through it (nil: such a phase gets loopback only).
	Egress *egress.Proxy
}

// ReferenceResult is one reference run of a task.
type ReferenceResult struct {
	Task  string
	Agent string
	// Solve is what solve.sh did (Oracle only).
	Solve *Ran
	// Verdict is the verifier's result.
	Verdict schemas.GraderResult
	// Want is the score the reference must reach (1 for Oracle, 0 for
	// Nop); OK says it did.
	Want float64
	OK   bool
	// Layer is the layer's directory when kept.
	Layer string
	// Steps are a multi-step task's steps as the reference played them;
	// Verdict is then their combined verdict.
	Steps []schemas.TaskStep
	// Network are the connections solve.sh and the verifier made through
	// the egress proxy, in the order they ended.
	Network []schemas.Connection
}

// phaseStep is the step of a reference run's phase, with its network:
// each connection goes on res.Network.
func (res *ReferenceResult) phaseStep(t *Task, o TrialOptions, phase string) Step {
	var mu sync.Mutex
	return t.PhaseStep(o.Step, phase, o.Egress, func(c egress.Connection) {
		mu.Lock()
		defer mu.Unlock()
		res.Network = append(res.Network, Connection(phase, c))
	})
}

// RunReference runs the task in a fresh layer over img with the oracle or
// the no-op agent, then its verifier.
func RunReference(ctx context.Context, t *Task, img *image.Image, agent string, o TrialOptions) (*ReferenceResult, error) {
	l, err := image.NewLayer(img, o.LayerDir)
	if err != nil {
		return nil, err
	}
	l.Self = o.Self
	res := &ReferenceResult{Task: t.Name, Agent: agent}
	if o.Keep {
		res.Layer = l.Dir
		defer l.Release()
	} else {
		defer l.Remove()
	}
	if hc := t.Config.Healthcheck; hc != nil {
		// The environment must be healthy before the reference agent
		// starts; when it never is, there is no verdict.
		if _, err := CheckHealth(ctx, l, t, hc, o.Step); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			res.Want = map[string]float64{Oracle: 1}[agent]
			res.Verdict = schemas.GraderResult{Grader: GraderName, Error: &schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: err.Error()}}
			var he *HealthError
			if errors.As(err, &he) {
				res.Verdict.Error.Stderr = he.Last.Output
			}
			return res, nil
		}
	}
	if t.MultiStep() {
		return res, runReferenceSteps(ctx, l, t, agent, o, res)
	}
	switch agent {
	case Oracle:
		res.Want = 1
		ran, err := Solve(ctx, l, t, res.phaseStep(t, o, PhaseSolution))
		if err != nil {
			return nil, err
		}
		res.Solve = &ran
		// solve.sh is the agent: its copy is gone before the verifier.
		if err := l.RemoveAll(SolutionPath); err != nil {
			return nil, err
		}
	case Nop:
		res.Want = 0
	default:
		return nil, fmt.Errorf("reference agent %q: want %s or %s", agent, Oracle, Nop)
	}
	res.Verdict = Verify(ctx, l, t, res.phaseStep(t, o, PhaseVerifier))
	res.OK = res.Verdict.Error == nil && res.Verdict.Score == res.Want
	return res, nil
}

// runReferenceSteps plays a multi-step task with a reference agent: each
// step set up, its solution run (the oracle; a step without one does
// nothing), its tests run; a step below its min_reward ends the run, as it
// ends a trial. The verdict is the steps' by the task's strategy.
func runReferenceSteps(ctx context.Context, l *image.Layer, t *Task, agent string, o TrialOptions, res *ReferenceResult) error {
	switch agent {
	case Oracle:
		res.Want = 1
	case Nop:
		res.Want = 0
	default:
		return fmt.Errorf("reference agent %q: want %s or %s", agent, Oracle, Nop)
	}
	for i, cfg := range t.Config.Steps {
		start := time.Now()
		ts := schemas.TaskStep{Name: cfg.Name, Turn: i + 1, MinReward: cfg.MinReward, ContributesToReward: cfg.Contributes,
			Timing: schemas.TaskStepTiming{Start: start.UnixMilli()}}
		_, err := SetupStep(ctx, l, t, i, res.phaseStep(t, o, PhaseSetup))
		ts.Timing.Setup = time.Since(start).Milliseconds()
		if err != nil {
			ts.Error = &schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: err.Error()}
			ts.EndedTrial = "its setup failed"
			res.Steps = append(res.Steps, ts)
			break
		}
		if agent == Oracle {
			agentStart := time.Now()
			ran, err := SolveStep(ctx, l, t, i, res.phaseStep(t, o, PhaseSolution))
			if err != nil {
				return err
			}
			ts.Timing.Agent = time.Since(agentStart).Milliseconds()
			if ran != nil {
				if res.Solve == nil {
					res.Solve = &Ran{}
				}
				res.Solve.Output += ran.Output
				res.Solve.Duration += ran.Duration
				res.Solve.TimedOut = res.Solve.TimedOut || ran.TimedOut
				if ran.ExitCode != 0 {
					res.Solve.ExitCode = ran.ExitCode
				}
			}
		}
		v := VerifyStep(ctx, l, t, i, res.phaseStep(t, o, PhaseVerifier))
		ts.Verdict = &v
		ts.Timing.Verifier = v.DurationMs
		if v.Error == nil {
			r := v.Score
			ts.Reward = &r
		}
		res.Steps = append(res.Steps, ts)
		if below, why := cfg.BelowMinReward(v); below && i < len(t.Config.Steps)-1 {
			res.Steps[len(res.Steps)-1].EndedTrial = fmt.Sprintf("step %s: %s", cfg.Name, why)
			break
		}
	}
	res.Verdict = t.StepsVerdict(res.Steps)
	if n := len(res.Steps); n > 0 && res.Steps[n-1].Error != nil && res.Verdict.Error == nil {
		// A setup that failed is no verdict.
		res.Verdict.Error = res.Steps[n-1].Error
	}
	res.OK = res.Verdict.Error == nil && res.Verdict.Score == res.Want
	return nil
}
