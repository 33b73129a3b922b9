package evaluation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"sync"

	"harness/capture"
	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// collector gathers the trials of each case until all k are in, then
// writes the case's trials record. Records go out in the order of the
// prompts file, whatever order the cases finish in, so a run's output does
// not depend on timing: a finished case waits for the cases before it.
// Only cases in progress, and finished ones waiting their turn, are held.
type collector struct {
	mu      sync.Mutex
	opts    *Options
	events  *emitter
	k       int
	open    map[string]*pendingCase
	queue   []*pendingCase  // cases seen and not yet written, in file order
	written map[string]bool // cases whose records an earlier run wrote
	// failOn is how failed trials count.
	failOn      trials.Counting
	summary     *trials.Summary
	partialPath string
	partial     *results.Output
	out         *results.Output
	// adaptive is set for an adaptive run.
	adaptive *adaptiveRun
	// ungraded holds the units whose ungraded records are in the partial
	// file and not graded yet: the file stays for them.
	ungraded map[results.UnitKey]bool
	// interrupted counts the trials a stop cut short (kept in the partial
	// file, and run again by a resumed run).
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

// newCollector is the collector of a trials run; it clears (or, to
// resume, keeps) the partial file.
func newCollector(opts *Options, ev *emitter) (*collector, error) {
	t := &collector{opts: opts, events: ev, k: opts.K, open: map[string]*pendingCase{}, summary: trials.NewSummary(opts.K),
		partialPath: opts.partialPath()}
	t.failOn = trials.NewCounting(opts.Trials.FailOn, opts.Trials.LeaveOut)
	t.summary.SetPolicy(t.failOn)
	if p := opts.Trials.Adaptive; p != nil {
		t.k = p.MinK
		t.summary = trials.NewSummary(p.MinK)
		t.summary.SetPolicy(t.failOn)
		t.adaptive = &adaptiveRun{est: trials.NewEstimator(*p), wake: make(chan struct{}, 1)}
	}
	if t.partialPath == "" {
		return t, nil
	}
	if !opts.Resume {
		if err := removeIfExists(t.partialPath); err != nil {
			return nil, &Error{Kind: KindWrite, Err: err}
		}
	}
	if opts.Trials.CreatePartial {
		if pf, err := os.OpenFile(t.partialPath, os.O_CREATE|os.O_WRONLY, 0o666); err == nil {
			pf.Close()
		}
	}
	return t, nil
}

// resume loads what an earlier run left: whole cases in the output (their
// units are done and they count in the summary), finished trials of
// unfinished cases in the partial file, and the ungraded ones there (their
// agents' turns complete, their grading cut short), which the run grades.
func (t *collector) resume(out *results.Output, retryErrors bool, carried map[results.UnitKey][]schemas.Attempt) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error) {
	done := map[results.UnitKey]bool{}
	ungraded := map[results.UnitKey]*schemas.CaptureRecord{}
	complete := map[string]bool{}
	t.written = complete
	var retried []schemas.CaptureRecord
	var mismatch error
	check := graderCheck{file: out.Name(), want: t.opts.Config.GraderNames}
	versions, err := newCaseVersions(t.opts.Prompts, t.opts.RerunChanged)
	if err != nil {
		return nil, nil, err
	}
	// Old summaries go (a new one ends the run); with retryErrors, a case
	// with errored trials goes too, its good trials kept as pending.
	_, err = out.Resume(func(line []byte) bool {
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
		if versions.stale(tr.ID, tr.CaseHash) {
			if versions.rerun {
				return false
			}
			versions.note(tr.ID)
			return true // left as it was: the resume is refused
		}
		if mismatch == nil {
			mismatch = t.sameRun(&tr)
		}
		for i := range tr.Trials {
			check.see(tr.ID, tr.Trials[i].TrialNum, tr.Trials[i].Record.Provenance.Graders)
		}
		if retryErrors && len(tr.Errors) > 0 {
			// The trials the agent failed on its own, and the good
			// ones, are kept; the others run again, carrying what
			// they were as failed attempts.
			for i := range tr.Trials {
				rec := tr.Trials[i].Capture()
				rec.ID = tr.ID
				switch {
				case rec.Error == nil && (rec.Score == nil || rec.Score.Error == nil), rec.Error != nil && !results.Rerun(rec.Error, true):
					retried = append(retried, rec)
				default:
					carryRecord(carried, results.UnitKey{ID: tr.ID, Trial: rec.Trial}, &rec)
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
		err = cmp.Or(versions.err(out.Name()), mismatch, check.err)
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
	staleUnits := map[results.UnitKey]bool{}
	err = eachJSONLine(t.partialPath, func(lineNo int, line []byte) error {
		if !json.Valid(line) {
			return nil // a line a crash cut short
		}
		if t.opts.Key != nil {
			if _, _, err := t.opts.Key.Verify(t.partialPath, lineNo, line); err != nil {
				return err
			}
		}
		var rec schemas.CaptureRecord
		if json.Unmarshal(line, &rec) != nil || complete[rec.ID] || done[results.UnitKey{ID: rec.ID, Trial: rec.Trial}] {
			return nil
		}
		if versions.stale(rec.ID, rec.CaseHash) {
			// Changed, unless a later line holds the unit's record of
			// the case as it reads now.
			staleUnits[results.UnitKey{ID: rec.ID, Trial: rec.Trial}] = true
			return nil
		}
		if rec.Ungraded() {
			key := results.UnitKey{ID: rec.ID, Trial: rec.Trial}
			if ungraded[key] == nil {
				ungraded[key] = &rec
			}
			return nil
		}
		if rec.Error != nil && results.Rerun(rec.Error, retryErrors) {
			carryRecord(carried, results.UnitKey{ID: rec.ID, Trial: rec.Trial}, &rec)
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
	var changed []string
	for k := range staleUnits {
		if !done[k] && ungraded[k] == nil {
			changed = append(changed, k.ID)
		}
	}
	slices.Sort(changed)
	for _, id := range changed {
		versions.note(id)
	}
	if err == nil {
		err = versions.err(t.partialPath)
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
func (t *collector) seeCase(c *schemas.PromptCase) {
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
func (t *collector) add(rec *schemas.CaptureRecord, out *results.Output) error {
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
		t.ungraded[key] = true // kept in the partial file: a resumed run grades it
	} else {
		delete(t.ungraded, key)
	}
	if rec.Error != nil && rec.Error.Class == schemas.ErrInterrupted {
		t.interrupted++
		return nil // not finished: a resumed run runs it again
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
func (t *collector) keepPartial(rec *schemas.CaptureRecord) error {
	if t.partialPath == "" {
		return nil
	}
	if t.partial == nil {
		out, err := results.OpenOutput(t.partialPath, results.OutputOptions{Mode: results.Append, Redact: t.opts.Redact, Key: t.opts.Key})
		if err != nil {
			return fmt.Errorf("partial trials: %w", err)
		}
		t.partial = out
	}
	return t.partial.Write(rec)
}

// closePartial closes the partial file, if open.
func (t *collector) closePartial() error {
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
func (t *collector) complete(p *pendingCase) error {
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
func (t *collector) flush(all bool) error {
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
		t.events.emit(CaseFinished{Record: p.record})
	}
	clear(t.queue[len(kept):])
	t.queue = kept
	return nil
}

// finish writes the cases that completed from the partial file alone, then
// (unless interrupted) the summary. An adaptive run the budget stopped
// writes its summary too: a case that had its first min-k trials counts in
// it with stop "budget" (its trials stay in the partial file, and a
// resumed run continues it).
func (t *collector) finish(out *results.Output, interrupted, budget bool) (*schemas.TrialsSummary, error) {
	t.mu.Lock()
	t.out = out
	err := t.flush(true)
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := t.closePartial(); err != nil {
		return nil, err
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
	// ungraded ones, for a resumed run; with none, it has nothing left to
	// keep.
	if unfinished == 0 && len(t.ungraded) == 0 && t.partialPath != "" {
		if err := removeIfExists(t.partialPath); err != nil {
			return nil, err
		}
	}
	if interrupted && !(budget && t.adaptive != nil) {
		return nil, nil
	}
	if interrupted {
		t.budgetStopped()
	}
	sum := t.summary.Result(t.opts.Trials.Seed, t.opts.Trials.Resamples)
	t.result = &sum
	path := t.opts.Trials.SummaryPath
	if path != "" {
		err := results.ReplaceFile(path, 0o644, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			return enc.Encode(sum)
		})
		if err != nil {
			return nil, fmt.Errorf("summary: %w", err)
		}
	} else if err := out.Write(sum); err != nil {
		return nil, err
	}
	t.events.emit(SummaryWritten{Summary: sum, Path: path})
	return &sum, nil
}

// counts are the counts of the run's last line: those of its summary, or
// when it has none (it was interrupted), those of the cases in the output
// and of the trials of the others, finished or cut short.
func (t *collector) counts() trials.Counts {
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
func (t *collector) budgetStopped() {
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
func (t *collector) verdicts(recs []schemas.CaptureRecord) map[int]trials.Verdict {
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
func (t *collector) schedule(p *pendingCase, after bool) error {
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
func (t *collector) nextUnit() (u capture.Unit, ok, waiting bool) {
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
func (t *collector) adaptiveUnits(map[results.UnitKey]bool) (int, func(context.Context, func(int)) iter.Seq[capture.Unit]) {
	total := 0
	policy := t.adaptive.est.Policy()
	t.opts.Prompts.Scan(func(_ int, c *schemas.PromptCase) error {
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
			t.pumpAll(ctx, yield)
		}
	}
}

// pumpAll hands out the units of an adaptive run: the first ones as the
// scan reaches each case, then the rest as records come back.
func (t *collector) pumpAll(ctx context.Context, yield func(capture.Unit) bool) {
	// pump hands out what is queued; false when the runner takes no more.
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
	t.opts.Prompts.Scan(func(_ int, c *schemas.PromptCase) error {
		t.seeCase(c)
		if !pump() {
			stopped = true
			return ErrStop
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

// sameRun refuses to resume an output written under another stopping rule
// (or without one, or with one when this run has none).
func (t *collector) sameRun(tr *schemas.TrialsRecord) error {
	var want *trials.Policy
	if t.adaptive != nil {
		p := t.adaptive.est.Policy()
		want = &p
	}
	mismatch := &RuleMismatchError{ID: tr.ID, Written: tr.Adaptive, Want: want}
	switch {
	case want == nil && tr.Adaptive != nil, want != nil && tr.Adaptive == nil:
		return mismatch
	case want != nil:
		if a := tr.Adaptive; a.MinK != want.MinK || a.MaxK != want.MaxK || a.CIWidth != want.CIWidth {
			return mismatch
		}
	}
	return nil
}
