package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"harness/capture"
	"harness/cost"
	"harness/evaluation"
	"harness/results"
	"harness/runctl"
	"harness/schemas"
	"harness/trials"
)

// options are the evaluation.Options of a run of capture or trials: k
// trials of every case; trialsOpts set for a run that writes trials
// records.
func (f *runFlags) options(e *env, setup *runSetup, k int, key *results.Key, trialsOpts *evaluation.TrialsOptions) evaluation.Options {
	return evaluation.Options{
		Config:      setup.cfg,
		Prompts:     setup.prompts(),
		K:           k,
		Shard:       setup.shard,
		Output:      f.output,
		Stdout:      e.stdout,
		Resume:      f.resume,
		RetryErrors: f.retryErrors,
		Force:       f.force,
		Key:         key,
		Redact:      setup.redact.JSON,
		GraderFiles: graderFiles(setup.graders),
		Prices:      f.prices,
		AgentModel:  f.agentModel,
		Limits:      runctl.Limits{MaxUSD: f.maxCost, MaxTokens: f.maxTokens, StopOn: f.stopOn},
		Trials:      trialsOpts,
		JUnit:       f.junit,
		Markdown:    f.markdown,
	}
}

// evaluate runs k trials of every case through the evaluation engine,
// showing its progress on stderr, and turns its result into the exit
// status; gates, when set, checks the summary of a trials run.
func evaluate(ctx context.Context, e *env, f *runFlags, setup *runSetup, k int, trialsOpts *evaluation.TrialsOptions, gates func(schemas.TrialsSummary) error) (*evaluation.Result, string, error) {
	defer setup.cleanup()
	key, err := recordKey(e)
	if err != nil {
		return nil, statusError, err
	}
	opts := f.options(e, setup, k, key, trialsOpts)
	view := &runView{e: e, f: f, setup: setup}
	defer view.stop()
	if e.signals != nil {
		kill := make(chan struct{})
		go func() {
			select {
			case <-e.signals:
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
			return nil, statusError, usageErrorf("--events: %v", err)
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
	var ee *exitError
	if !errors.As(err, &ee) {
		return statusError
	}
	switch ee.code {
	case exitGateFailed:
		return statusGateFailed
	case exitInfraErrors:
		return statusInfraErrors
	case exitBudget:
		return statusBudget
	case exitInterrupted:
		return statusInterrupted
	}
	return statusError
}

// runView shows a run on stderr: the progress lines and status line, the
// agent that answered, the summary table, the counts and the cost.
type runView struct {
	mu     sync.Mutex // guards log, made on the first event
	e      *env
	f      *runFlags
	setup  *runSetup
	log    *progress
	total  int
	strays strayLog
}

// printf prints a message line, once the run has begun.
func (v *runView) printf(format string, a ...any) {
	v.mu.Lock()
	log := v.log
	v.mu.Unlock()
	if log != nil {
		log.printf(format, a...)
	}
}

// Event shows one event of the run.
func (v *runView) Event(ev evaluation.Event) {
	switch ev := ev.(type) {
	case evaluation.Planned:
		v.total = ev.Total
		v.mu.Lock()
		v.log = newProgress(v.e, v.f, ev.Total, v.setup.redact)
		v.mu.Unlock()
		if ev.Total == 0 {
			v.log.printf("nothing to run: all %s in %s\n", plural(ev.Done, "unit"), v.f.output)
		}
	case evaluation.Started:
		switch {
		case ev.Adapter != "":
			v.log.printf("agent %s, headless (--adapter %s); %s\n", ev.Agent.AgentInfo.Name, ev.Adapter, unitCount(ev))
		case ev.Agent != nil && ev.Agent.AgentInfo != nil:
			v.log.printf("agent %s %s (ACP %d); %s\n", ev.Agent.AgentInfo.Name, ev.Agent.AgentInfo.Version, ev.Agent.ProtocolVersion, unitCount(ev))
		}
		if v.f.maxCost > 0 && len(v.f.prices) == 0 {
			v.log.printf("warning: --max-cost without --prices counts only the cost agents report themselves\n")
		}
	case evaluation.UnitsAdded:
		v.log.grow(ev.N)
	case evaluation.Stopping:
		v.log.stopping(make(chan struct{}), ev.InFlight)
	case evaluation.RecordWritten:
		v.log.record(ev.Record)
	case evaluation.Stray:
		if !v.f.quiet {
			v.strays.add(v.e.stderr, v.setup, ev.Stray)
		}
	case evaluation.SummaryWritten:
		if !v.f.quiet {
			// The run's cost line follows, once, after the counts.
			table := ev.Summary
			table.Cost = nil
			trials.WriteSummaryTable(v.e.stderr, table)
			if ev.Path != "" {
				fmt.Fprintf(v.e.stderr, "summary: %s\n", ev.Path)
			}
		}
	case evaluation.Finished:
		v.finished(ev.Result)
	}
}

// unitCount says how many units a run starts with.
func unitCount(ev evaluation.Started) string {
	if ev.Adaptive {
		return plural(ev.Total, "unit") + " to start (more as the cases' intervals ask for them)"
	}
	return plural(ev.Total, "unit")
}

// finished prints the counts, the cost and the warning about units that
// wrote in the working directory they share.
func (v *runView) finished(res *evaluation.Result) {
	if res.Stats == nil {
		return // nothing ran
	}
	v.log.stop()
	v.log.summary(res.Counts)
	if res.Spent != nil {
		v.log.printf("cost: %s\n", costLine(res.Spent, res.AgentReportedUSD, v.f.prices))
	}
	if res.SharedWrites > 0 {
		v.log.printf("warning: %s of %d wrote files in the working directory they share, %s (%s, ...): what one writes, the next sees; give --workspace DIR for a fresh copy per unit\n",
			plural(res.SharedWrites, "unit"), v.total, v.setup.cfg.Cwd, res.SharedPath)
	}
}

func (v *runView) stop() {
	if v.log != nil {
		v.log.stop()
	}
	v.strays.finish(v.e.stderr)
}

// outcome turns what a run did into its status and the command's error
// and exit status.
func (v *runView) outcome(ctx context.Context, res *evaluation.Result, err error, gates func(schemas.TrialsSummary) error) (string, error) {
	var ee *evaluation.Error
	var foreign error
	if errors.As(err, &ee) {
		switch ee.Kind {
		case evaluation.KindOpen:
			return statusError, outputOpenError(ee.Err)
		case evaluation.KindResume:
			return statusError, resumeError(ee.Err)
		case evaluation.KindAgentStart:
			if res.Interrupted {
				return statusInterrupted, withCode(exitInterrupted, errors.New("interrupted while the agent started; nothing ran"))
			}
			var ae *capture.AgentError
			if errors.As(ee.Err, &ae) {
				return statusError, inputError(errors.New(v.setup.redact.String(agentErrorText(&ae.Info))))
			}
			return statusError, inputError(v.setup.redactErr(ee.Err))
		case evaluation.KindWrite:
			err = outputError(ee.Err)
		case evaluation.KindForeign:
			foreign, err = withCode(exitForeign, ee.Err), nil
		}
	}
	if err == nil && !res.Interrupted {
		if status, stop := runStopError(res); stop != nil {
			return status, stop
		}
	}
	switch {
	case foreign != nil:
		return statusError, foreign
	case err != nil:
		if res.Written > 0 && v.f.output != "" && v.f.output != "-" {
			err = fmt.Errorf("%w\nthe %d records written before it are in %s; continue with --resume", err, res.Written, v.f.output)
		}
		return statusError, err
	case res.Interrupted || ctx.Err() != nil:
		return statusInterrupted, withCode(exitInterrupted, fmt.Errorf("interrupted; finished records are in the output, continue with --resume"))
	}
	if res.Summary != nil && gates != nil {
		if err := gates(*res.Summary); err != nil {
			return statusGateFailed, err
		}
	}
	if res.Stats != nil && res.Stats.InfraErrors() > 0 {
		return statusInfraErrors, withCode(exitInfraErrors, fmt.Errorf("%d records have infrastructure errors", res.Stats.InfraErrors()))
	}
	return statusOK, nil
}

// runStopError says why the budget or the stop rule ended a run.
func runStopError(res *evaluation.Result) (string, error) {
	stop := res.Stop
	switch {
	case stop == nil:
		return "", nil
	case stop.Kind == runctl.KindBudget:
		return statusBudget, withCode(exitBudget, fmt.Errorf("budget spent (%s; %s): no new work was started, %s not run; the output holds every finished record, continue with --resume and a larger budget",
			cost.Format(res.Spent), limitText(stop.Limit), plural(res.NotRun(), "unit")))
	case stop.Kind == runctl.KindStopOn:
		return statusInfraErrors, withCode(exitInfraErrors, fmt.Errorf("stopped at the first %s error (case %q trial %d): %s; %s not run; the output holds every finished record, continue with --resume",
			stop.Error.Class, stop.ID, max(stop.Trial, 1), firstLine(stop.Error.Message), plural(res.NotRun(), "unit")))
	}
	return "", nil
}

// limitText names a limit as its flag does: "--max-cost 0.03",
// "--max-tokens 100", "--stop-on auth_required".
func limitText(l runctl.Limits) string {
	switch {
	case l.MaxUSD > 0:
		return fmt.Sprintf("--max-cost %g", l.MaxUSD)
	case l.MaxTokens > 0:
		return fmt.Sprintf("--max-tokens %d", l.MaxTokens)
	}
	return "--stop-on " + strings.Join(l.StopOn, ",")
}

// resumeError words an output that could not be continued.
func resumeError(err error) error {
	var rm *evaluation.RuleMismatchError
	switch {
	case errors.As(err, &rm):
		switch {
		case rm.Want == nil:
			return inputError(fmt.Errorf("--resume: case %q was written by an adaptive run: resume with --adaptive and its --min-k, --max-k and --ci-width", rm.ID))
		case rm.Written == nil:
			return inputError(fmt.Errorf("--resume: case %q was written by a run without --adaptive: resume without --adaptive, or write a new output", rm.ID))
		}
		a := rm.Written
		return inputError(fmt.Errorf("--resume: case %q was written with --min-k %d --max-k %d --ci-width %g: resume with the same stopping rule", rm.ID, a.MinK, a.MaxK, a.CIWidth))
	case foreignError(err) != err:
		return withCode(exitForeign, fmt.Errorf("--resume: %w", err))
	}
	return inputError(fmt.Errorf("--resume: %w", err))
}
