package trials

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"harness/cost"
	"harness/schemas"
)

// Defaults of the bootstrap in summaries and comparisons.
const (
	DefaultSeed       uint64  = 1
	DefaultResamples  int     = 1000
	DefaultConfidence float64 = 0.95
)

// Summary aggregates trials records as they stream by. It keeps two small
// counts per case (n and c), never the records themselves, so memory stays
// small however many trials a case has. The zero value is not ready: use
// NewSummary. A Summary is not safe for concurrent use: call Add from one
// goroutine (or under a lock).
type Summary struct {
	k        int
	fixedK   bool
	cases    int
	n, c     []int
	unscored []string
	trials   int
	ungraded int
	missing  int
	errors   map[string]int
	// extra are the counts by owner, the failures in n and the retries.
	extra  Counts
	policy *schemas.CountPolicy
	cost   *schemas.Cost
	last   *schemas.TrialsSummary
	// adaptive accumulates the adaptive part of the records (nil when
	// none has one); rates are their unbiased per-case pass rates, and
	// allN, allC count every graded trial and pass.
	adaptive   *schemas.AdaptiveSummary
	rates      []float64
	allN, allC int
	// scores are the cases' mean scores.
	scores []float64
}

// NewSummary returns an empty summary for a run that asked k trials per case
// (k is what PassAtK and PassExpK of the result are computed at; 0 takes the
// largest K of the records added).
func NewSummary(k int) *Summary {
	return &Summary{k: max(k, 0), fixedK: k > 0, errors: map[string]int{}}
}

// Add counts one case's trials record. A record of an adaptive run counts
// its first MinK trials in the curves and its unbiased pass rate in the
// pass rate (see schemas.TrialsSummary.Adaptive).
func (s *Summary) Add(r schemas.TrialsRecord) {
	s.cost = s.cost.Add(r.Cost)
	leftOut := r.LeftOut
	if leftOut == nil {
		leftOut = r.Errors // a record of an older run: by class
	}
	s.extra.Merge(Counts{LeftOut: leftOut, Failures: r.Failures})
	for i := range r.Trials {
		if a := r.Trials[i].Record.Attempts; len(a) > 0 {
			s.extra.Attempts += len(a)
			s.extra.Retried++
			s.extra.AttemptsCost = s.extra.AttemptsCost.Add(r.Trials[i].Record.AttemptsCost())
		}
	}
	if a := r.Adaptive; a != nil {
		s.addAdaptive(r)
		s.add(r.ID, a.MinK, len(r.Trials), a.FirstN, a.FirstC, r.Ungraded, r.Missing, r.Errors)
		s.addScore(r.MeanScore, r.Trials)
		return
	}
	s.add(r.ID, r.K, len(r.Trials), r.N, r.C, r.Ungraded, r.Missing, r.Errors)
	s.addScore(r.MeanScore, r.Trials)
}

// addScore counts a case's mean score: the record's, else its entries'.
func (s *Summary) addScore(m *float64, es []schemas.TrialEntry) {
	if m == nil {
		m = EntriesMeanScore(es)
	}
	if m != nil {
		s.scores = append(s.scores, *m)
	}
}

func (s *Summary) addAdaptive(r schemas.TrialsRecord) {
	s.addAdaptiveCounts(r.ID, r.Adaptive, len(r.Trials), r.N, r.C)
}

// AddAdaptiveCount is AddCount for a case of an adaptive run, a being its
// trials record's Adaptive part: like Add, it counts the case's first MinK
// trials in the curves and its unbiased pass rate in the pass rate.
func (s *Summary) AddAdaptiveCount(cc *CaseCount, a *schemas.AdaptiveCase) {
	s.extra.Merge(cc.extra)
	s.addAdaptiveCounts(cc.ID, a, cc.Trials, cc.N, cc.C)
	s.add(cc.ID, a.MinK, cc.Trials, a.FirstN, a.FirstC, cc.Ungraded, 0, cc.Errors)
}

func (s *Summary) addAdaptiveCounts(id string, a *schemas.AdaptiveCase, trials, n, c int) {
	if s.adaptive == nil {
		s.adaptive = &schemas.AdaptiveSummary{MinK: a.MinK, MaxK: a.MaxK, CIWidth: a.CIWidth, Stopped: map[string]int{}}
	}
	s.adaptive.Stopped[a.Stop]++
	if a.Stop == StopMaxK {
		s.adaptive.AtMaxK = append(s.adaptive.AtMaxK, id)
	}
	s.adaptive.Trials += trials
	s.allN += n
	s.allC += c
	if a.PassRate != nil {
		s.rates = append(s.rates, *a.PassRate)
	}
}

func (s *Summary) add(id string, k, trials, n, c, ungraded, missing int, errors map[string]int) {
	s.last = nil
	s.cases++
	if !s.fixedK {
		s.k = max(s.k, k)
	}
	s.trials += trials
	s.ungraded += ungraded
	s.missing += missing
	for class, v := range errors {
		s.errors[class] += v
	}
	if n < 1 {
		s.unscored = append(s.unscored, id)
		return
	}
	s.n = append(s.n, n)
	s.c = append(s.c, c)
}

// Counts returns the trial counts of the records added so far: the
// counts Result gives (Trials, Graded, Passes, Ungraded, Missing, Errors),
// without computing the metrics. Graded and Passed count every trial,
// those of adaptive cases too.
func (s *Summary) Counts() Counts {
	c := Counts{Trials: s.trials, Ungraded: s.ungraded, Missing: s.missing,
		LeftOut: maps.Clone(s.extra.LeftOut), Failures: maps.Clone(s.extra.Failures),
		Attempts: s.extra.Attempts, Retried: s.extra.Retried, AttemptsCost: s.extra.AttemptsCost}
	if len(s.errors) > 0 {
		c.Errors = maps.Clone(s.errors)
	}
	if s.adaptive != nil {
		// The curves count the first trials of adaptive cases; the
		// counts, every trial.
		c.Graded, c.Passed = s.allN, s.allC
		return c
	}
	for i := range s.n {
		c.Graded += s.n[i]
		c.Passed += s.c[i]
	}
	return c
}

// NoGradedReason says why a run has no graded trial, from its counts of
// trials run without a grader, asked trials with no record, and trials
// left out by error class: "no grader was given" only when that is why.
func NoGradedReason(ungraded, missing int, errors map[string]int) string {
	var parts []string
	if len(errors) > 0 {
		var classes []string
		for _, class := range slices.Sorted(maps.Keys(errors)) {
			classes = append(classes, fmt.Sprintf("%d %s", errors[class], class))
		}
		parts = append(parts, "the trials ended in errors: "+strings.Join(classes, ", "))
	}
	if ungraded > 0 {
		if len(parts) == 0 && missing == 0 {
			return "no grader was given"
		}
		parts = append(parts, fmt.Sprintf("%d ran without a grader", ungraded))
	}
	if missing > 0 {
		parts = append(parts, fmt.Sprintf("%d asked trials have no record", missing))
	}
	if len(parts) == 0 {
		return "no trial ran"
	}
	return strings.Join(parts, "; ")
}

// SetPolicy records the counting policy the summary's records were built
// under.
func (s *Summary) SetPolicy(p Counting) { s.policy = p.Record() }

// Cases returns how many records were added.
func (s *Summary) Cases() int { return s.cases }

// Result computes the summary: the means over cases of pass@k and pass^k for
// k = 1..(largest n), each over the cases with n ≥ k, with percentile
// bootstrap intervals at 95% from resamples resamples of the cases drawn by
// a PCG generator seeded with seed (resamples < 1 gives intervals of zero
// width and a warning). Every number in it is finite.
func (s *Summary) Result(seed uint64, resamples int) schemas.TrialsSummary {
	out := schemas.TrialsSummary{
		Type:          schemas.SummaryType,
		K:             s.k,
		Cases:         s.cases,
		ScoredCases:   len(s.n),
		UnscoredCases: slices.Sorted(slices.Values(s.unscored)),
		Trials:        s.trials,
		Ungraded:      s.ungraded,
		Missing:       s.missing,
		PassAt:        map[string]schemas.Estimate{},
		PassExp:       map[string]schemas.Estimate{},
		Confidence:    DefaultConfidence,
		Seed:          seed,
		Resamples:     resamples,
	}
	counts := s.Counts()
	out.Graded, out.Passes, out.Errors = counts.Graded, counts.Passed, counts.Errors
	out.LeftOut, out.Failures, out.Policy = counts.LeftOut, counts.Failures, s.policy
	if counts.Attempts > 0 {
		out.Retries = &schemas.RetryCounts{Attempts: counts.Attempts, Trials: counts.Retried, Cost: counts.AttemptsCost}
	}
	if s.cost != nil {
		c := *s.cost
		out.Cost = &c
	}
	if s.adaptive != nil {
		a := *s.adaptive
		a.Stopped = maps.Clone(a.Stopped)
		a.AtMaxK = slices.Sorted(slices.Values(a.AtMaxK))
		if s.cases > 0 {
			a.MeanTrials = float64(a.Trials) / float64(s.cases)
		}
		if s.allN > 0 {
			naive := float64(s.allC) / float64(s.allN)
			a.NaivePassRate = &naive
		}
		a.Note = AdaptiveNote(a.MinK)
		out.Adaptive = &a
	}
	if resamples < 1 {
		out.Warnings = append(out.Warnings, "bootstrap disabled (resamples < 1): intervals have zero width")
	}
	if len(s.unscored) > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d case(s) had no graded trial and are left out of every mean: %s",
			len(s.unscored), idList(s.unscored, 10)))
	}
	if out.Graded == 0 || len(s.n) == 0 && len(s.rates) == 0 {
		if s.cases > 0 {
			out.Warnings = append(out.Warnings, "no graded trial in the run: there are no pass metrics ("+NoGradedReason(s.ungraded, s.missing, s.errors)+")")
		}
		s.last = &out
		return out
	}
	rate := float64(out.Passes) / float64(out.Graded)
	lo, hi := rate, rate
	// The bootstrap resamples cases; putting them in a canonical order
	// first makes the intervals independent of the order cases finished in
	// (a run with -j, or shards merged).
	ns, cs := canonical(s.n, s.c)
	var notes intervalNotes
	rateMethod := IntervalBootstrap
	if s.adaptive != nil && len(s.rates) > 0 {
		rates := slices.Sorted(slices.Values(s.rates))
		rate = mean(rates)
		lo, hi, rateMethod = casesInterval(rates, seed, resamples)
		notes.add("the pass rate", rateMethod, len(rates))
	} else {
		rates := make([]float64, len(ns))
		for i := range ns {
			rates[i] = float64(cs[i]) / float64(ns[i])
		}
		if alike(rates) && resamples >= 1 {
			// Σc/Σn is then the common rate: the same interval as the
			// mean's.
			lo, hi, rateMethod = casesInterval(rates, seed, resamples)
			notes.add("the pass rate", rateMethod, len(rates))
		} else if l, h, ok := bootstrapRatio(cs, ns, seed, resamples, DefaultConfidence); ok {
			lo, hi = l, h
		}
	}
	out.PassRate = &rate
	out.PassRateCI = &schemas.Interval{Low: lo, High: hi, Method: methodField(rateMethod)}
	if len(s.scores) > 0 {
		ms := estimate(0, slices.Sorted(slices.Values(s.scores)), seed, resamples, &notes, "the mean score")
		ms.Cases = len(s.scores)
		out.MeanScore = &ms
	}
	if len(ns) == 0 {
		out.Warnings = append(out.Warnings, notes.warnings()...)
		s.last = &out
		return out
	}

	maxN := slices.Max(ns)
	for k := 1; k <= maxN; k++ {
		var at, exp []float64
		for i := range ns {
			if ns[i] < k {
				continue
			}
			a, _ := PassAtK(ns[i], cs[i], k)
			e, _ := PassExpK(ns[i], cs[i], k)
			at = append(at, a)
			exp = append(exp, e)
		}
		key := strconv.Itoa(k)
		out.PassAt[key] = estimate(k, at, seed, resamples, &notes, "pass@"+key)
		out.PassExp[key] = estimate(k, exp, seed, resamples, &notes, "pass^"+key)
	}
	if s.k >= 1 {
		if e, ok := out.PassAt[strconv.Itoa(s.k)]; ok {
			ee := out.PassExp[strconv.Itoa(s.k)]
			out.PassAtK, out.PassExpK = &e, &ee
			if e.Cases < out.ScoredCases {
				out.Warnings = append(out.Warnings, fmt.Sprintf(
					"passAtK and passExpK (k=%d) average only the %d of %d scored cases with n ≥ %d graded trials",
					s.k, e.Cases, out.ScoredCases, s.k))
			}
		} else {
			out.Warnings = append(out.Warnings, fmt.Sprintf(
				"passAtK and passExpK (k=%d) are absent: no case has %d graded trials (largest n is %d)", s.k, s.k, maxN))
		}
	}
	if minN := slices.Min(s.n); minN < maxN {
		out.Warnings = append(out.Warnings, fmt.Sprintf(
			"cases have between %d and %d graded trials: curve points above k=%d average fewer cases (see cases)", minN, maxN, minN))
	}
	out.Warnings = append(out.Warnings, notes.warnings()...)
	s.last = &out
	return out
}

// canonical returns the (n, c) pairs sorted by n, then c.
func canonical(n, c []int) (ns, cs []int) {
	idx := make([]int, len(n))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if n[a] != n[b] {
			return n[a] - n[b]
		}
		return c[a] - c[b]
	})
	ns, cs = make([]int, len(n)), make([]int, len(c))
	for i, j := range idx {
		ns[i], cs[i] = n[j], c[j]
	}
	return ns, cs
}

func estimate(k int, values []float64, seed uint64, resamples int, notes *intervalNotes, name string) schemas.Estimate {
	e := schemas.Estimate{K: k, Cases: len(values), Mean: mean(values)}
	var method string
	e.Low, e.High, method = casesInterval(values, seed, resamples)
	e.Method = methodField(method)
	notes.add(name, method, len(values))
	return e
}

// meanScoreMethod words how the mean score's interval was had, as its
// summary line says it.
func meanScoreMethod(method string, confidence float64) string {
	switch method {
	case IntervalExact:
		return fmt.Sprintf("%.0f%% exact Clopper–Pearson over the cases, as every case scored the same, 0 or 1", 100*confidence)
	case IntervalNone:
		return "every case has the same mean score, so a bootstrap over cases has no spread"
	}
	return fmt.Sprintf("%.0f%% bootstrap over cases", 100*confidence)
}

// bootstrapRatio is the percentile bootstrap of Σc/Σn over cases.
func bootstrapRatio(c, n []int, seed uint64, resamples int, conf float64) (low, high float64, ok bool) {
	if len(n) == 0 || resamples < 1 {
		return 0, 0, false
	}
	r := NewRand(seed)
	ratios := make([]float64, resamples)
	for b := range ratios {
		sc, sn := 0, 0
		for range n {
			i := r.IntN(len(n))
			sc += c[i]
			sn += n[i]
		}
		ratios[b] = float64(sc) / float64(sn)
	}
	slices.Sort(ratios)
	alpha := (1 - conf) / 2
	return Percentile(ratios, alpha), Percentile(ratios, 1-alpha), true
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func idList(ids []string, limit int) string {
	if len(ids) <= limit {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:limit], ", ") + fmt.Sprintf(", … (%d more)", len(ids)-limit)
}

// WriteTable writes the end-of-run table of the summary for people: counts,
// the pooled pass rate, and pass@k / pass^k with intervals for each k. It
// uses the last Result computed, or computes one with DefaultSeed and
// DefaultResamples.
func (s *Summary) WriteTable(w io.Writer) error {
	r := s.last
	if r == nil {
		res := s.Result(DefaultSeed, DefaultResamples)
		r = &res
	}
	return WriteSummaryTable(w, *r)
}

// WriteSummaryTable writes a summary as the table WriteTable prints.
func WriteSummaryTable(w io.Writer, r schemas.TrialsSummary) error {
	var b strings.Builder
	counts := CountsOf(r)
	fmt.Fprintf(&b, "cases: %d graded of %d run   trials: %d graded of %d   passed: %d",
		r.ScoredCases, r.Cases, counts.Graded, counts.Trials, counts.Passed)
	if counts.Ungraded > 0 {
		fmt.Fprintf(&b, "   ungraded: %d", counts.Ungraded)
	}
	if counts.Missing > 0 {
		fmt.Fprintf(&b, "   missing: %d", counts.Missing)
	}
	b.WriteString("\n")
	if r.PassRate != nil {
		fmt.Fprintf(&b, "pass %.1f%%", 100**r.PassRate)
		if r.PassRateCI != nil {
			fmt.Fprintf(&b, " [%.1f, %.1f]", 100*r.PassRateCI.Low, 100*r.PassRateCI.High)
		}
		fmt.Fprintf(&b, " %s\n", counts.Coverage())
	} else if counts.LeftOutCount() > 0 {
		fmt.Fprintf(&b, "nothing in n: %s\n", counts.leftOutPart(true))
	}
	if len(counts.Failures) > 0 {
		fmt.Fprintf(&b, "failed by the agent (in n): %s\n", ClassCounts(counts.Failures))
	}
	if counts.Attempts > 0 {
		fmt.Fprintf(&b, "retries: %s\n", counts.RetryNote())
	}
	if n := GraderErrors(r); n > 0 {
		fmt.Fprintf(&b, "WARNING: %d trials hit grader errors: they are left out, so the pass rate is over %d graded trials of %d, not over all\n",
			n, r.Graded, r.Trials)
	}
	if p := r.Policy; p != nil && (len(p.FailOn) > 0 || len(p.LeaveOut) > 0) {
		fmt.Fprintf(&b, "policy: %s\n", PolicyNote(p))
	}
	if len(r.UnscoredCases) > 0 {
		ids := r.UnscoredCases
		more := ""
		if len(ids) > 10 {
			ids, more = ids[:10], fmt.Sprintf(" and %d more", len(r.UnscoredCases)-10)
		}
		fmt.Fprintf(&b, "not graded (every trial excluded): %s%s\n", strings.Join(ids, ", "), more)
	}
	if r.Cost != nil {
		fmt.Fprintf(&b, "cost: %s\n", cost.Format(r.Cost))
	}
	f3 := func(x float64) string { return fmt.Sprintf("%.3f", x) }
	if r.PassRate != nil && r.PassRateCI != nil && r.PassRateCI.Method != "" {
		ci := r.PassRateCI
		fmt.Fprintf(&b, "pass rate: %.3f %s (%d/%d graded trials; ", *r.PassRate, FormatInterval(ci.Low, ci.High, ci.Method, f3), r.Passes, r.Graded)
		if ci.Method == IntervalExact {
			fmt.Fprintf(&b, "%.0f%% exact Clopper–Pearson over the %d cases, as every case had the same verdict; other intervals: %.0f%% bootstrap over cases, %d resamples, seed %d)\n",
				100*r.Confidence, r.ScoredCases, 100*r.Confidence, r.Resamples, r.Seed)
		} else {
			fmt.Fprintf(&b, "every case has the same pass rate, so a bootstrap over cases has no spread; other intervals: %.0f%% bootstrap over cases, %d resamples, seed %d)\n",
				100*r.Confidence, r.Resamples, r.Seed)
		}
	} else if r.PassRate != nil {
		fmt.Fprintf(&b, "pass rate: %.3f", *r.PassRate)
		if r.PassRateCI != nil {
			fmt.Fprintf(&b, " [%.3f, %.3f]", r.PassRateCI.Low, r.PassRateCI.High)
		}
		if r.Adaptive != nil {
			// Not passes/graded: the stopping rule biases that ratio.
			fmt.Fprintf(&b, " (mean of the cases' unbiased estimates; %.0f%% bootstrap over cases, %d resamples, seed %d)\n",
				100*r.Confidence, r.Resamples, r.Seed)
		} else {
			fmt.Fprintf(&b, " (%d/%d graded trials; %.0f%% bootstrap over cases, %d resamples, seed %d)\n",
				r.Passes, r.Graded, 100*r.Confidence, r.Resamples, r.Seed)
		}
	} else {
		b.WriteString("pass rate: n/a (no graded trial)\n")
	}
	if m := r.MeanScore; m != nil {
		fmt.Fprintf(&b, "mean score: %.3f %s (mean over %s of their graded trials' scores; %s)\n",
			m.Mean, FormatInterval(m.Low, m.High, m.Method, f3), caseCount(m.Cases), meanScoreMethod(m.Method, r.Confidence))
	}
	if a := r.Adaptive; a != nil {
		writeAdaptive(&b, a, counts.Passed, counts.Graded)
	}
	if len(r.PassAt) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "k\tpass@k\t95% CI\tpass^k\t95% CI\tcases")
		for k := 1; k <= len(r.PassAt); k++ {
			key := strconv.Itoa(k)
			a, ok := r.PassAt[key]
			if !ok {
				continue
			}
			e := r.PassExp[key]
			mark := ""
			if k == r.K {
				mark = " *"
			}
			fmt.Fprintf(tw, "%d%s\t%.3f\t%s\t%.3f\t%s\t%d\n",
				k, mark, a.Mean, FormatInterval(a.Low, a.High, a.Method, f3), e.Mean, FormatInterval(e.Low, e.High, e.Method, f3), a.Cases)
		}
		tw.Flush()
		if r.PassAtK != nil {
			fmt.Fprintf(&b, "* k=%d, the trials asked per case\n", r.K)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "note: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// AddCount counts one case from its per-case counts (as ReadRun returns
// them), for summaries of files rather than of live runs; k is the number of
// trials asked for the case.
func (s *Summary) AddCount(cc *CaseCount, k int) {
	s.extra.Merge(cc.extra)
	s.add(cc.ID, k, cc.Trials, cc.N, cc.C, cc.Ungraded, max(0, k-cc.Trials), cc.Errors)
	if m := cc.MeanScore(); m != nil {
		s.scores = append(s.scores, *m)
	}
}

// GraderErrors counts the trials of a summary left out of n because their
// grader failed (grader_error, grader_timeout, grader_invalid).
func GraderErrors(r schemas.TrialsSummary) int {
	return r.Errors[schemas.ErrGraderError] + r.Errors[schemas.ErrGraderTimeout] + r.Errors[schemas.ErrGraderInvalid]
}

// writeAdaptive writes the adaptive part of a summary table: the stopping
// rule, why the cases stopped, and which figures are unbiased.
func writeAdaptive(b *strings.Builder, a *schemas.AdaptiveSummary, passes, graded int) {
	fmt.Fprintf(b, "adaptive: min-k %d, max-k %d, ci-width %g; %d trials (%.1f per case); stopped: %s\n",
		a.MinK, a.MaxK, a.CIWidth, a.Trials, a.MeanTrials, ClassCounts(a.Stopped))
	if len(a.AtMaxK) > 0 {
		fmt.Fprintf(b, "still wider than %g at max-k: %s\n", a.CIWidth, idList(a.AtMaxK, 10))
	}
	if a.NaivePassRate != nil {
		fmt.Fprintf(b, "pass rate above: mean of per-case estimates unbiased under the stopping rule (the naive ratio passes/graded, %d/%d = %.3f, is biased)\n",
			passes, graded, *a.NaivePassRate)
	}
	fmt.Fprintf(b, "pass@k and pass^k below: from the first %d trials of every case, unbiased for k ≤ %d\n", a.MinK, a.MinK)
}

// PolicyNote words a counting policy that differs from the default:
// "counted as failures: timeout; left out: agent".
func PolicyNote(p *schemas.CountPolicy) string {
	var parts []string
	if len(p.FailOn) > 0 {
		parts = append(parts, "counted as failures: "+strings.Join(p.FailOn, ", "))
	}
	if len(p.LeaveOut) > 0 {
		parts = append(parts, "left out: "+strings.Join(p.LeaveOut, ", "))
	}
	if len(parts) == 0 {
		return "the default (agent failures in n, the others left out)"
	}
	return strings.Join(parts, "; ")
}

// caseCount is "1 case" or "n cases".
func caseCount(n int) string {
	if n == 1 {
		return "1 case"
	}
	return fmt.Sprintf("%d cases", n)
}
