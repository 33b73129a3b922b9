package trials

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"harness/schemas"
)

// CompareOptions set the k of the pass@k difference and the bootstrap.
type CompareOptions struct {
	K         int    // pass@K difference; 0 means 1
	Seed      uint64 // bootstrap seed
	Resamples int    // bootstrap resamples; < 1 disables the bootstrap
}

// Compare compares run b against run a on their common cases: per-case
// deltas of pass@K, McNemar's exact test on per-case outcomes (a case
// passes when a strict majority of its graded trials passed; with one trial
// that trial's verdict), and paired bootstrap intervals of the differences
// of mean pass rate and mean pass@K. Cases present in one run only are
// listed apart; cases without a graded trial in a run are "not comparable";
// cases whose content hash differs between the runs (the same id, another
// prompts line) are "changed", listed apart in ChangedCases, and enter no
// statistic.
func Compare(a, b *Run, opt CompareOptions) schemas.CompareReport {
	k := max(opt.K, 1)
	rep := schemas.CompareReport{
		Type:          schemas.CompareType,
		A:             runSummary(a),
		B:             runSummary(b),
		K:             k,
		OnlyInA:       []string{},
		OnlyInB:       []string{},
		NotComparable: []string{},
		Cases:         []schemas.CaseDelta{},
		McNemar:       schemas.McNemarResult{Method: "exact binomial, two-sided", PValue: 1},
	}
	var (
		outA, outB   []bool
		rateA, rateB []float64
		atA, atB     []float64
		shortK       int
	)
	for _, ca := range a.Cases {
		cb := b.Case(ca.ID)
		if cb == nil {
			rep.OnlyInA = append(rep.OnlyInA, ca.ID)
			continue
		}
		rep.CommonCases++
		d := schemas.CaseDelta{ID: ca.ID, A: side(ca, k), B: side(cb, k), Change: "not comparable"}
		if ca.Hash != "" && cb.Hash != "" && ca.Hash != cb.Hash {
			// The same id, another case: a difference of the case,
			// not of the agent.
			d.Change = "changed"
			rep.ChangedCases = append(rep.ChangedCases, ca.ID)
			rep.Cases = append(rep.Cases, d)
			continue
		}
		if ca.N == 0 || cb.N == 0 {
			rep.NotComparable = append(rep.NotComparable, ca.ID)
			rep.Cases = append(rep.Cases, d)
			continue
		}
		pa, pb := *d.A.Pass, *d.B.Pass
		outA, outB = append(outA, pa), append(outB, pb)
		switch {
		case !pa && pb:
			d.Change = "gained"
		case pa && !pb:
			d.Change = "lost"
		default:
			d.Change = "same"
		}
		rateA, rateB = append(rateA, *d.A.PassRate), append(rateB, *d.B.PassRate)
		if d.A.PassAtK != nil && d.B.PassAtK != nil {
			delta := *d.B.PassAtK - *d.A.PassAtK
			d.Delta = &delta
			atA, atB = append(atA, *d.A.PassAtK), append(atB, *d.B.PassAtK)
		} else {
			shortK++
		}
		rep.Cases = append(rep.Cases, d)
	}
	for _, cb := range b.Cases {
		if a.Case(cb.ID) == nil {
			rep.OnlyInB = append(rep.OnlyInB, cb.ID)
		}
	}
	m, _ := McNemarExact(outA, outB)
	rep.McNemar.Cases = len(outA)
	rep.McNemar.BothPass, rep.McNemar.OnlyA, rep.McNemar.OnlyB, rep.McNemar.BothFail = m.BothPass, m.OnlyA, m.OnlyB, m.BothFail
	rep.McNemar.PValue = m.P
	rep.PassRate = diffEstimate(1, rateA, rateB, opt)
	rep.PassAtK = diffEstimate(k, atA, atB, opt)

	if n := len(rep.OnlyInA) + len(rep.OnlyInB); n > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d case(s) are in one run only and enter no statistic (%d only in A, %d only in B)",
			n, len(rep.OnlyInA), len(rep.OnlyInB)))
	}
	if len(rep.ChangedCases) > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d common case(s) changed between the runs (their prompts lines differ: content hash) and enter no statistic: %s",
			len(rep.ChangedCases), idList(rep.ChangedCases, 10)))
	}
	if len(rep.NotComparable) > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d common case(s) have no graded trial in a run and enter no statistic: %s",
			len(rep.NotComparable), idList(rep.NotComparable, 10)))
	}
	if why := CoverageDiffers(rep.A, rep.B, DefaultMinCoverage, 0.05); why != "" {
		rep.Warnings = append(rep.Warnings, why)
	}
	if rep.CommonCases == 0 {
		rep.Warnings = append(rep.Warnings, "the runs have no case in common: nothing to compare")
	}
	if shortK > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d comparable case(s) have fewer than k=%d graded trials in a run and are left out of the pass@%d difference",
			shortK, k, k))
	}
	if len(outA) > 0 && rep.PassAtK == nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("no common case has k=%d graded trials in both runs: there is no pass@%d difference", k, k))
	}
	if opt.Resamples < 1 {
		rep.Warnings = append(rep.Warnings, "bootstrap disabled (resamples < 1): intervals have zero width")
	} else {
		for _, x := range []struct {
			d    *schemas.DiffEstimate
			a, b []float64
		}{{rep.PassRate, rateA, rateB}, {rep.PassAtK, atA, atB}} {
			if x.d == nil || (x.d == rep.PassAtK && x.d.K == 1) || !sameChange(x.a, x.b) {
				continue
			}
			name := "mean pass rate"
			if x.d == rep.PassAtK {
				name = fmt.Sprintf("mean pass@%d", x.d.K)
			}
			what := fmt.Sprintf("changed its %s by the same amount (%+.3f)", strings.TrimPrefix(name, "mean "), x.d.Diff)
			if x.d.Diff == 0 {
				what = fmt.Sprintf("has the same %s in both runs", strings.TrimPrefix(name, "mean "))
			}
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("every one of the %d cases %s: the paired bootstrap has no spread, so the difference has no interval; McNemar's exact test (p = %.4g) is the evidence",
				x.d.Cases, what, rep.McNemar.PValue))
		}
	}
	return rep
}

func runSummary(r *Run) schemas.RunSummary {
	s := schemas.RunSummary{File: r.File, Kind: r.Kind, Cases: len(r.Cases)}
	var all Counts
	var scores []float64
	for _, c := range r.Cases {
		all.Merge(c.Counts())
		if m := c.MeanScore(); m != nil {
			scores = append(scores, *m)
		}
		s.Trials += c.Trials
		s.Graded += c.N
		s.Passes += c.C
		s.Ungraded += c.Ungraded
		for class, v := range c.Errors {
			if s.Errors == nil {
				s.Errors = map[string]int{}
			}
			s.Errors[class] += v
		}
	}
	if s.Graded > 0 {
		rate := float64(s.Passes) / float64(s.Graded)
		s.PassRate = &rate
	}
	s.LeftOut, s.Failures = all.LeftOut, all.Failures
	if s.LeftOut == nil && len(all.Errors) > 0 {
		s.LeftOut = maps.Clone(all.Errors)
	}
	s.Coverage, s.Covered = all.Coverage(), all.Covered()
	if len(scores) > 0 {
		m := mean(scores)
		s.MeanScore = &m
	}
	return s
}

// CoverageDiffers says, when two runs' pass rates are over different
// shares of their trials (more than minGap apart, or either under
// minCov), why they are not comparable at face value; "" when they are.
func CoverageDiffers(a, b schemas.RunSummary, minCov, minGap float64) string {
	if a.Covered >= minCov && b.Covered >= minCov && math.Abs(a.Covered-b.Covered) <= minGap {
		return ""
	}
	return fmt.Sprintf("coverage differs: A's pass rate is %s, B's %s; a run that lost trials to the infrastructure, the grader or its configuration is not comparable at face value",
		a.Coverage, b.Coverage)
}

func side(c *CaseCount, k int) schemas.CaseSide {
	s := schemas.CaseSide{N: c.N, C: c.C}
	if len(c.Errors) > 0 {
		s.Errors = maps.Clone(c.Errors)
	}
	if c.N == 0 {
		return s
	}
	rate := float64(c.C) / float64(c.N)
	pass := 2*c.C > c.N
	s.PassRate, s.Pass = &rate, &pass
	if at, err := PassAtK(c.N, c.C, k); err == nil {
		s.PassAtK = &at
	}
	return s
}

func diffEstimate(k int, a, b []float64, opt CompareOptions) *schemas.DiffEstimate {
	if len(a) == 0 {
		return nil
	}
	d := &schemas.DiffEstimate{K: k, Cases: len(a), MeanA: mean(a), MeanB: mean(b),
		Confidence: DefaultConfidence, Seed: opt.Seed, Resamples: opt.Resamples}
	d.Diff = d.MeanB - d.MeanA
	d.Low, d.High = d.Diff, d.Diff
	if lo, hi, ok := PairedBootstrapDiff(a, b, opt.Seed, opt.Resamples, DefaultConfidence); ok {
		d.Low, d.High = lo, hi
	}
	return d
}

// sameChange reports whether every case's value moved by the same amount
// from a to b: then resampling the cases has no spread, and the paired
// bootstrap gives no interval of the difference.
func sameChange(a, b []float64) bool {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = b[i] - a[i]
	}
	return alike(d)
}

// NoInterval reports whether a difference's interval could not be
// estimated: the bootstrap ran, and every case changed by the same amount
// (the interval is the point).
func NoInterval(d *schemas.DiffEstimate) bool {
	return d != nil && d.Resamples >= 1 && d.Cases > 0 && d.Low == d.High
}

// WriteCompareText writes a comparison for people: the two runs, the paired
// statistics, the cases that changed, and the cases in one run only.
func WriteCompareText(w io.Writer, r schemas.CompareReport) error {
	var b strings.Builder
	rate := func(p *float64) string {
		if p == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", *p)
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tfile\tcases\ttrials\tgraded\tpassed\tpass rate\tmean score\tleft out")
	for _, s := range []struct {
		name string
		r    schemas.RunSummary
	}{{"A", r.A}, {"B", r.B}} {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", s.name, s.r.File, s.r.Cases, s.r.Trials, s.r.Graded, s.r.Passes, rate(s.r.PassRate), rate(s.r.MeanScore), ClassCounts(cmpOr(s.r.LeftOut, s.r.Errors)))
	}
	tw.Flush()
	for _, s := range []struct {
		name string
		r    schemas.RunSummary
	}{{"A", r.A}, {"B", r.B}} {
		if s.r.PassRate != nil && s.r.Coverage != "" {
			fmt.Fprintf(&b, "%s: pass %.1f%% %s", s.name, 100**s.r.PassRate, s.r.Coverage)
			if len(s.r.Failures) > 0 {
				fmt.Fprintf(&b, "; failed by the agent: %s", ClassCounts(s.r.Failures))
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "\ncommon cases: %d (comparable: %d)\n", r.CommonCases, r.McNemar.Cases)
	for _, d := range []*schemas.DiffEstimate{r.PassRate, r.PassAtK} {
		if d == nil || (d == r.PassAtK && d.K == 1) {
			continue
		}
		name := fmt.Sprintf("mean pass@%d", d.K)
		if d == r.PassRate {
			name = "mean pass rate"
		}
		if NoInterval(d) {
			fmt.Fprintf(&b, "%s: A %.3f  B %.3f  B−A %+.3f (no interval: every one of the %d cases changed by the same amount, so the paired bootstrap has no spread)\n",
				name, d.MeanA, d.MeanB, d.Diff, d.Cases)
			continue
		}
		fmt.Fprintf(&b, "%s: A %.3f  B %.3f  B−A %+.3f [%+.3f, %+.3f] (%.0f%% paired bootstrap over %d cases, %d resamples, seed %d)\n",
			name, d.MeanA, d.MeanB, d.Diff, d.Low, d.High, 100*d.Confidence, d.Cases, d.Resamples, d.Seed)
	}
	m := r.McNemar
	fmt.Fprintf(&b, "McNemar (%s): both pass %d, only A %d, only B %d, both fail %d; p = %.4g\n",
		m.Method, m.BothPass, m.OnlyA, m.OnlyB, m.BothFail, m.PValue)
	var changed []schemas.CaseDelta
	for _, c := range r.Cases {
		if c.Change == "gained" || c.Change == "lost" {
			changed = append(changed, c)
		}
	}
	if len(changed) > 0 {
		b.WriteString("\nchanged cases:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  id\tchange\tA c/n\tB c/n\tΔ pass@%d\n", r.K)
		for _, c := range changed {
			delta := "n/a"
			if c.Delta != nil {
				delta = fmt.Sprintf("%+.3f", *c.Delta)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%d/%d\t%s\n", c.ID, c.Change, c.A.C, c.A.N, c.B.C, c.B.N, delta)
		}
		tw.Flush()
	}
	if len(r.ChangedCases) > 0 {
		fmt.Fprintf(&b, "\ncases that changed between the runs, not compared (%d): %s\n", len(r.ChangedCases), strings.Join(r.ChangedCases, ", "))
	}
	if len(r.OnlyInA) > 0 {
		fmt.Fprintf(&b, "\nonly in A (%d): %s\n", len(r.OnlyInA), strings.Join(r.OnlyInA, ", "))
	}
	if len(r.OnlyInB) > 0 {
		fmt.Fprintf(&b, "only in B (%d): %s\n", len(r.OnlyInB), strings.Join(r.OnlyInB, ", "))
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "note: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cmpOr(m, or map[string]int) map[string]int {
	if len(m) > 0 {
		return m
	}
	return or
}

// ClassCounts formats counts by error class as "class n, class n", in class
// order, or "-" when there are none.
func ClassCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
