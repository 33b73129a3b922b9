package main

import (
	"context"
	"errors"
	"os"

	"harness/cli"
	"harness/evaluation"
	"harness/results"
	"harness/runctl"
	"harness/schemas"
)

// options are the evaluation.Options of a run of capture or trials: k
// trials of every case; trialsOpts set for a run that writes trials
// records.
func (f *runFlags) options(e *cli.Env, setup *runSetup, k int, key *results.Key, trialsOpts *evaluation.TrialsOptions) evaluation.Options {
	return evaluation.Options{
		Config:       setup.cfg,
		Prompts:      setup.prompts(),
		K:            k,
		Shard:        setup.shard,
		Output:       f.output,
		Stdout:       e.Stdout,
		Resume:       f.resume,
		RetryErrors:  f.retryErrors,
		RerunChanged: f.rerunChanged,
		Force:        f.force,
		Key:          key,
		Redact:       setup.redact.JSON,
		GraderFiles:  cli.GraderFiles(setup.graders),
		Prices:       f.prices,
		AgentModel:   f.agentModel,
		Limits:       runctl.Limits{MaxUSD: f.maxCost, MaxTokens: f.maxTokens, StopOn: f.stopOn, SameGraderError: f.sameGraderErr, ConfigStop: configStop},
		Trials:       trialsOpts,
		JUnit:        f.junit,
		Markdown:     f.markdown,
	}
}

// configStop is how many units may fail for the agent's configuration
// (a missing binary, no key) before the run stops.
const configStop = 3

// evaluate runs k trials of every case through the evaluation engine,
// showing its progress on stderr, and turns its result into the exit
// status; gates, when set, checks the summary of a trials run.
func evaluate(ctx context.Context, e *cli.Env, f *runFlags, setup *runSetup, k int, trialsOpts *evaluation.TrialsOptions, gates func(schemas.TrialsSummary) error) (*evaluation.Result, string, error) {
	defer setup.cleanup()
	key, err := cli.RecordKey(e)
	if err != nil {
		return nil, statusError, err
	}
	opts := f.options(e, setup, k, key, trialsOpts)
	view := &runView{e: e, f: f, setup: setup}
	defer view.stop()
	if e.Signals != nil {
		kill := make(chan struct{})
		go func() {
			select {
			case <-e.Signals:
				view.printf("stopping now: turns and graders in flight are killed; units whose turns were complete are kept ungraded, --resume grades them\n")
				close(kill)
			case <-kill:
			}
		}()
		defer func() {
			select {
			case <-kill:
			default:
				close(kill)
			}
		}()
		opts.Config.Kill = kill
	}
	opts.Events = view
	if f.events != "" {
		w, err := os.Create(f.events)
		if err != nil {
			return nil, statusError, cli.Usagef("--events: %v", err)
		}
		defer w.Close()
		stream := evaluation.JSONEvents(w, setup.redact.JSON)
		opts.Events = evaluation.EventsFunc(func(ev evaluation.Event) {
			view.Event(ev)
			stream.Event(ev)
		})
	}
	res, err := evaluation.Run(ctx, opts)
	status, err := view.outcome(ctx, res, err, gates)
	return res, status, err
}

// The statuses of an agent's run in harness run's manifest.
const (
	statusOK          = "ok"
	statusGateFailed  = "gate_failed"
	statusInfraErrors = "infra_errors"
	statusBudget      = "budget"
	statusInterrupted = "interrupted"
	statusError       = "error"
)

// exitStatus names how a run that reports only its error (a Slurm job)
// ended, by the error's exit status.
func exitStatus(err error) string {
	if err == nil {
		return statusOK
	}
	var ee *cli.ExitError
	if !errors.As(err, &ee) {
		return statusError
	}
	switch ee.Code {
	case cli.ExitGateFailed:
		return statusGateFailed
	case cli.ExitInfraErrors:
		return statusInfraErrors
	case cli.ExitBudget:
		return statusBudget
	case cli.ExitInterrupted:
		return statusInterrupted
	}
	return statusError
}
