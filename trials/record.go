package trials

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"harness/schemas"
)

// Ungraded is the exclusion reason of a trial that has neither an error nor
// a grader result (the run had no grader).
const Ungraded = "ungraded"

// Unclassified is the error class counted for an error that has no class
// (schemas.ErrUnclassified).
const Unclassified = schemas.ErrUnclassified

// Outcome says how one capture record counts: Excluded is "" for a graded
// trial (then Pass is its verdict), else the error class that kept it out of
// n, or Ungraded.
func Outcome(r *schemas.CaptureRecord) (pass bool, excluded string) {
	switch {
	case r.Error != nil:
		return false, classOf(r.Error)
	case r.Score == nil:
		return false, Ungraded
	case r.Score.Error != nil:
		if r.Score.Error.Class == "" {
			return false, schemas.ErrGraderError
		}
		return false, r.Score.Error.Class
	}
	return r.Score.Pass, ""
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
	return BuildRecordFailing(c, k, recs, nil)
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

// BuildRecordFailing is BuildRecord, but trials whose error class is in
// failOn count in n as failures instead of being left out (a CI policy:
// a timeout is the agent's failure, not the harness's).
func BuildRecordFailing(c schemas.PromptCase, k int, recs []schemas.CaptureRecord, failOn map[string]bool) schemas.TrialsRecord {
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
	counted := map[string]int{}
	var cnt Counts
	for _, r := range sorted {
		tr.Cost = tr.Cost.Add(r.Cost)
		_, class := Outcome(&r)
		_, excluded := cnt.Add(&r, failOn)
		if class != "" && excluded == "" {
			// An error class of failOn: a failure in n.
			counted[class]++
			e := schemas.NewTrialEntry(r, "")
			no, zero := false, 0.0
			e.Pass, e.Score = &no, &zero
			tr.Trials = append(tr.Trials, e)
			continue
		}
		tr.Trials = append(tr.Trials, schemas.NewTrialEntry(r, excluded))
	}
	tr.N, tr.C, tr.Ungraded, tr.Errors = cnt.Graded, cnt.Passed, cnt.Ungraded, cnt.Errors
	tr.MeanScore = EntriesMeanScore(tr.Trials)
	for _, class := range slices.Sorted(maps.Keys(counted)) {
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("%d %s trials counted as failures", counted[class], class))
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
