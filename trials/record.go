package trials

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"harness/schemas"
)

// Ungraded is the exclusion reason of a trial that has neither an error nor
// a grader result (the run had no grader).
const Ungraded = "ungraded"

// Unclassified is the error class counted for an error that has no class
// (schemas.ErrUnclassified).
const Unclassified = schemas.ErrUnclassified

// Outcome says how one capture record counts under the default policy
// (see OutcomeUnder): Excluded is "" for a trial in n (then Pass is its
// verdict), else the error class that kept it out of n, or Ungraded.
func Outcome(r *schemas.CaptureRecord) (pass bool, excluded string) {
	return OutcomeUnder(r, Counting{})
}

// Counting says how failed trials count, on top of their owners: a trial
// whose error class or owner is in FailOn counts in n as a failure, one
// whose class or owner is in LeaveOut is left out of n. A class named
// wins over its owner. The zero Counting is the default: agent-owned
// failures in n, every other failure left out.
type Counting struct {
	FailOn, LeaveOut map[string]bool
}

// NewCounting makes a counting policy from lists of classes or owners (spaces
// around names are ignored).
func NewCounting(failOn, leaveOut []string) Counting {
	set := func(names []string) map[string]bool {
		if len(names) == 0 {
			return nil
		}
		m := map[string]bool{}
		for _, n := range names {
			if n = strings.TrimSpace(n); n != "" {
				m[n] = true
			}
		}
		return m
	}
	return Counting{FailOn: set(failOn), LeaveOut: set(leaveOut)}
}

// Record is the policy as a summary records it: the classes and owners
// named on top of the default, and the default said (agent-owned failures
// in n, the others left out).
func (p Counting) Record() *schemas.CountPolicy {
	cp := &schemas.CountPolicy{Counted: []string{schemas.OwnerAgent}, LeftOut: []string{schemas.OwnerInfra, schemas.OwnerGrader, schemas.OwnerConfig}}
	cp.FailOn = slices.Sorted(maps.Keys(p.FailOn))
	cp.LeaveOut = slices.Sorted(maps.Keys(p.LeaveOut))
	if p.LeaveOut[schemas.OwnerAgent] {
		cp.Counted = nil
		cp.LeftOut = append([]string{schemas.OwnerAgent}, cp.LeftOut...)
	}
	return cp
}

// counts says whether a failure of this class and owner is in n.
func (p Counting) counts(class, owner string) bool {
	in := owner == schemas.OwnerAgent
	if owner != "" && p.FailOn[owner] {
		in = true
	}
	if owner != "" && p.LeaveOut[owner] {
		in = false
	}
	if p.FailOn[class] {
		in = true
	}
	if p.LeaveOut[class] {
		in = false
	}
	return in
}

// OutcomeUnder says how one capture record counts under policy p:
// Excluded is "" for a trial in n (then Pass is its verdict), else the
// error class that kept it out of n, or Ungraded.
//
// A trial with an error counts by its owner: an agent-owned failure is in
// n as a failure, unless a limit ended it (its turn's time limit, a cap)
// and a grader judged what it left, whose verdict then counts; every other
// failure (infrastructure, grader, configuration, and records of older
// runs without an owner) is left out of n. Policy p moves classes or
// owners either way. In a run without a grader nothing is in n: a
// failure counted there is Ungraded.
func OutcomeUnder(r *schemas.CaptureRecord, p Counting) (pass bool, excluded string) {
	var class, owner string
	switch {
	case r.Error != nil:
		class, owner = classOf(r.Error), r.Error.Owner
	case r.Score == nil:
		return false, Ungraded
	case r.Score.Error != nil:
		class, owner = r.Score.Error.Class, r.Score.Error.Owner
		if class == "" {
			class = schemas.ErrGraderError
		}
	default:
		return r.Score.Pass, ""
	}
	if class == schemas.ErrInterrupted || !p.counts(class, owner) {
		return false, class
	}
	if r.Score == nil && len(r.Provenance.Graders) == 0 {
		// A run without a grader puts nothing in n, failures neither.
		return false, Ungraded
	}
	if r.Error != nil && r.Error.Limit != "" && r.Score != nil && r.Score.Error == nil {
		// Graded as it stands: the grader judged what the agent left.
		return r.Score.Pass, ""
	}
	return false, ""
}

// FailureClass is the error class of a trial counted in n that failed
// because of an error (an agent-owned failure, or a class the policy
// counts), "" for any other trial.
func FailureClass(r *schemas.CaptureRecord, p Counting) string {
	pass, excluded := OutcomeUnder(r, p)
	if excluded != "" || pass {
		return ""
	}
	switch {
	case r.Error != nil:
		return classOf(r.Error)
	case r.Score != nil && r.Score.Error != nil:
		return cmp.Or(r.Score.Error.Class, schemas.ErrGraderError)
	}
	return ""
}

func classOf(e *schemas.ErrorInfo) string {
	if e.Class == "" {
		return Unclassified
	}
	return e.Class
}

// BuildRecord makes the trials record of case c from the capture records of
// its trials (k asked; recs in any order, sorted here by trial number).
//
// A trial passes when its record has a grader result without an error that
// says pass. A record with Error set, or whose grader result has an Error,
// is left out of n and counted in Errors by class; a record with no grader
// result is left out of n and counted in Ungraded. PassAtK and PassExpK are
// set only when n ≥ k; otherwise Warnings says why they are absent. If k is
// less than 1 it is taken to be len(recs).
func BuildRecord(c schemas.PromptCase, k int, recs []schemas.CaptureRecord) schemas.TrialsRecord {
	return BuildRecordFailing(c, k, recs, Counting{})
}

// caseHash is the content hash of the case the trials ran: the one their
// records carry (made from the case as it ran, where c may have been
// rebuilt from a record), "" when none does (records of older runs), c's
// own when they disagree.
func caseHash(c schemas.PromptCase, recs []schemas.CaptureRecord) string {
	h := ""
	for i := range recs {
		switch r := recs[i].CaseHash; {
		case r == "" || r == h:
		case h == "":
			h = r
		default:
			return c.ContentHash()
		}
	}
	return h
}

// BuildRecordFailing is BuildRecord under policy p: trials count by
// their owners, and the classes or owners p names move in or out of n
// (see OutcomeUnder).
func BuildRecordFailing(c schemas.PromptCase, k int, recs []schemas.CaptureRecord, p Counting) schemas.TrialsRecord {
	if k < 1 {
		k = len(recs)
	}
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b schemas.CaptureRecord) int { return a.Trial - b.Trial })
	tr := schemas.TrialsRecord{
		ID:       c.ID,
		Input:    c.Input,
		Expected: c.Expected,
		Hint:     c.Hint,
		Metadata: c.Metadata,
		K:        k,
		Trials:   make([]schemas.TrialEntry, 0, len(sorted)),
		CaseHash: caseHash(c, sorted),
	}
	var cnt Counts
	for _, r := range sorted {
		tr.Cost = tr.Cost.Add(r.Cost)
		pass, excluded := cnt.Add(&r, p)
		if excluded == "" && (r.Error != nil || r.Score == nil || r.Score.Error != nil) {
			// A failed trial in n (or one graded as it stands): its
			// verdict is written flat.
			e := schemas.NewTrialEntry(r, "")
			score := CountedScore(&r, pass)
			e.Pass, e.Score = &pass, &score
			tr.Trials = append(tr.Trials, e)
			continue
		}
		tr.Trials = append(tr.Trials, schemas.NewTrialEntry(r, excluded))
	}
	tr.N, tr.C, tr.Ungraded, tr.Errors = cnt.Graded, cnt.Passed, cnt.Ungraded, cnt.Errors
	tr.LeftOut, tr.Failures, tr.Attempts = cnt.LeftOut, cnt.Failures, cnt.Attempts
	tr.Cost = tr.Cost.Add(cnt.AttemptsCost)
	tr.MeanScore = EntriesMeanScore(tr.Trials)
	for _, class := range slices.Sorted(maps.Keys(cnt.Failures)) {
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("%d %s trials counted as failures", cnt.Failures[class], class))
	}
	if len(sorted) < k {
		tr.Missing = k - len(sorted)
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("%d of %d asked trials have no record", tr.Missing, k))
	}
	FillMetrics(&tr)
	return tr
}

// FillMetrics sets the metrics of tr (PassRate, PassRateCI, PassAtK,
// PassExpK, PassAt, PassExp) from its K, N and C, and adds a warning for
// each metric it cannot give. It is how BuildRecord computes them and how
// readers recompute them for records written by other tools.
func FillMetrics(tr *schemas.TrialsRecord) {
	tr.PassRate, tr.PassRateCI, tr.PassAtK, tr.PassExpK = nil, nil, nil, nil
	tr.PassAt, tr.PassExp = map[string]float64{}, map[string]float64{}
	if tr.N == 0 {
		switch {
		case tr.Ungraded > 0 && len(tr.Errors) == 0:
			tr.Warnings = append(tr.Warnings, "no graded trial (run without a grader?): pass metrics need a grader result")
		default:
			tr.Warnings = append(tr.Warnings, "no graded trial: every trial was excluded, so there are no pass metrics")
		}
		return
	}
	rate := float64(tr.C) / float64(tr.N)
	tr.PassRate = &rate
	if lo, hi, ok := Wilson(tr.C, tr.N, Z95); ok {
		tr.PassRateCI = &schemas.Interval{Low: lo, High: hi}
	}
	at, exp := Curves(tr.N, tr.C)
	for i := range at {
		key := strconv.Itoa(i + 1)
		tr.PassAt[key], tr.PassExp[key] = at[i], exp[i]
	}
	if tr.K <= tr.N {
		a, exp := at[tr.K-1], exp[tr.K-1]
		tr.PassAtK, tr.PassExpK = &a, &exp
		return
	}
	excluded := tr.Ungraded + tr.Missing
	for _, v := range tr.Errors {
		excluded += v
	}
	tr.Warnings = append(tr.Warnings, fmt.Sprintf(
		"passAtK and passExpK are absent: only n=%d of k=%d trials were graded (%d excluded), and the unbiased estimators need n ≥ k; passAt/passExp give k=1..%d",
		tr.N, tr.K, excluded, tr.N))
}

// CountedScore is the score a trial in n counts with, given the verdict
// it counts with: its grader's score when the grader gave that verdict
// without an error, else 0 (a failure of the agent's own that no grader
// scored, or one the grader's verdict does not stand for).
func CountedScore(r *schemas.CaptureRecord, pass bool) float64 {
	if r.Score != nil && r.Score.Error == nil && r.Score.Pass == pass {
		return r.Score.Score
	}
	return 0
}

// EntriesMeanScore is the mean score of the graded trials of a case (those
// with a flat score), or nil when none has one.
func EntriesMeanScore(es []schemas.TrialEntry) *float64 {
	sum, n := 0.0, 0
	for _, e := range es {
		if e.Excluded == "" && e.Score != nil {
			sum += *e.Score
			n++
		}
	}
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}
