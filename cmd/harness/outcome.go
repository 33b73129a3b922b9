package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"harness/capture"
	"harness/cli"
	"harness/cost"
	"harness/evaluation"
	"harness/runctl"
	"harness/schemas"
	"harness/termprogress"
)

// runView shows a run on stderr (termprogress, with the lines that name
// the command's flags) and turns what it did into the command's status.
type runView struct {
	e     *cli.Env
	f     *runFlags
	setup *runSetup

	once    sync.Once
	term    *termprogress.View
	planned int // the units the run set out to run
}

// view is the terminal view of the run, made on first use.
func (v *runView) view() *termprogress.View {
	v.once.Do(func() {
		v.term = termprogress.New(v.e.Stderr, termprogress.Settings{
			Terminal: v.e.StderrTTY,
			Lines:    v.f.progress,
			Quiet:    v.f.quiet,
			Output:   v.f.output,
			Redact:   v.setup.redact,
			Notes:    runNotes{v},
		})
	})
	return v.term
}

// printf prints a message line, once the run has begun.
func (v *runView) printf(format string, a ...any) {
	v.view().Printf(format, a...)
}

// Event shows one event of the run.
func (v *runView) Event(ev evaluation.Event) {
	if p, ok := ev.(evaluation.Planned); ok {
		v.planned = p.Total
	}
	v.view().Event(ev)
}

// stop ends the status line.
func (v *runView) stop() {
	v.view().Stop()
}

// runNotes are the lines of a run's view that name the command's flags.
type runNotes struct{ v *runView }

// Adapter names a headless agent's adapter by its flag.
func (n runNotes) Adapter(name string) string { return "--adapter " + name }

// Resume names the flag that continues a run.
func (n runNotes) Resume() string { return "--resume" }

// Started warns of a budget that cannot count what it does not price.
func (n runNotes) Started(evaluation.Started) []string {
	if n.v.f.maxCost > 0 && len(n.v.f.prices) == 0 {
		if !n.v.f.noModelGateway {
			return []string{"warning: --max-cost without --prices counts the model calls at the built-in prices, and for an agent that makes none through the model gateway only the cost it reports itself"}
		}
		return []string{"warning: --max-cost without --prices counts only the cost agents report themselves"}
	}
	return nil
}

// Finished says what the run cost and warns of units that wrote in the
// working directory they share.
func (n runNotes) Finished(res *evaluation.Result) []string {
	var lines []string
	if res.Spent != nil {
		lines = append(lines, "cost: "+costLine(res.Spent, res.AgentReportedUSD, n.v.f.prices))
	}
	if len(n.v.f.prices) > 0 && res.Unpriced > 0 {
		lines = append(lines, noUsageLine(res.Unpriced, res.Priced))
	}
	if res.SharedWrites > 0 {
		lines = append(lines, fmt.Sprintf("warning: %s of %d wrote files in the working directory they share, %s (%s, ...): what one writes, the next sees; give --workspace DIR for a fresh copy per unit",
			cli.Plural(res.SharedWrites, "unit"), n.v.planned, n.v.setup.cfg.Cwd, res.SharedPath))
	}
	return lines
}

// noUsageLine says, once per run, that --prices priced nothing of the
// records whose agent reported no usage.
func noUsageLine(unpriced, priced int) string {
	which := "its " + cli.Plural(unpriced, "record")
	if priced > 0 {
		which = fmt.Sprintf("%d of its %d records", unpriced, unpriced+priced)
	}
	return fmt.Sprintf("note: the agent reported no usage (tokens or cost) for %s, so --prices gave them no cost: their cost and tokens are blank", which)
}

// outcome turns what a run did into its status and the command's error
// and exit status.
func (v *runView) outcome(ctx context.Context, res *evaluation.Result, err error, gates func(schemas.TrialsSummary) error) (string, error) {
	var ee *evaluation.Error
	if errors.As(err, &ee) {
		switch ee.Kind {
		case evaluation.KindOpen, evaluation.KindResume, evaluation.KindAgentStart:
			return v.startError(res, ee)
		case evaluation.KindWrite:
			err = cli.OutputError(ee.Err)
		case evaluation.KindForeign:
			// The budget and the stop rule are said first.
			if status, stop := v.stopError(res); stop != nil && !res.Interrupted {
				return status, stop
			}
			return statusError, cli.WithCode(cli.ExitForeign, ee.Err)
		}
	}
	if err == nil && !res.Interrupted {
		if status, stop := v.stopError(res); stop != nil {
			return status, stop
		}
	}
	switch {
	case err != nil:
		if res.Written > 0 && v.f.output != "" && v.f.output != "-" {
			err = fmt.Errorf("%w\nthe %d records written before it are in %s; continue with --resume", err, res.Written, v.f.output)
		}
		return statusError, err
	case res.Interrupted || ctx.Err() != nil:
		return statusInterrupted, cli.WithCode(cli.ExitInterrupted, fmt.Errorf("interrupted; finished records are in the output, continue with --resume"))
	}
	return finishedOutcome(res, gates)
}

// startError words an error of a run that did not start: its output
// could not be opened or continued, or its agent did not start.
func (v *runView) startError(res *evaluation.Result, ee *evaluation.Error) (string, error) {
	switch ee.Kind {
	case evaluation.KindOpen:
		return statusError, cli.OutputOpenError(ee.Err)
	case evaluation.KindResume:
		return statusError, resumeError(ee.Err)
	}
	if res.Interrupted {
		return statusInterrupted, cli.WithCode(cli.ExitInterrupted, errors.New("interrupted while the agent started; nothing ran"))
	}
	var ae *capture.AgentError
	if errors.As(ee.Err, &ae) {
		return statusError, cli.Input(errors.New(v.setup.redact.String(agentErrorText(&ae.Info))))
	}
	return statusError, cli.Input(v.setup.redactErr(ee.Err))
}

// finishedOutcome is the status of a run that ran to its end: the gates
// of its summary, then its infrastructure errors.
func finishedOutcome(res *evaluation.Result, gates func(schemas.TrialsSummary) error) (string, error) {
	if res.Summary != nil && gates != nil {
		if err := gates(*res.Summary); err != nil {
			return statusGateFailed, err
		}
	}
	if res.Stats == nil {
		return statusOK, nil
	}
	// The agent's own failures are its results, not the infrastructure's
	// errors, unless the run leaves them out of n.
	errs := res.Stats.InfraErrors()
	if res.Summary != nil && res.Summary.Policy != nil && slices.Contains(res.Summary.Policy.LeftOut, schemas.OwnerAgent) {
		errs += res.Stats.AgentFailures
	}
	if errs > 0 {
		return statusInfraErrors, cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("%d records are left out of n for errors not the agent's own (the infrastructure's, a grader's or the configuration's)", errs))
	}
	return statusOK, nil
}

// stopError says why the budget or the stop rule ended a run.
func (v *runView) stopError(res *evaluation.Result) (string, error) {
	stop := res.Stop
	switch {
	case stop == nil:
		return "", nil
	case stop.Kind == runctl.KindBudget:
		limit := limitText(stop.Limit)
		if v.f.budgetName != "" {
			limit = v.f.budgetName
		}
		return statusBudget, cli.WithCode(cli.ExitBudget, fmt.Errorf("budget spent (%s; %s): no new work was started, %s not run; the output holds every finished record, continue with --resume and a larger budget",
			cost.Format(res.Spent), limit, cli.Plural(res.NotRun(), "unit")))
	case stop.Kind == runctl.KindConfig:
		// Not exit 3: a run its configuration stopped measured nothing.
		return statusError, cli.WithCode(cli.ExitUsage, fmt.Errorf("stopped after %d units failed for the agent's configuration (the last: case %q trial %d: %s; %s); %s not run; fix the agent's command, key or login, then continue with --resume --retry-errors",
			stop.Limit.ConfigStop, stop.ID, max(stop.Trial, 1), stop.Error.Evidence, cli.FirstLine(stop.Error.Message), cli.Plural(res.NotRun(), "unit")))
	case stop.Kind == runctl.KindSameGraderError:
		return statusInfraErrors, cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("stopped: the first %s all had the same grader error, so the grader is broken rather than the agent: %s; %s not run; fix the grader, then grade the kept records with harness grade and continue with --resume (--stop-on-same-grader-error 0 runs on)",
			cli.Plural(stop.Limit.SameGraderError, "graded record"), stop.Error.Gist(), cli.Plural(res.NotRun(), "unit")))
	case stop.Kind == runctl.KindStopOn:
		return statusInfraErrors, cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("stopped at the first %s error (case %q trial %d): %s; %s not run; the output holds every finished record, continue with --resume",
			stop.Error.Class, stop.ID, max(stop.Trial, 1), stop.Error.Gist(), cli.Plural(res.NotRun(), "unit")))
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
	var cc *evaluation.ChangedCasesError
	switch {
	case errors.As(err, &cc):
		return cli.Input(fmt.Errorf("--resume: %w; to run them again, resume with --rerun-changed", err))
	case errors.As(err, &rm):
		switch {
		case rm.Want == nil:
			return cli.Input(fmt.Errorf("--resume: case %q was written by an adaptive run: resume with --adaptive and its --min-k, --max-k and --ci-width", rm.ID))
		case rm.Written == nil:
			return cli.Input(fmt.Errorf("--resume: case %q was written by a run without --adaptive: resume without --adaptive, or write a new output", rm.ID))
		}
		a := rm.Written
		return cli.Input(fmt.Errorf("--resume: case %q was written with --min-k %d --max-k %d --ci-width %g: resume with the same stopping rule", rm.ID, a.MinK, a.MaxK, a.CIWidth))
	case cli.ForeignError(err) != err:
		return cli.WithCode(cli.ExitForeign, fmt.Errorf("--resume: %w", err))
	}
	return cli.Input(fmt.Errorf("--resume: %w", err))
}
