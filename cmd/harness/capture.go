package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"harness/capture"
	"harness/cost"
	"harness/report"
	"harness/results"
	"harness/runctl"
	"harness/schemas"
	"harness/trials"
)

func newCaptureCmd() *command {
	var f runFlags
	c := &command{
		name:  "capture",
		usage: "capture PROMPTS [flags] -- AGENT [ARGS...]",
		short: "run each prompt case once against an ACP agent and record its trajectory (JSONL)",
		long: `capture starts the agent command, initializes it (ACP v1), and runs every
case of the prompts file (JSONL: id, input, expected, hint, metadata, timeout,
workspace) in a fresh session. An input array runs several turns in one
session. Each case yields one record on the output with the merged
messages and thoughts, tool calls with their final status and output, plans,
permission decisions, fs and terminal requests, timing, stopReason and any
error, written whole as soon as the case is done.

Examples:
  harness capture prompts.jsonl -- node agent.js
  harness capture prompts.jsonl -o out.jsonl.zst -j 4 -t 2m -- npx @google/gemini-cli --acp
  harness capture prompts.jsonl --workspace repo/ --fs --terminal -g check.py -o out.jsonl -- ./my-agent
  harness capture prompts.jsonl -o out.jsonl --resume -- ./my-agent   # continue an interrupted run`,
		agent: true,
		flags: pflag.NewFlagSet("capture", pflag.ContinueOnError),
	}
	f.addFlags(c.flags)
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if err := f.checkSlurm(args); err != nil {
			return err
		}
		setup, err := f.prepare(e, args, agent, "capture")
		if err != nil {
			return err
		}
		if f.slurm.tasks > 0 {
			setup.cleanup()
			return runSlurm(ctx, &slurmRun{e: e, c: c, f: &f, cmdName: "capture", k: 1, agent: agent}, args)
		}
		return runUnits(ctx, e, &f, setup, 1, runHooks{})
	}
	return c
}

// runHooks let trials change how runUnits treats records.
type runHooks struct {
	// resume reads the units not to run from the output with --resume;
	// nil takes the capture records it holds.
	resume func(out *results.Output) (map[results.UnitKey]bool, error)
	// onCase sees every case as the run reaches it, in file order.
	onCase func(*schemas.PromptCase)
	// collect takes each finished record instead of writing it.
	collect func(*schemas.CaptureRecord, *results.Output) error
	// finish runs after the last record, before the output is closed;
	// interrupted says the run did not run every unit, budget that a
	// budget stopped it.
	finish func(out *results.Output, stats *capture.Stats, interrupted, budget bool) error
	// units, when set, replaces the k trials of every case: given the
	// units done, it returns how many units the run starts with and the
	// sequence to run under ctx, which may add units as records come in
	// (grow raises the progress total).
	units func(done map[results.UnitKey]bool) (total int, seq func(ctx context.Context, grow func(int)) iter.Seq[capture.Unit])
}

// costLine says what a run cost, and which of its dollars are the ones the
// agent reported itself (reported), not priced from --prices.
func costLine(spent *schemas.Cost, reported float64, prices cost.Table) string {
	if spent == nil || spent.USD == nil || reported <= 0 {
		return cost.Format(spent)
	}
	tokens := *spent
	tokens.USD = nil
	source := "reported by the agent"
	if len(prices) == 0 {
		source += "; no --prices"
	}
	if reported < *spent.USD-1e-9 {
		source = fmt.Sprintf("of which $%.4f %s", reported, source)
	}
	return fmt.Sprintf("$%.4f (%s), %s", *spent.USD, source, cost.Format(&tokens))
}

// agentReportedUSD is the part of a record's cost the agent reported
// itself: its own cost when no price of the table applied to its tokens
// (as cost.Of counts it).
func agentReportedUSD(rec *schemas.CaptureRecord, prices cost.Table, model string) float64 {
	if rec.Usage == nil {
		return 0
	}
	own := cost.Of(&schemas.CaptureRecord{Usage: rec.Usage}, nil, "")
	if own.USD == nil {
		return 0
	}
	if _, ok := prices.Lookup(model); ok && own.Tokens() > 0 {
		return 0 // the table priced the agent's tokens
	}
	return *own.USD
}

// runUnits runs k trials of every case and writes each record as it
// comes, or hands it to hooks.collect.
func runUnits(ctx context.Context, e *env, f *runFlags, setup *runSetup, k int, hooks runHooks) error {
	defer setup.cleanup()
	// The output is opened and locked before any agent starts, and held
	// to the end.
	out, err := f.openOutput(e, setup)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			out.Close()
		}
	}()
	done := map[results.UnitKey]bool{}
	if f.resume {
		resume := hooks.resume
		if resume == nil {
			resume = func(out *results.Output) (map[results.UnitKey]bool, error) { return out.ResumeCapture(f.retryErrors) }
		}
		if done, err = resume(out); err != nil {
			if fe := foreignError(err); fe != err {
				return withCode(exitForeign, fmt.Errorf("--resume: %w", err))
			}
			return inputError(fmt.Errorf("--resume: %w", err))
		}
	}
	_, total := setup.units(k, done, nil)
	units, _ := setup.units(k, done, hooks.onCase)
	var growing func(ctx context.Context, grow func(int)) iter.Seq[capture.Unit]
	if hooks.units != nil {
		total, growing = hooks.units(done)
	}
	collect := hooks.collect
	log := newProgress(e, f, total, setup.redact)
	defer log.stop()
	if total == 0 {
		log.printf("nothing to run: all %s in %s\n", plural(len(done), "unit"), f.output)
		if hooks.finish != nil {
			// A run stopped with nothing left to do is finished now.
			err := hooks.finish(out, &capture.Stats{}, false, false)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				err = outputError(err)
			}
			closed = true
			if cerr := out.Close(); cerr != nil && err == nil {
				err = outputError(cerr)
			}
			return err
		}
		return nil
	}
	kill := make(chan struct{})
	if e.signals != nil {
		go func() {
			select {
			case <-e.signals:
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
	}
	setup.cfg.Kill = kill
	var strays strayLog
	if !f.quiet {
		setup.cfg.Log = func(s capture.Stray) { strays.add(e.stderr, setup, s) }
	}
	defer strays.finish(e.stderr)
	price := func(rec *schemas.CaptureRecord) *schemas.Cost {
		if c := cost.Of(rec, f.prices, f.agentModel); c.Tokens() > 0 || c.USD != nil {
			return c
		}
		return nil
	}
	// The budget and --stop-on are decided as each turn answers, so no
	// unit starts once a limit is reached.
	ctl := runctl.New(runctl.Limits{MaxUSD: f.maxCost, MaxTokens: f.maxTokens, StopOn: f.stopOn}, price)
	setup.cfg.Control = ctl
	runner := capture.NewRunner(setup.cfg)
	init, err := runner.Preflight(ctx)
	if err != nil {
		closed = true
		out.Discard()
		if ctx.Err() != nil {
			return withCode(exitInterrupted, errors.New("interrupted while the agent started; nothing ran"))
		}
		var ae *capture.AgentError
		if errors.As(err, &ae) {
			err = errors.New(agentErrorText(&ae.Info))
		}
		return inputError(setup.redactErr(err))
	}
	// Units that share the working directory are warned of at the end,
	// and only when one of them wrote files there.
	var shared *sharedWrites
	if total > 1 && setup.cfg.Workspace == "" && !setup.anyCaseWorkspace {
		shared = newSharedWrites(setup.cfg.Cwd, time.Now())
	}
	switch {
	case setup.cfg.Adapter != nil:
		log.printf("agent %s, headless (--adapter %s); %s\n", init.AgentInfo.Name, setup.cfg.Adapter.Name, plural(total, "unit"))
	case init.AgentInfo != nil:
		log.printf("agent %s %s (ACP %d); %s\n", init.AgentInfo.Name, init.AgentInfo.Version, init.ProtocolVersion, plural(total, "unit"))
	}
	var mu sync.Mutex
	var reported float64 // of the run's dollars, those the agent reported itself
	// finished counts the units that ran to the end (not interrupted): a
	// budget spent by the last of them stopped nothing.
	var finished atomic.Int64
	var grown atomic.Int64 // units an adaptive run added as it went
	if f.maxCost > 0 && len(f.prices) == 0 {
		log.printf("warning: --max-cost without --prices counts only the cost agents report themselves\n")
	}
	files := graderFiles(setup.graders)
	emit := func(rec *schemas.CaptureRecord) error {
		if len(rec.Provenance.Graders) > 0 {
			rec.Provenance.GraderFiles = files
		}
		if rec.Error == nil || rec.Error.Class != schemas.ErrInterrupted {
			finished.Add(1)
		}
		if shared != nil {
			shared.see(rec)
		}
		rec.Cost = price(rec)
		ctl.Record(rec)
		if rec.Cost != nil && rec.Cost.USD != nil {
			mu.Lock()
			reported += agentReportedUSD(rec, f.prices, f.agentModel)
			mu.Unlock()
		}
		var err error
		if collect != nil {
			mu.Lock()
			err = collect(rec, out)
			mu.Unlock()
		} else {
			err = out.Write(rec)
		}
		if err != nil {
			return outputError(err)
		}
		log.record(rec)
		return nil
	}
	if growing != nil {
		// The schedule of an adaptive run ends with the run's stop too.
		seqCtx, stopSeq := context.WithCancel(ctx)
		defer stopSeq()
		go func() {
			select {
			case <-ctl.Stopped():
				stopSeq()
			case <-seqCtx.Done():
			}
		}()
		units = growing(seqCtx, func(n int) { grown.Add(int64(n)); log.grow(n) })
	}
	stats, runErr := runner.Run(ctx, units, emit)
	if stop := ctl.Stop(); stop != nil && stop.Kind == runctl.KindBudget && finished.Load() == int64(total)+grown.Load() {
		ctl.Reset() // every unit ran: the budget stopped nothing
	}
	stop := ctl.Stop()
	notRun := int64(total) + grown.Load() - finished.Load()
	budgetHit := stop != nil && stop.Kind == runctl.KindBudget
	var gateErr error
	if hooks.finish != nil && runErr == nil {
		gateErr = hooks.finish(out, stats, ctx.Err() != nil || budgetHit, budgetHit && ctx.Err() == nil)
		var ee *exitError
		if gateErr != nil && !errors.As(gateErr, &ee) {
			runErr, gateErr = outputError(gateErr), nil
		}
	}
	closed = true
	if err := out.Close(); err != nil && runErr == nil {
		runErr = outputError(err)
	}
	// The output must hold exactly what this run wrote and kept: a line
	// anything else added (an agent that could reach the file) is reported,
	// and never counts.
	foreign := checkWritten(out)
	log.stop()
	log.summary(stats)
	// Every record is in: what the controller counted is what the run spent.
	spent := ctl.Spent()
	if spent != nil {
		log.printf("cost: %s\n", costLine(spent, reported, f.prices))
	}
	if n, path := shared.seen(); n > 0 {
		log.printf("warning: %s of %d wrote files in the working directory they share, %s (%s, ...): what one writes, the next sees; give --workspace DIR for a fresh copy per unit\n",
			plural(n, "unit"), total, setup.cfg.Cwd, path)
	}
	if runErr == nil && (f.junit != "" || f.markdown != "") {
		runErr = writeCIReports(f)
	}
	if budgetHit && runErr == nil && ctx.Err() == nil {
		return withCode(exitBudget, fmt.Errorf("budget spent (%s; %s): no new work was started, %s not run; the output holds every finished record, continue with --resume and a larger budget",
			cost.Format(spent), stop.Limit, plural(int(notRun), "unit")))
	}
	if stop != nil && stop.Kind == runctl.KindStopOn && runErr == nil && ctx.Err() == nil {
		return withCode(exitInfraErrors, fmt.Errorf("stopped at the first %s error (case %q trial %d): %s; %s not run; the output holds every finished record, continue with --resume",
			stop.Error.Class, stop.ID, max(stop.Trial, 1), firstLine(stop.Error.Message), plural(int(notRun), "unit")))
	}
	switch {
	case foreign != nil:
		return foreign
	case runErr != nil:
		if n := out.Written(); n > 0 && out.IsFile() {
			runErr = fmt.Errorf("%w\nthe %d records written before it are in %s; continue with --resume", runErr, n, f.output)
		}
		return runErr
	case ctx.Err() != nil:
		return withCode(exitInterrupted, fmt.Errorf("interrupted; finished records are in the output, continue with --resume"))
	case gateErr != nil:
		return gateErr
	case stats.InfraErrors() > 0:
		return withCode(exitInfraErrors, fmt.Errorf("%d records have infrastructure errors", stats.InfraErrors()))
	}
	return nil
}

// agentErrorText says why an agent could not start, with an excerpt of its
// stderr: the first lines (where an agent that rejects its command line
// says what it rejected) and the last ones.
func agentErrorText(info *schemas.ErrorInfo) string {
	msg := info.Message
	stderr := strings.TrimRight(info.Stderr, "\n")
	if strings.TrimSpace(stderr) == "" {
		return msg
	}
	const head, tail = 3, 7
	lines := strings.Split(stderr, "\n")
	if len(lines) > head+tail+1 {
		skipped := len(lines) - head - tail
		lines = slices.Concat(lines[:head], []string{fmt.Sprintf("... (%d lines)", skipped)}, lines[len(lines)-tail:])
	}
	return msg + "\nagent stderr:\n  " + strings.Join(lines, "\n  ")
}

// writeCIReports writes the --junit and --markdown reports of the output
// file, read back whole, so a resumed run reports all of it.
func writeCIReports(f *runFlags) error {
	in, err := results.Open(f.output, nil)
	if err != nil {
		return err
	}
	run, err := report.ReadRun(f.output, in, report.RunOptions{})
	in.Close()
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	defer run.Close()
	write := func(name string, fn func(io.Writer) error) error {
		if name == "" {
			return nil
		}
		return results.ReplaceFile(name, 0o644, fn)
	}
	return errors.Join(
		write(f.junit, func(w io.Writer) error { return report.WriteJUnit(w, report.JUnitOptions{}, run) }),
		write(f.markdown, func(w io.Writer) error {
			return report.WriteMarkdownSummary(w, report.MarkdownOptions{Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples}, run)
		}),
	)
}

// strayLog prints what the agent sent that belongs to no case: the first
// few messages, then how many more.
type strayLog struct {
	mu sync.Mutex
	n  int
}

const strayShown = 5

func (l *strayLog) add(w io.Writer, setup *runSetup, s capture.Stray) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if line, ok := strings.CutPrefix(s.What, "stdout: "); ok {
		fmt.Fprintf(w, "harness: the agent writes non-protocol output to stdout: %q (recorded and skipped)\n", setup.redact.String(line))
		return
	}
	l.n++
	if l.n > strayShown {
		return
	}
	where := "with no session"
	if s.SessionID != "" {
		where = fmt.Sprintf("for session %q, which no case has (never created, or over)", s.SessionID)
	}
	fmt.Fprintf(w, "harness: protocol: the agent sent %s %s; it is on no record\n", s.What, setup.redact.String(where))
}

func (l *strayLog) finish(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > strayShown {
		fmt.Fprintf(w, "harness: protocol: ... and %d more such messages\n", l.n-strayShown)
	}
}

// outputOpenError is an error opening an output, with what to do about an
// existing one: exit 2.
func outputOpenError(err error) error {
	var ee *results.ExistsError
	if errors.As(err, &ee) {
		if ee.Resumable {
			return usageErrorf("%v; use --resume to continue it or --force to overwrite it", err)
		}
		return usageErrorf("%v; use --force to overwrite it", err)
	}
	return inputError(err)
}

// outputError marks a failure to write the output (a full disk, an I/O
// error): the run stops and exits 2, never 1, which is the quality gate.
func outputError(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return withCode(exitUsage, err)
}

func (s *runSetup) redactErr(err error) error {
	return fmt.Errorf("%s", s.redact.String(err.Error()))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// warmConfig maps --warm (0: none), when given, onto capture.Config.Warm
// (0: the default, negative: none).
func warmConfig(n int, given bool) int {
	switch {
	case !given:
		return 0
	case n <= 0:
		return -1
	}
	return n
}
