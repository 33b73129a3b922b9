package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"harness/capture"
	"harness/results"
	"harness/schemas"
	"harness/trials"
)

func newTrialsCmd() *command { return newTrialsCmdWith(&runFlags{}) }

// newTrialsCmdWith is the trials command with f as its run flags, which a
// caller (harness run) may have given graders and prices beforehand.
func newTrialsCmdWith(f *runFlags) *command {
	var (
		k                 int
		seed              uint64
		resamples         int
		summaryPath       string
		minRate           string
		minAt             []string
		minExp            []string
		allowGraderErrors bool
		failOn            []string
		adaptive          adaptiveFlags
	)
	c := &command{
		name:  "trials",
		usage: "trials PROMPTS -k N [flags] -- AGENT [ARGS...]",
		short: "run each case k times, grade every trial, and compute pass@k and pass^k",
		long: `trials runs k trials of every case, each in a fresh session (and a fresh
workspace copy with --workspace), grades them with -g, and writes one trials
record per case: n (graded trials), c (passes), passRate with its Wilson 95%
interval, the unbiased pass@k = 1 - C(n-c,k)/C(n,k) and pass^k = C(c,k)/C(n,k)
at k = 1..n (passAt, passExp), and passAtK / passExpK at the asked k. Trials
that failed for infrastructure reasons (agent crash, timeout, grader error)
are left out of n and counted by class. The last line (or --summary FILE) is
the run summary: means over cases with bootstrap 95% intervals; a table of
it is printed on stderr.

-j schedules (case, trial) units over agent processes; two trials of one
case never share a session or a workspace. While cases are in progress their
finished trials are kept in OUTPUT.partial, so --resume reruns only the
trials that had not finished.

Examples:
  harness trials prompts.jsonl -k 5 -g grader.py -o trials.jsonl -- ./my-agent
  harness trials prompts.jsonl -k 10 -j 8 -g judge.yaml --min-pass-at 1=0.6 -o t.jsonl -- npx @google/gemini-cli --acp
  harness trials prompts.jsonl -k 5 -g grader.py -o t.jsonl --resume -- ./my-agent`,
		agent: true,
		flags: pflag.NewFlagSet("trials", pflag.ContinueOnError),
	}
	c.flags.IntVarP(&k, "k", "k", 5, "trials per case")
	f.addFlags(c.flags)
	c.flags.Uint64Var(&seed, "seed", trials.DefaultSeed, "seed of the bootstrap intervals")
	c.flags.IntVar(&resamples, "resamples", trials.DefaultResamples, "bootstrap resamples")
	c.flags.StringVar(&summaryPath, "summary", "", "write the run summary (JSON) to `file` (default: beside -o, named after it: -o trials.jsonl writes trials.summary.json; the last line when writing to stdout)")
	c.flags.StringVar(&minRate, "min-pass-rate", "", "exit 1 unless the pass rate is at least `x` (0..1)")
	c.flags.StringArrayVar(&minAt, "min-pass-at", nil, "exit 1 unless mean pass@K is at least X (`K=X`); repeatable")
	c.flags.StringArrayVar(&minExp, "min-pass-exp", nil, "exit 1 unless mean pass^K is at least X (`K=X`); repeatable")
	c.flags.BoolVar(&allowGraderErrors, "allow-grader-errors", false, "let the gates pass although some trials hit grader errors (left out of n)")
	c.flags.StringSliceVar(&failOn, "fail-on", nil, "count trials with these error `classes` (timeout,agent_crash,...) as failures in n and the gates, instead of leaving them out")
	adaptive.addFlags(c.flags)
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if k < 1 {
			return usageErrorf("-k must be at least 1")
		}
		if err := checkClasses("--fail-on", failOn); err != nil {
			return err
		}
		gates, err := parseGates(minRate, minAt, minExp)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if summaryPath != "" {
			if _, err := os.Stat(summaryPath); err == nil && !f.force {
				return usageErrorf("--summary %s already exists; use --force to overwrite it", summaryPath)
			}
		}
		explicitSummary := summaryPath != ""
		if summaryPath == "" {
			// The records stream holds only trials records, as the
			// TypeScript acp-harness's readers expect.
			summaryPath = summaryBeside(f.output)
		}
		policy, err := adaptive.policy(c.flags, k, f)
		if err != nil {
			return err
		}
		if err := f.checkSlurm(args); err != nil {
			return err
		}
		if explicitSummary {
			f.summaryPath = summaryPath // kept read-only in the sandbox
		}
		setup, err := f.prepare(e, args, agent, "trials")
		if err != nil {
			return err
		}
		if f.slurm.tasks > 0 {
			setup.cleanup()
			f.failOn = failOn
			if explicitSummary {
				f.summaryPath = summaryPath
			}
			return runSlurm(ctx, &slurmRun{e: e, c: c, f: f, cmdName: "trials", k: k, agent: agent,
				finish: func(sum schemas.TrialsSummary) error { return checkGates(gates, sum, allowGraderErrors) }}, args)
		}
		if setup.shard[1] > 0 {
			// A shard holds only some trials of a case: it writes capture
			// records, and merge builds the trials records.
			return runUnits(ctx, e, f, setup, k, runHooks{})
		}
		key, err := recordKey(e)
		if err != nil {
			return err
		}
		col := &trialsCollector{k: k, open: map[string]*pendingCase{}, summary: trials.NewSummary(k), setup: setup, allowGraderErrors: allowGraderErrors, key: key}
		if len(failOn) > 0 {
			col.failOn = map[string]bool{}
			for _, class := range failOn {
				col.failOn[strings.TrimSpace(class)] = true
			}
		}
		if policy != nil {
			col.k = policy.MinK
			col.summary = trials.NewSummary(policy.MinK)
			col.adaptive = &adaptiveRun{est: trials.NewEstimator(*policy), wake: make(chan struct{}, 1)}
		}
		if f.output != "" && f.output != "-" {
			col.partialPath = f.output + ".partial"
		}
		if !f.resume && col.partialPath != "" {
			os.Remove(col.partialPath)
		}
		if col.partialPath != "" && f.sandbox.backend == "bwrap" {
			// Made before any agent starts, so that the sandbox keeps
			// it read-only like the output.
			if pf, err := os.OpenFile(col.partialPath, os.O_CREATE|os.O_WRONLY, 0o666); err == nil {
				pf.Close()
			}
		}
		if policy != nil && len(setup.graders) == 0 && f.image.tasks == "" {
			setup.cleanup()
			return usageErrorf("--adaptive decides from the trials' verdicts: give a grader (-g)")
		}
		if len(setup.graders) == 0 && !f.quiet && f.image.tasks == "" {
			fmt.Fprintln(e.stderr, "harness trials: no grader (-g): trials are recorded but nothing is scored")
		}
		defer col.closePartial()
		var units func(map[results.UnitKey]bool) (int, func(context.Context, func(int)) iter.Seq[capture.Unit])
		if col.adaptive != nil {
			units = col.adaptiveUnits
		}
		return runUnits(ctx, e, f, setup, k, runHooks{
			units: units,
			resume: func(out *results.Output) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error) {
				return col.resume(out, f.retryErrors)
			},
			onCase:  col.seeCase,
			collect: col.add,
			counts:  col.counts,
			finish: func(out *results.Output, stats *capture.Stats, interrupted, budget bool) error {
				return col.finish(e, f, out, interrupted, budget, summaryPath, seed, resamples, gates)
			},
		})
	}
	return c
}

// trialsCollector gathers the trials of each case until all k are in, then
// writes the case's trials record. Records go out in the order of the
// prompts file, whatever order the cases finish in, so a run's output does
// not depend on timing: a finished case waits for the cases before it. Only
// cases in progress, and finished ones waiting their turn, are held.
type trialsCollector struct {
	mu      sync.Mutex
	k       int
	open    map[string]*pendingCase
	queue   []*pendingCase  // cases seen and not yet written, in file order
	written map[string]bool // cases whose records an earlier run wrote
	// allowGraderErrors lets gates pass although graders errored.
	allowGraderErrors bool
	// failOn holds the error classes counted as failures.
	failOn      map[string]bool
	summary     *trials.Summary
	setup       *runSetup
	partialPath string
	partial     *results.Output
	// key signs the partial file's lines and checks them on --resume.
	key *results.Key
	out *results.Output
	// adaptive is set for an adaptive run (--adaptive).
	adaptive *adaptiveRun
	// ungraded holds the units whose ungraded records are in the partial
	// file and not graded yet: the file stays for them.
	ungraded map[results.UnitKey]bool
	// interrupted counts the trials a stop cut short (kept in the partial
	// file, and run again by --resume).
	interrupted int
	// result is the run's summary, once computed.
	result *schemas.TrialsSummary
}

type pendingCase struct {
	c      *schemas.PromptCase
	recs   []schemas.CaptureRecord
	record *schemas.TrialsRecord // built when all k trials are in
	// scheduled is the highest trial number handed out (adaptive runs).
	scheduled int
}

// resume loads what an earlier run left: whole cases in the output (their
// units are done and they count in the summary), finished trials of
// unfinished cases in the partial file, and the ungraded ones there (their
// agents' turns complete, their grading cut short), which the run grades.
func (t *trialsCollector) resume(out *results.Output, retryErrors bool) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error) {
	done := map[results.UnitKey]bool{}
	ungraded := map[results.UnitKey]*schemas.CaptureRecord{}
	complete := map[string]bool{}
	t.written = complete
	var retried []schemas.CaptureRecord
	var mismatch error
	check := graderCheck{file: out.Name(), want: t.setup.cfg.GraderNames}
	// Old summaries go (a new one ends the run); with retryErrors, a case
	// with errored trials goes too, its good trials kept as pending.
	_, err := out.Resume(func(line []byte) bool {
		var probe struct {
			Type string `json:"type"`
			K    *int   `json:"k"`
		}
		json.Unmarshal(line, &probe)
		if probe.Type == schemas.SummaryType || probe.K == nil {
			return false
		}
		var tr schemas.TrialsRecord
		if json.Unmarshal(line, &tr) != nil || tr.ID == "" || complete[tr.ID] {
			return false
		}
		if mismatch == nil {
			mismatch = t.sameRun(&tr)
		}
		for i := range tr.Trials {
			check.see(tr.ID, tr.Trials[i].TrialNum, tr.Trials[i].Record.Provenance.Graders)
		}
		if retryErrors && len(tr.Errors) > 0 {
			for i := range tr.Trials {
				rec := tr.Trials[i].Capture()
				rec.ID = tr.ID
				if rec.Error == nil && (rec.Score == nil || rec.Score.Error == nil) {
					retried = append(retried, rec)
				}
			}
			return false
		}
		complete[tr.ID] = true
		t.summary.Add(tr)
		for i := 1; i <= t.k; i++ {
			done[results.UnitKey{ID: tr.ID, Trial: i}] = true
		}
		return true
	})
	if err == nil {
		err = cmp.Or(mismatch, check.err)
	}
	if err != nil {
		return nil, nil, err
	}
	pend := func(rec schemas.CaptureRecord) {
		p := t.open[rec.ID]
		if p == nil {
			p = &pendingCase{}
			t.open[rec.ID] = p
		}
		p.recs = append(p.recs, rec)
		done[results.UnitKey{ID: rec.ID, Trial: rec.Trial}] = true
	}
	for i := range retried {
		// Kept in the partial file too, so another interruption loses
		// nothing.
		if err := t.keepPartial(&retried[i]); err != nil {
			return nil, nil, err
		}
		pend(retried[i])
	}
	if t.partialPath == "" {
		return done, ungraded, nil
	}
	err = eachJSONLine(t.partialPath, func(lineNo int, line []byte) error {
		if !json.Valid(line) {
			return nil // a line a crash cut short
		}
		if t.key != nil {
			if _, _, err := t.key.Verify(t.partialPath, lineNo, line); err != nil {
				return err
			}
		}
		var rec schemas.CaptureRecord
		if json.Unmarshal(line, &rec) != nil || complete[rec.ID] || done[results.UnitKey{ID: rec.ID, Trial: rec.Trial}] {
			return nil
		}
		if rec.Ungraded() {
			key := results.UnitKey{ID: rec.ID, Trial: rec.Trial}
			if ungraded[key] == nil {
				ungraded[key] = &rec
			}
			return nil
		}
		if rec.Error != nil && results.Rerun(rec.Error.Class, retryErrors) {
			return nil
		}
		partial := graderCheck{want: check.want} // eachJSONLine names the file
		if partial.see(rec.ID, rec.Trial, rec.Provenance.Graders); partial.err != nil {
			return partial.err
		}
		pend(rec)
		return nil
	})
	for k := range done {
		delete(ungraded, k)
	}
	t.ungraded = map[results.UnitKey]bool{}
	for k := range ungraded {
		t.ungraded[k] = true
	}
	return done, ungraded, err
}

func eachJSONLine(name string, fn func(int, []byte) error) error {
	r, err := results.Open(name, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()
	if err := schemas.EachLine(r, fn); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		var fe *results.ForeignLineError
		if errors.As(err, &fe) {
			return err
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// seeCase is called as the run reaches each case: a case whose trials all
// came from the partial file is complete already.
func (t *trialsCollector) seeCase(c *schemas.PromptCase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written[c.ID] {
		return
	}
	p := t.open[c.ID]
	if p == nil {
		p = &pendingCase{}
		t.open[c.ID] = p
	}
	p.c = c
	t.queue = append(t.queue, p)
	if t.adaptive != nil {
		t.schedule(p, false)
		return
	}
	if len(p.recs) >= t.k {
		t.complete(p)
	}
}

// add takes one finished trial.
func (t *trialsCollector) add(rec *schemas.CaptureRecord, out *results.Output) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out = out
	if t.adaptive != nil {
		t.adaptive.reported()
	}
	if err := t.keepPartial(rec); err != nil {
		if t.adaptive != nil {
			t.adaptive.fail()
		}
		return err
	}
	key := results.UnitKey{ID: rec.ID, Trial: rec.Trial}
	if rec.Ungraded() {
		if t.ungraded == nil {
			t.ungraded = map[results.UnitKey]bool{}
		}
		t.ungraded[key] = true // kept in the partial file: --resume grades it
	} else {
		delete(t.ungraded, key)
	}
	if rec.Error != nil && rec.Error.Class == schemas.ErrInterrupted {
		t.interrupted++
		return nil // not finished: --resume runs it again
	}
	p := t.open[rec.ID]
	if p == nil {
		p = &pendingCase{}
		t.open[rec.ID] = p
	}
	p.recs = append(p.recs, *rec)
	if t.adaptive != nil && p.c != nil {
		if err := t.schedule(p, true); err != nil {
			t.adaptive.fail()
			return err
		}
		return nil
	}
	if len(p.recs) >= t.k && p.c != nil {
		return t.complete(p)
	}
	return t.flush(false)
}

// keepPartial appends a finished trial to the partial file; t.mu is held.
func (t *trialsCollector) keepPartial(rec *schemas.CaptureRecord) error {
	if t.partialPath == "" {
		return nil
	}
	if t.partial == nil {
		out, err := results.OpenOutput(t.partialPath, results.OutputOptions{Mode: results.Append, Redact: t.setup.redact.JSON, Key: t.key})
		if err != nil {
			return fmt.Errorf("partial trials: %w", err)
		}
		t.partial = out
	}
	return t.partial.Write(rec)
}

// closePartial closes the partial file, if open.
func (t *trialsCollector) closePartial() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.partial == nil {
		return nil
	}
	err := t.partial.Close()
	t.partial = nil
	return err
}

// complete builds a case's trials record and writes every finished case
// that no unfinished case comes before; t.mu is held.
func (t *trialsCollector) complete(p *pendingCase) error {
	var tr schemas.TrialsRecord
	if t.adaptive != nil {
		tr = trials.BuildAdaptiveRecord(*p.c, p.recs, t.adaptive.est, t.failOn)
	} else {
		tr = trials.BuildRecordFailing(*p.c, t.k, p.recs, t.failOn)
	}
	p.record = &tr
	delete(t.open, p.c.ID)
	if t.out == nil {
		return nil // the output is not handed over yet: the first add writes it
	}
	return t.flush(false)
}

// flush writes the finished cases at the head of the queue, or with all
// every finished case (when the run ends early, so none is lost); t.mu is
// held.
func (t *trialsCollector) flush(all bool) error {
	kept := t.queue[:0]
	for i, p := range t.queue {
		if p.record == nil {
			if !all {
				kept = append(kept, t.queue[i:]...)
				break
			}
			kept = append(kept, p)
			continue
		}
		t.summary.Add(*p.record)
		if err := t.out.Write(*p.record); err != nil {
			t.queue = append(kept, t.queue[i+1:]...)
			return err
		}
	}
	clear(t.queue[len(kept):])
	t.queue = kept
	return nil
}

// finish writes the cases that completed from the partial file alone, then
// (unless interrupted) the summary, prints its table and checks the gates.
// An adaptive run the budget stopped writes its summary too: a case that
// had its first min-k trials counts in it with stop "budget" (its trials
// stay in the partial file, and --resume continues it).
func (t *trialsCollector) finish(e *env, f *runFlags, out *results.Output, interrupted, budget bool, summaryPath string, seed uint64, resamples int, gates []trials.Gate) error {
	t.mu.Lock()
	t.out = out
	err := t.flush(true)
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if err := t.closePartial(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	unfinished := 0
	for _, p := range t.open {
		if len(p.recs) > 0 {
			unfinished++
		}
	}
	// The partial file holds the trials of unfinished cases and the
	// ungraded ones, for --resume; with none, it has nothing left to keep.
	if unfinished == 0 && len(t.ungraded) == 0 && t.partialPath != "" {
		if err := os.Remove(t.partialPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", t.partialPath, err)
		}
	}
	if interrupted && !(budget && t.adaptive != nil) {
		return nil
	}
	if interrupted {
		t.budgetStopped()
	}
	sum := t.summary.Result(seed, resamples)
	t.result = &sum
	if summaryPath != "" {
		err := results.ReplaceFile(summaryPath, 0o644, func(w io.Writer) error {
			return writePrettyJSON(w, sum)
		})
		if err != nil {
			return fmt.Errorf("summary: %w", err)
		}
	} else if err := out.Write(sum); err != nil {
		return err
	}
	if !f.quiet {
		// The run's cost line follows, once, after the counts.
		table := sum
		table.Cost = nil
		trials.WriteSummaryTable(e.stderr, table)
		if summaryPath != "" {
			fmt.Fprintf(e.stderr, "summary: %s\n", summaryPath)
		}
	}
	return checkGates(gates, sum, t.allowGraderErrors)
}

// counts are the counts of the run's last line: those of its summary, or
// when it has none (it was interrupted), those of the cases in the output
// and of the trials of the others, finished or cut short.
func (t *trialsCollector) counts() trials.Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.result != nil {
		return trials.CountsOf(*t.result)
	}
	c := t.summary.Counts()
	add := func(p *pendingCase) {
		for i := range p.recs {
			c.Add(&p.recs[i], t.failOn)
		}
	}
	for _, p := range t.open {
		add(p)
	}
	for _, p := range t.queue {
		if p.record != nil { // complete, not written
			add(p)
		}
	}
	if t.interrupted > 0 {
		c.Merge(trials.Counts{Trials: t.interrupted, Errors: map[string]int{schemas.ErrInterrupted: t.interrupted}})
	}
	return c
}

// budgetStopped adds to the summary the cases of an adaptive run that the
// budget stopped after their first min-k trials, with stop "budget" and
// the estimate of those first trials; t.mu is held.
func (t *trialsCollector) budgetStopped() {
	minK := t.adaptive.est.Policy().MinK
	for _, p := range t.queue {
		if p.c == nil || p.record != nil {
			continue
		}
		first := 0
		for i := range p.recs {
			if p.recs[i].Trial <= minK {
				first++
			}
		}
		if first < minK {
			continue // not even its first trials: nothing unbiased to say
		}
		recs := slices.Clone(p.recs)
		slices.SortFunc(recs, func(a, b schemas.CaptureRecord) int { return a.Trial - b.Trial })
		full := trials.BuildAdaptiveRecord(*p.c, recs, t.adaptive.est, t.failOn)
		tr := trials.BuildRecordFailing(*p.c, len(recs), recs, t.failOn)
		a := *full.Adaptive
		a.Stop = trials.StopBudget
		tr.Adaptive = &a
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("stopped by the budget after %d trials", len(recs)))
		t.summary.Add(tr)
	}
}

// checkGates applies the gates to a run's summary: exit 1 naming each gate
// that failed, and grader errors under gates unless they are allowed.
func checkGates(gates []trials.Gate, sum schemas.TrialsSummary, allowGraderErrors bool) error {
	failed := trials.CheckGates(gates, sum)
	if n := trials.GraderErrors(sum); n > 0 && len(gates) > 0 && !allowGraderErrors {
		failed = append(failed, fmt.Sprintf("%d trials hit grader errors, so the metrics cover only the graded ones; fix the grader, or accept that with --allow-grader-errors", n))
	}
	if len(failed) > 0 {
		return withCode(exitGateFailed, fmt.Errorf("gate failed: %s", strings.Join(failed, "; ")))
	}
	return nil
}

// parseGates reads the gate flags: minPassRate is the value of
// --min-pass-rate ("" for none), minPassAt and minPassExp the values of
// the repeatable --min-pass-at and --min-pass-exp ("K=X" each).
func parseGates(minPassRate string, minPassAt, minPassExp []string) ([]trials.Gate, error) {
	var gates []trials.Gate
	if strings.TrimSpace(minPassRate) != "" {
		x, err := trials.ParseFraction(minPassRate)
		if err != nil {
			return nil, fmt.Errorf("--min-pass-rate: %w", err)
		}
		gates = append(gates, trials.Gate{Metric: trials.GatePassRate, Min: x})
	}
	for _, spec := range []struct {
		metric string
		values []string
	}{{trials.GatePassAt, minPassAt}, {trials.GatePassExp, minPassExp}} {
		for _, v := range spec.values {
			k, x, err := trials.ParseKX(v)
			if err != nil {
				return nil, fmt.Errorf("--min-%s %q: %w", spec.metric, v, err)
			}
			gates = append(gates, trials.Gate{Metric: spec.metric, K: k, Min: x})
		}
	}
	return gates, nil
}

// summaryBeside is where a run's summary goes by default: beside the
// output file, named after it with its .jsonl (or .json) and compression
// suffixes dropped (trials.jsonl.zst: trials.summary.json), or "" for
// standard output, where it is the last line.
func summaryBeside(output string) string {
	if output == "" || output == "-" {
		return ""
	}
	if st, err := os.Stat(output); err == nil && !st.Mode().IsRegular() {
		return "" // a FIFO or device: the summary follows the records
	}
	base := output
	for _, ext := range []string{".zst", ".gz", ".jsonl", ".json"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base + ".summary.json"
}

// adaptiveFlags are the flags of an adaptive trials run.
type adaptiveFlags struct {
	on      bool
	minK    int
	maxK    int
	ciWidth float64
}

func (a *adaptiveFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&a.on, "adaptive", false, "spend trials where the pass rate is uncertain: every case gets --min-k trials, then more until its interval is at most --ci-width wide or it has --max-k")
	fs.IntVar(&a.minK, "min-k", 0, "with --adaptive, the trials every case gets first (default: -k)")
	fs.IntVar(&a.maxK, "max-k", 50, "with --adaptive, the most trials a case gets")
	fs.Float64Var(&a.ciWidth, "ci-width", 0.3, "with --adaptive, stop giving a case trials once its Wilson 95% interval is at most this `width`")
}

// policy is the stopping rule the flags ask for, or nil without
// --adaptive; k is -k, the default of --min-k.
func (a *adaptiveFlags) policy(fs *pflag.FlagSet, k int, f *runFlags) (*trials.Policy, error) {
	if !a.on {
		for _, name := range []string{"min-k", "max-k", "ci-width"} {
			if fs.Changed(name) {
				return nil, usageErrorf("--%s needs --adaptive", name)
			}
		}
		return nil, nil
	}
	if f.shard != "" || f.slurm.tasks > 0 {
		return nil, usageErrorf("--adaptive decides each case's next trials from its finished ones, so it runs on one machine: drop --shard and --slurm")
	}
	p := trials.Policy{MinK: a.minK, MaxK: a.maxK, CIWidth: a.ciWidth}
	if !fs.Changed("min-k") {
		p.MinK = k
	}
	if err := p.Check(); err != nil {
		return nil, usageErrorf("--adaptive: %v", err)
	}
	return &p, nil
}

// adaptiveRun is the schedule of an adaptive trials run: the units the
// policy has asked for and not yet handed to the runner. Its fields are
// guarded by the collector's mutex.
type adaptiveRun struct {
	est         *trials.Estimator
	queue       []capture.Unit
	outstanding int  // units handed out whose record has not come back
	failed      bool // a record could not be kept: the run is ending
	grow        func(int)
	wake        chan struct{} // a record came back
}

// reported counts a record that came back and wakes the schedule.
func (a *adaptiveRun) reported() {
	a.outstanding--
	a.signal()
}

// fail ends the schedule: no more units are handed out.
func (a *adaptiveRun) fail() {
	a.failed = true
	a.signal()
}

func (a *adaptiveRun) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// verdicts are a case's finished trials as the policy sees them.
func (t *trialsCollector) verdicts(recs []schemas.CaptureRecord) map[int]trials.Verdict {
	finished := make(map[int]trials.Verdict, len(recs))
	for i := range recs {
		finished[recs[i].Trial] = trials.VerdictOf(&recs[i], t.failOn)
	}
	return finished
}

// schedule applies the policy to a case's finished trials: a case that
// stops is completed; otherwise the trials the policy asks for that were
// not handed out yet are queued (and, after is set once the run is under
// way, added to the progress total); t.mu is held.
func (t *trialsCollector) schedule(p *pendingCase, after bool) error {
	a := t.adaptive
	finished := t.verdicts(p.recs)
	asked, stop := a.est.Policy().Replay(finished)
	if stop != "" {
		return t.complete(p)
	}
	added := 0
	for trial := p.scheduled + 1; trial <= asked; trial++ {
		if _, done := finished[trial]; !done {
			a.queue = append(a.queue, capture.Unit{Case: p.c, Trial: trial})
			added++
		}
	}
	p.scheduled = max(p.scheduled, asked)
	if added > 0 {
		if after && a.grow != nil {
			a.grow(added)
		}
		a.signal()
	}
	return nil
}

// nextUnit takes the next queued unit; when there is none, waiting says
// whether units are still out whose records may queue more.
func (t *trialsCollector) nextUnit() (u capture.Unit, ok, waiting bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.adaptive
	if a.failed {
		return u, false, false
	}
	if len(a.queue) > 0 {
		u = a.queue[0]
		a.queue[0] = capture.Unit{}
		a.queue = a.queue[1:]
		a.outstanding++
		return u, true, false
	}
	return u, false, a.outstanding > 0
}

// adaptiveUnits is the unit source of an adaptive run: the first trials of
// every case in file order (as many as the policy asks before it decides
// anything, less those done), then the trials the policy asks for as the
// records come back, until every case has stopped.
func (t *trialsCollector) adaptiveUnits(map[results.UnitKey]bool) (int, func(context.Context, func(int)) iter.Seq[capture.Unit]) {
	total := 0
	policy := t.adaptive.est.Policy()
	t.setup.scan(func(_ int, c *schemas.PromptCase) error {
		if t.written[c.ID] {
			return nil
		}
		var recs []schemas.CaptureRecord
		if p := t.open[c.ID]; p != nil {
			recs = p.recs
		}
		finished := t.verdicts(recs)
		asked, stop := policy.Replay(finished)
		if stop == "" {
			for trial := 1; trial <= asked; trial++ {
				if _, done := finished[trial]; !done {
					total++
				}
			}
		}
		return nil
	})
	return total, func(ctx context.Context, grow func(int)) iter.Seq[capture.Unit] {
		return func(yield func(capture.Unit) bool) {
			t.mu.Lock()
			t.adaptive.grow = grow
			t.mu.Unlock()
			// pump hands out what is queued; false when the runner
			// takes no more.
			pump := func() bool {
				for {
					u, ok, _ := t.nextUnit()
					if !ok {
						return true
					}
					if !yield(u) {
						return false
					}
				}
			}
			stopped := false
			t.setup.scan(func(_ int, c *schemas.PromptCase) error {
				t.seeCase(c)
				if !pump() {
					stopped = true
					return errStop
				}
				return nil
			})
			for !stopped {
				u, ok, waiting := t.nextUnit()
				switch {
				case ok:
					stopped = !yield(u)
				case !waiting:
					return
				default:
					select {
					case <-t.adaptive.wake:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}
}

// sameRun refuses to resume an output written under another stopping rule
// (or without one, or with one when this run has none).
func (t *trialsCollector) sameRun(tr *schemas.TrialsRecord) error {
	switch {
	case t.adaptive == nil && tr.Adaptive != nil:
		return fmt.Errorf("case %q was written by an adaptive run: resume with --adaptive and its --min-k, --max-k and --ci-width", tr.ID)
	case t.adaptive != nil && tr.Adaptive == nil:
		return fmt.Errorf("case %q was written by a run without --adaptive: resume without --adaptive, or write a new output", tr.ID)
	case t.adaptive != nil:
		p, a := t.adaptive.est.Policy(), tr.Adaptive
		if a.MinK != p.MinK || a.MaxK != p.MaxK || a.CIWidth != p.CIWidth {
			return fmt.Errorf("case %q was written with --min-k %d --max-k %d --ci-width %g: resume with the same stopping rule", tr.ID, a.MinK, a.MaxK, a.CIWidth)
		}
	}
	return nil
}
