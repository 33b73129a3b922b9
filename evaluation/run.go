package evaluation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"harness/capture"
	"harness/cost"
	"harness/report"
	"harness/results"
	"harness/runctl"
	"harness/schemas"
	"harness/trials"
)

// hooks let a trials run change how a run treats records.
type hooks struct {
	// resume reads the units not to run from the output, and the
	// ungraded records to grade; nil takes the capture records it holds.
	// The units that run again carry their records' failed attempts in
	// carried.
	resume func(out *results.Output, carried map[results.UnitKey][]schemas.Attempt) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error)
	// onCase sees every case as the run reaches it, in file order.
	onCase func(*schemas.PromptCase)
	// collect takes each finished record instead of writing it.
	collect func(*schemas.CaptureRecord, *results.Output) error
	// finish runs after the last record, before the output is closed;
	// interrupted says the run did not run every unit, budget that a
	// budget stopped it. It returns the summary it wrote, if any.
	finish func(out *results.Output, interrupted, budget bool) (*schemas.TrialsSummary, error)
	// counts, when set, gives the counts of every trial the output
	// holds; without it they are those of the capture records in it.
	counts func() trials.Counts
	// units, when set, replaces the k trials of every case: given the
	// units done, it returns how many units the run starts with and the
	// sequence to run under ctx, which may add units as records come in
	// (grow counts them).
	units func(done map[results.UnitKey]bool) (total int, seq func(ctx context.Context, grow func(int)) iter.Seq[capture.Unit])
}

// Run runs the evaluation opts describe and returns what it did. The
// Result is never nil: after an error it says how far the run got.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return &Result{}, err
	}
	ev := &emitter{to: opts.Events}
	if opts.Trials == nil || opts.Shard.N > 0 {
		// A shard holds only some trials of a case: it writes capture
		// records, and a merge builds the trials records.
		return run(ctx, &opts, ev, hooks{})
	}
	col, err := newCollector(&opts, ev)
	if err != nil {
		return &Result{}, err
	}
	defer col.closePartial()
	h := hooks{
		resume: func(out *results.Output, carried map[results.UnitKey][]schemas.Attempt) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error) {
			return col.resume(out, opts.RetryErrors, carried)
		},
		onCase:  col.seeCase,
		collect: col.add,
		finish:  col.finish,
		counts:  col.counts,
	}
	if col.adaptive != nil {
		h.units = col.adaptiveUnits
	}
	return run(ctx, &opts, ev, h)
}

// openOutput opens and locks the record output: standard output, a new
// file, an existing one to continue or one to empty.
func openOutput(opts *Options) (*results.Output, error) {
	mode := results.New
	switch {
	case opts.Resume:
		mode = results.Append
	case opts.Force:
		mode = results.Truncate
	}
	out, err := results.OpenOutput(opts.Output, results.OutputOptions{
		Mode: mode, Stdout: opts.Stdout, Redact: opts.Redact, Resumable: true, Key: opts.Key,
	})
	if err != nil {
		return nil, &Error{Kind: KindOpen, Err: err}
	}
	return out, nil
}

// units yields the (case, trial) units of a run in case order, less those
// already done and those of other shards, reading the prompts file as it
// goes; total is how many it will yield.
func units(opts *Options, done map[results.UnitKey]bool, onCase func(*schemas.PromptCase)) (seq iter.Seq[capture.Unit], total int) {
	each := func(yield func(capture.Unit) bool) {
		i := 0
		opts.Prompts.Scan(func(_ int, c *schemas.PromptCase) error {
			if onCase != nil {
				onCase(c)
			}
			for t := 1; t <= opts.K; t++ {
				i++
				if !opts.Shard.has(i) || done[results.UnitKey{ID: c.ID, Trial: t}] {
					continue
				}
				if !yield(capture.Unit{Case: c, Trial: t}) {
					return ErrStop
				}
			}
			return nil
		})
	}
	if onCase == nil {
		for range each {
			total++
		}
	}
	return each, total
}

// runState is what a run counts as its records come in.
type runState struct {
	opts    *Options
	out     *results.Output
	ctl     *runctl.Controller
	events  *emitter
	collect func(*schemas.CaptureRecord, *results.Output) error
	shared  *sharedWrites
	// counts are the capture records of the output: those kept from an
	// earlier run and those written now (guarded by mu).
	counts trials.Counts
	// unwritten are the ungraded records taken out of the output that
	// this run has not graded yet: they go back in as they were.
	unwritten map[results.UnitKey]*schemas.CaptureRecord
	mu        sync.Mutex
	reported  float64 // of the run's dollars, those the agent reported itself
	// unpriced and priced count the records with prices given that got no
	// cost (the agent reported no usage) and those that got one.
	unpriced, priced int
	// finished counts the units that ran to the end (not interrupted): a
	// budget spent by the last of them stopped nothing.
	finished atomic.Int64
	grown    atomic.Int64 // units an adaptive run added as it went
}

func (s *runState) price(rec *schemas.CaptureRecord) *schemas.Cost {
	if c := cost.Of(rec, s.opts.Prices, s.opts.AgentModel); c.Tokens() > 0 || c.USD != nil {
		return c
	}
	return nil
}

// emit takes a finished record: prices it, tells the controller, and
// writes it (or hands it to the trials collector).
func (s *runState) emit(rec *schemas.CaptureRecord) error {
	if s.unwritten != nil {
		s.mu.Lock()
		delete(s.unwritten, results.UnitKey{ID: rec.ID, Trial: max(rec.Trial, 1)})
		s.mu.Unlock()
	}
	if len(rec.Provenance.Graders) > 0 {
		rec.Provenance.GraderFiles = s.opts.GraderFiles
	}
	if rec.Error == nil || rec.Error.Class != schemas.ErrInterrupted {
		s.finished.Add(1)
	}
	if s.shared != nil {
		s.shared.see(rec)
	}
	rec.Cost = s.price(rec)
	for i := range rec.Attempts {
		if a := &rec.Attempts[i]; a.Cost == nil && (a.Usage != nil || a.SimulatedUser != nil) {
			a.Cost = s.price(&schemas.CaptureRecord{Usage: a.Usage, SimulatedUser: a.SimulatedUser})
		}
	}
	if len(s.opts.Prices) > 0 {
		s.mu.Lock()
		if rec.Cost == nil {
			s.unpriced++
		} else {
			s.priced++
		}
		s.mu.Unlock()
	}
	s.ctl.Record(rec)
	if rec.Cost != nil && rec.Cost.USD != nil {
		s.mu.Lock()
		s.reported += agentReportedUSD(rec, s.opts.Prices, s.opts.AgentModel)
		s.mu.Unlock()
	}
	// Written once graded: the run's wall ends with its last record.
	rec.Timing.Written = time.Now().UnixMilli()
	var err error
	if s.collect != nil {
		s.mu.Lock()
		err = s.collect(rec, s.out)
		s.mu.Unlock()
	} else {
		err = s.out.Write(rec)
		if err == nil {
			s.mu.Lock()
			s.counts.Add(rec, trials.Counting{})
			s.mu.Unlock()
		}
	}
	if err != nil {
		return writeError(err)
	}
	s.events.emit(RecordWritten{Record: rec})
	return nil
}

// writeError marks a failure to write the output.
func writeError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Kind: KindWrite, Err: err}
}

// run runs the units of opts and writes each record as it comes, or
// hands it to h.collect.
func run(ctx context.Context, opts *Options, ev *emitter, h hooks) (*Result, error) {
	res := &Result{}
	// The output is opened and locked before any agent starts, and held
	// to the end.
	out, err := openOutput(opts)
	if err != nil {
		return res, err
	}
	closed := false
	defer func() {
		if !closed {
			out.Close()
		}
	}()
	done := map[results.UnitKey]bool{}
	// ungraded are the units an earlier run played to the end but did
	// not grade: they are graded, not run again.
	var ungraded map[results.UnitKey]*schemas.CaptureRecord
	var kept trials.Counts
	carried := map[results.UnitKey][]schemas.Attempt{}
	if opts.Resume {
		resume := h.resume
		if resume == nil {
			resume = func(out *results.Output, carried map[results.UnitKey][]schemas.Attempt) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error) {
				versions, err := newCaseVersions(opts.Prompts, opts.RerunChanged)
				if err != nil {
					return nil, nil, err
				}
				return resumeCapture(out, opts.RetryErrors, opts.Config.GraderNames, versions, &kept, carried)
			}
		}
		if done, ungraded, err = resume(out, carried); err != nil {
			return res, &Error{Kind: KindResume, Err: err}
		}
	}
	res.Done = len(done)
	_, total := units(opts, done, nil)
	seq, _ := units(opts, done, h.onCase)
	seq = withAttempts(withRecords(seq, ungraded), carried)
	var growing func(ctx context.Context, grow func(int)) iter.Seq[capture.Unit]
	if h.units != nil {
		total, growing = h.units(done)
	}
	res.Units = total
	ev.emit(Planned{Total: total, Done: len(done)})
	if total == 0 {
		return nothingToRun(out, &closed, res, ev, h, seq)
	}
	cfg := opts.Config
	cfg.Log = func(s capture.Stray) { ev.emit(Stray{Stray: s}) }
	// An ungraded record taken out of the output goes back in, as it
	// was, when this run does not get to grade it.
	s := &runState{opts: opts, out: out, events: ev, collect: h.collect, unwritten: maps.Clone(ungraded), counts: kept}
	// The budget and the stop rule are decided as each turn answers, so
	// no unit starts once a limit is reached.
	s.ctl = runctl.New(opts.Limits, s.price)
	cfg.Control = control{Controller: s.ctl, events: ev}
	runner := capture.NewRunner(cfg)
	init, err := runner.Preflight(ctx)
	if err != nil {
		closed = true
		out.Discard()
		res.Interrupted = ctx.Err() != nil
		return res, &Error{Kind: KindAgentStart, Err: err}
	}
	// Units that share the working directory are noted, and only when
	// one of them wrote files there.
	if total > 1 && cfg.Workspace == "" && !cfg.AnyCaseWorkspace {
		s.shared = newSharedWrites(cfg.Cwd, time.Now())
	}
	started := Started{Agent: init, Total: total, Adaptive: growing != nil}
	if cfg.Adapter != nil {
		started.Adapter = cfg.Adapter.Name
	}
	ev.emit(started)
	if growing != nil {
		// The schedule of an adaptive run ends with the run's stop too.
		seqCtx, stopSeq := context.WithCancel(ctx)
		defer stopSeq()
		go func() {
			select {
			case <-s.ctl.Stopped():
				stopSeq()
			case <-seqCtx.Done():
			}
		}()
		seq = withAttempts(withRecords(growing(seqCtx, func(n int) { s.grown.Add(int64(n)); ev.emit(UnitsAdded{N: n}) }), ungraded), carried)
	}
	watchDone := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-s.ctl.Stopped():
			if stop := s.ctl.Stop(); stop != nil {
				ev.emit(StopRequested{Stop: *stop})
			}
		case <-watchDone:
		}
	}()
	// The first stop is told at once, with what the run still waits for.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			select {
			case <-watchDone:
			default:
				ev.emit(Stopping{InFlight: runner.InFlight})
			}
		case <-watchDone:
		}
	}()
	stats, runErr := runner.Run(ctx, seq, s.emit)
	close(watchDone)
	<-watched
	<-stopped
	if h.collect == nil && runErr == nil {
		// (A trials run keeps them in its partial file.)
		for _, rec := range s.unwritten {
			if err := out.Write(rec); err != nil {
				runErr = writeError(err)
				break
			}
		}
	}
	res.Units = total + int(s.grown.Load())
	res.Finished = int(s.finished.Load())
	if stop := s.ctl.Stop(); stop != nil && stop.Kind == runctl.KindBudget && res.Finished == res.Units {
		s.ctl.Reset() // every unit ran: the budget stopped nothing
	}
	res.Stop = s.ctl.Stop()
	res.Stats = stats
	res.Interrupted = ctx.Err() != nil
	budgetHit := res.Stop != nil && res.Stop.Kind == runctl.KindBudget
	if h.finish != nil && runErr == nil {
		res.Summary, err = h.finish(out, res.Interrupted || budgetHit, budgetHit && !res.Interrupted)
		if err != nil {
			runErr = writeError(err)
		}
	}
	closed = true
	if err := out.Close(); err != nil && runErr == nil {
		runErr = writeError(err)
	}
	res.Written = out.Written()
	// The output must hold exactly what this run wrote and kept: a line
	// anything else added (an agent that could reach the file) is
	// reported, and never counts.
	foreign := checkWritten(out)
	// Every record is in: what the controller counted is what the run
	// spent.
	res.Spent = s.ctl.Spent()
	res.AgentReportedUSD = s.reported
	s.mu.Lock()
	res.Unpriced, res.Priced = s.unpriced, s.priced
	s.mu.Unlock()
	res.SharedWrites, res.SharedPath = s.shared.seen()
	res.Counts = s.counts
	if h.counts != nil {
		res.Counts = h.counts()
	}
	ev.emit(Finished{Result: res})
	if runErr == nil && (opts.JUnit != "" || opts.Markdown != "") {
		runErr = WriteReports(opts.Output, opts.JUnit, opts.Markdown)
	}
	if foreign != nil && runErr == nil {
		return res, foreign
	}
	return res, runErr
}

// withRecords gives the units whose records an earlier run left ungraded
// those records: they are graded, not run again.
func withRecords(seq iter.Seq[capture.Unit], recs map[results.UnitKey]*schemas.CaptureRecord) iter.Seq[capture.Unit] {
	if len(recs) == 0 {
		return seq
	}
	return func(yield func(capture.Unit) bool) {
		for u := range seq {
			u.Record = recs[results.UnitKey{ID: u.Case.ID, Trial: u.Trial}]
			if !yield(u) {
				return
			}
		}
	}
}

// withAttempts gives the units an earlier run's records failed the
// attempts those records were: the new records keep them.
func withAttempts(seq iter.Seq[capture.Unit], carried map[results.UnitKey][]schemas.Attempt) iter.Seq[capture.Unit] {
	if len(carried) == 0 {
		return seq
	}
	return func(yield func(capture.Unit) bool) {
		for u := range seq {
			if u.Record == nil {
				u.Attempts = carried[results.UnitKey{ID: u.Case.ID, Trial: u.Trial}]
			}
			if !yield(u) {
				return
			}
		}
	}
}

// nothingToRun ends a run whose units are all done: a trials run writes
// its summary now.
func nothingToRun(out *results.Output, closed *bool, res *Result, ev *emitter, h hooks, seq iter.Seq[capture.Unit]) (*Result, error) {
	var err error
	if h.finish != nil {
		// Its cases are seen (a case whose trials an earlier run all
		// kept is complete), none has a unit to run.
		for range seq {
		}
		res.Summary, err = h.finish(out, false, false)
		if err != nil {
			err = writeError(err)
		}
	}
	*closed = true
	if cerr := out.Close(); cerr != nil && err == nil {
		err = writeError(cerr)
	}
	res.Written = out.Written()
	ev.emit(Finished{Result: res})
	return res, err
}

// checkWritten reads a finished output back: every line in it must be one
// harness wrote there.
func checkWritten(out *results.Output) error {
	if err := out.CheckWritten(); err != nil {
		var many *results.ForeignLinesError
		if errors.As(err, &many) {
			return &Error{Kind: KindForeign, Err: err}
		}
		return fmt.Errorf("output: %w", err)
	}
	return nil
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

// WriteReports writes the JUnit and markdown reports (files junit and
// markdown, "" for none) of the output file, read back whole, so that a
// resumed run reports all of it.
func WriteReports(output, junit, markdown string) error {
	in, err := results.Open(output, nil)
	if err != nil {
		return err
	}
	run, err := report.ReadRun(output, in, report.RunOptions{})
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
		write(junit, func(w io.Writer) error { return report.WriteJUnit(w, report.JUnitOptions{}, run) }),
		write(markdown, func(w io.Writer) error {
			return report.WriteMarkdownSummary(w, report.MarkdownOptions{Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples}, run)
		}),
	)
}

// removeIfExists removes name; that it was not there is no error.
func removeIfExists(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}
