package harbor

import (
	"context"
	"fmt"

	"harness/image"
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
	switch agent {
	case Oracle:
		res.Want = 1
		step := o.Step
		step.NoNetwork = step.NoNetwork || !t.Config.AllowInternet
		ran, err := Solve(ctx, l, t, step)
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
	res.Verdict = Verify(ctx, l, t, o.Step)
	res.OK = res.Verdict.Error == nil && res.Verdict.Score == res.Want
	return res, nil
}
