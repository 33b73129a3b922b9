package trials

import (
	"fmt"
	"io"

	"harness/schemas"
)

// CaseCount is what one run says about one case: how many trials it has,
// how many were graded (n) and passed (c), and why the others were left out.
type CaseCount struct {
	ID       string
	Trials   int
	N, C     int
	Ungraded int
	Errors   map[string]int
	// extra holds the counts by owner, failures in n and retries.
	extra Counts
	// ScoreSum sums the scores the N trials in n count with (CountedScore,
	// or a trials record's flat score); Scored counts those that had one.
	ScoreSum float64
	Scored   int
	// Estimate, for a case of an adaptive trials run, is its unbiased
	// pass rate: there C/N is biased by the stopping rule.
	Estimate *float64
	// Hash is the content hash of the case as its records ran it ("" for
	// records of older runs).
	Hash string
}

// Add counts one trial of the case (as Counts.Add does) and returns how
// it counted.
func (cc *CaseCount) Add(r *schemas.CaptureRecord) (pass bool, excluded string) {
	pass, excluded = cc.count(func(c *Counts) (bool, string) { return c.Add(r, Counting{}) })
	if excluded == "" {
		// A trial in n has a score: its grader's, or 0 for a failure of
		// the agent's own (as its trials record writes it).
		cc.ScoreSum += CountedScore(r, pass)
		cc.Scored++
	}
	return pass, excluded
}

// MeanScore is the mean score of the case's graded trials, or nil.
func (cc *CaseCount) MeanScore() *float64 {
	if cc.Scored == 0 {
		return nil
	}
	m := cc.ScoreSum / float64(cc.Scored)
	return &m
}

// AddEntry counts one trial of the case's trials record as the record
// counted it (as Counts.AddEntry does) and returns how.
func (cc *CaseCount) AddEntry(e *schemas.TrialEntry) (pass bool, excluded string) {
	pass, excluded = cc.count(func(c *Counts) (bool, string) { return c.AddEntry(e) })
	if excluded == "" && e.Score != nil {
		cc.ScoreSum += *e.Score
		cc.Scored++
	}
	return pass, excluded
}

func (cc *CaseCount) count(add func(*Counts) (bool, string)) (pass bool, excluded string) {
	c := cc.extra
	c.Trials, c.Graded, c.Passed, c.Ungraded, c.Errors = cc.Trials, cc.N, cc.C, cc.Ungraded, cc.Errors
	pass, excluded = add(&c)
	cc.Trials, cc.N, cc.C, cc.Ungraded, cc.Errors = c.Trials, c.Graded, c.Passed, c.Ungraded, c.Errors
	cc.extra = Counts{LeftOut: c.LeftOut, Failures: c.Failures, Attempts: c.Attempts, Retried: c.Retried, AttemptsCost: c.AttemptsCost}
	return pass, excluded
}

// Counts returns the case's counts.
func (cc *CaseCount) Counts() Counts {
	c := cc.extra
	c.Trials, c.Graded, c.Passed, c.Ungraded, c.Errors = cc.Trials, cc.N, cc.C, cc.Ungraded, cc.Errors
	return c
}

// Run is a results file reduced to per-case counts, in the order cases first
// appear.
type Run struct {
	File  string
	Kind  string
	Cases []*CaseCount
	index map[string]int
}

// NewRun makes a run of per-case counts already gathered (a view that keeps
// its own index of a results file), in the order given; file names it.
func NewRun(file, kind string, cases []*CaseCount) *Run {
	run := &Run{File: file, Kind: kind, Cases: cases, index: make(map[string]int, len(cases))}
	for i, c := range cases {
		run.index[c.ID] = i
	}
	return run
}

// Case returns the counts of case id, or nil.
func (r *Run) Case(id string) *CaseCount {
	if i, ok := r.index[id]; ok {
		return r.Cases[i]
	}
	return nil
}

// ReadRun reads a capture file (pass from each record's score; several
// records of one case are its trials) or a trials file (the trials are
// recounted from the entries, so acp-harness files load too) into per-case
// counts. Summary lines are skipped. A capture record repeating a case and
// trial already seen, or a trials record repeating a case, is an input
// error.
func ReadRun(name string, r io.Reader) (*Run, error) {
	run := &Run{File: name, index: map[string]int{}}
	type key struct {
		id    string
		trial int
	}
	seenTrial := map[key]int{}
	seenCase := map[string]int{}
	get := func(id string) *CaseCount {
		if i, ok := run.index[id]; ok {
			return run.Cases[i]
		}
		cc := &CaseCount{ID: id}
		run.index[id] = len(run.Cases)
		run.Cases = append(run.Cases, cc)
		return cc
	}
	kind, err := schemas.ReadResults(name, r, func(l schemas.ResultLine) error {
		switch l.Kind {
		case schemas.KindCapture:
			k := key{l.Capture.ID, l.Capture.Trial}
			if first, dup := seenTrial[k]; dup && l.Capture.Trial != 0 {
				return &schemas.InputError{File: name, Line: l.Line, Field: "trial", Msg: fmt.Sprintf(
					"case %q trial %d appears twice (first on line %d)", l.Capture.ID, l.Capture.Trial, first)}
			}
			seenTrial[k] = l.Line
			cc := get(l.Capture.ID)
			cc.Add(l.Capture)
			if cc.Hash == "" {
				cc.Hash = l.Capture.CaseHash
			}
		case schemas.KindTrials:
			if first, dup := seenCase[l.Trials.ID]; dup {
				return &schemas.InputError{File: name, Line: l.Line, Field: "id", Msg: fmt.Sprintf(
					"case %q appears twice (first on line %d)", l.Trials.ID, first)}
			}
			seenCase[l.Trials.ID] = l.Line
			cc := get(l.Trials.ID)
			cc.Hash = l.Trials.CaseHash
			for i := range l.Trials.Trials {
				cc.AddEntry(&l.Trials.Trials[i])
			}
			if a := l.Trials.Adaptive; a != nil && a.PassRate != nil {
				cc.Estimate = a.PassRate
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	run.Kind = kind
	if len(run.Cases) == 0 {
		return nil, &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	return run, nil
}

// Recount sets N, C, Errors and Ungraded of a trials record from its
// entries and recomputes its metrics (FillMetrics), clearing old warnings.
func Recount(tr *schemas.TrialsRecord) {
	cc := &CaseCount{ID: tr.ID}
	for i := range tr.Trials {
		rec := tr.Trials[i].Capture()
		cc.Add(&rec)
	}
	tr.N, tr.C, tr.Ungraded, tr.Errors = cc.N, cc.C, cc.Ungraded, cc.Errors
	tr.LeftOut, tr.Failures, tr.Attempts = cc.extra.LeftOut, cc.extra.Failures, cc.extra.Attempts
	if tr.K < 1 {
		tr.K = len(tr.Trials)
	}
	tr.Warnings = nil
	if tr.Missing > 0 {
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("%d of %d asked trials have no record", tr.Missing, tr.K))
	}
	FillMetrics(tr)
}
