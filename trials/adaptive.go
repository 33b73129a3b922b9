package trials

import (
	"fmt"
	"math"
	"slices"

	"harness/schemas"
)

// Stop reasons of an adaptive run.
const (
	// StopWidth: the case's Wilson 95% interval is at most CIWidth wide.
	StopWidth = "width"
	// StopMaxK: the case reached MaxK trials first.
	StopMaxK = "max-k"
	// StopUngraded: none of the case's first MinK trials got a verdict
	// (every one hit an infrastructure error): more would most likely
	// fail the same way (--resume --retry-errors runs them again).
	StopUngraded = "ungraded"
	// StopBudget: the run's budget ended it before the policy did; its
	// trials stay in the partial file and --resume continues it.
	StopBudget = "budget"
)

// Estimators of an adaptive case's pass rate.
const (
	// EstimatorRaoBlackwell is E[first trials' pass rate | n, c] under the
	// stopping rule: unbiased, and it uses every trial.
	EstimatorRaoBlackwell = "rao-blackwell"
	// EstimatorFirstMinK is the pass rate of the first MinK trials alone.
	EstimatorFirstMinK = "first-min-k"
)

// MaxAdaptiveK is the largest MaxK a policy may have: the estimator's table
// grows with its square.
const MaxAdaptiveK = 1000

// Policy is the stopping rule of an adaptive trials run. Every case gets
// MinK trials. After that, whenever every trial a case was given has
// finished, the case stops if its Wilson 95% interval (over its graded
// trials) is at most CIWidth wide (StopWidth), it has been given MaxK
// trials (StopMaxK), or none of its trials was graded (StopUngraded);
// otherwise it is given more: half the gap to the
// number of trials that would reach the width at its current pass rate,
// at least one and at most up to MaxK.
//
// A decision depends only on how many trials the case was given and its
// graded and passed counts, never on time or on other cases, so a run
// gives the same trials to a case whatever the concurrency, and a resumed
// run continues exactly where the policy left off (see Replay).
type Policy struct {
	MinK    int
	MaxK    int
	CIWidth float64
}

// Check returns an error naming the first bad field of p.
func (p Policy) Check() error {
	switch {
	case p.MinK < 1:
		return fmt.Errorf("min-k=%d: must be at least 1", p.MinK)
	case p.MaxK < p.MinK:
		return fmt.Errorf("max-k=%d: must be at least min-k=%d", p.MaxK, p.MinK)
	case p.MaxK > MaxAdaptiveK:
		return fmt.Errorf("max-k=%d: must be at most %d", p.MaxK, MaxAdaptiveK)
	case !(p.CIWidth > 0 && p.CIWidth <= 1):
		return fmt.Errorf("ci-width=%g: must be in (0, 1]", p.CIWidth)
	}
	return nil
}

// WilsonWidth is the width of the Wilson 95% interval of c passes in n
// trials (1 when n is 0).
func WilsonWidth(c, n int) float64 {
	lo, hi, ok := Wilson(c, n, Z95)
	if !ok {
		return 1
	}
	return hi - lo
}

// wilsonWidthAt is the Wilson 95% width at pass rate p over n trials,
// continuous in n (for planning).
func wilsonWidthAt(p float64, n int) float64 {
	nf := float64(n)
	z2 := Z95 * Z95
	return 2 * Z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / (1 + z2/nf)
}

// Decide is the policy's decision for a case that was given asked trials,
// all finished, n of them graded and c passed: a stop reason, or how many
// more trials to give it.
func (p Policy) Decide(asked, n, c int) (stop string, more int) {
	if asked < p.MinK {
		return "", p.MinK - asked
	}
	if n >= 1 && WilsonWidth(c, n) <= p.CIWidth {
		return StopWidth, 0
	}
	if n == 0 {
		return StopUngraded, 0
	}
	if asked >= p.MaxK {
		return StopMaxK, 0
	}
	left := p.MaxK - asked
	rate := float64(c) / float64(n)
	// The smallest total that reaches the width at this rate; the width
	// falls as the total grows.
	lo, hi := n+1, n+left
	if wilsonWidthAt(rate, hi) > p.CIWidth {
		lo = hi
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if wilsonWidthAt(rate, mid) <= p.CIWidth {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	more = (lo - n + 1) / 2
	return "", min(max(more, 1), left)
}

// Verdict is how one finished trial counts for the policy.
type Verdict int8

// The verdicts of a finished trial.
const (
	VerdictExcluded Verdict = iota // left out of n (an error, or no grader)
	VerdictFail
	VerdictPass
)

// VerdictOf is how a capture record counts under the counting policy, as
// in BuildRecordFailing.
func VerdictOf(r *schemas.CaptureRecord, counting Counting) Verdict {
	pass, excluded := OutcomeUnder(r, counting)
	switch {
	case excluded == "" && pass:
		return VerdictPass
	case excluded == "":
		return VerdictFail
	}
	return VerdictExcluded
}

// Replay follows the policy over a case's finished trials (verdicts keyed
// by trial number, 1-based): asked is how many trials the policy has given
// the case so far, and stop is its stop reason, or "" while some of trials
// 1..asked have not finished. Trials numbered above asked are ignored.
func (p Policy) Replay(finished map[int]Verdict) (asked int, stop string) {
	asked = p.MinK
	n, c := 0, 0
	from := 1
	for {
		for t := from; t <= asked; t++ {
			v, ok := finished[t]
			if !ok {
				return asked, ""
			}
			if v != VerdictExcluded {
				n++
			}
			if v == VerdictPass {
				c++
			}
		}
		from = asked + 1
		stop, more := p.Decide(asked, n, c)
		if stop != "" {
			return asked, stop
		}
		asked += more
	}
}

// Estimator computes a case's pass rate without the bias of an adaptive
// stopping rule: the Rao–Blackwell estimator E[c₀/MinK | n, c], where c₀
// counts the passes among the first MinK trials. c₀/MinK is unbiased
// because every case gets its first MinK trials whatever happens; given
// where a case stopped (n trials, c passes), every sequence of outcomes
// the policy could have followed to stop there is equally likely
// (each has probability pᶜ(1−p)ⁿ⁻ᶜ), so the conditional mean is a ratio
// of path counts, which a dynamic programme over the policy's decision
// points gives. Conditioning on a sufficient statistic keeps it unbiased
// and makes its variance no larger than c₀/MinK's.
//
// The counts assume every trial was graded: a case with trials left out
// of n falls back to its first MinK trials (EstimatorFirstMinK).
type Estimator struct {
	p Policy
	// all[n][c] is the number of outcome sequences that reach decision
	// point (n, c) under the policy, divided by C(n, c); first[n][c] the
	// same weighted by c₀/MinK.
	all, first [][]float64
}

// NewEstimator builds the estimator of policy p (which must pass Check).
// It takes O(MaxK² · step) time once; estimates are then lookups.
func NewEstimator(p Policy) *Estimator {
	e := &Estimator{p: p, all: make([][]float64, p.MaxK+1), first: make([][]float64, p.MaxK+1)}
	for n := range e.all {
		e.all[n] = make([]float64, n+1)
		e.first[n] = make([]float64, n+1)
	}
	lf := make([]float64, 2*p.MaxK+2) // log factorials
	for i := 1; i < len(lf); i++ {
		lf[i] = lf[i-1] + math.Log(float64(i))
	}
	lchoose := func(n, k int) float64 { return lf[n] - lf[k] - lf[n-k] }
	m := p.MinK
	for c := 0; c <= m; c++ {
		e.all[m][c] = 1
		e.first[m][c] = float64(c) / float64(m)
	}
	for n := m; n <= p.MaxK; n++ {
		for c := 0; c <= n; c++ {
			w, w1 := e.all[n][c], e.first[n][c]
			if w == 0 {
				continue
			}
			stop, more := p.Decide(n, n, c)
			if stop != "" {
				continue
			}
			// C(n,c)·C(more,j) of the C(n+more, c+j) sequences to
			// (n+more, c+j) pass through (n, c) as a decision point.
			for j := 0; j <= more; j++ {
				h := math.Exp(lchoose(n, c) + lchoose(more, j) - lchoose(n+more, c+j))
				e.all[n+more][c+j] += w * h
				e.first[n+more][c+j] += w1 * h
			}
		}
	}
	return e
}

// Policy returns the policy the estimator is for.
func (e *Estimator) Policy() Policy { return e.p }

// Estimate returns the unbiased pass rate of a case that stopped with c
// passes in n graded trials and no trial excluded; ok is false when the
// policy cannot stop at (n, c).
func (e *Estimator) Estimate(n, c int) (rate float64, ok bool) {
	if n < e.p.MinK || n > e.p.MaxK || c < 0 || c > n || e.all[n][c] == 0 {
		return 0, false
	}
	if stop, _ := e.p.Decide(n, n, c); stop == "" {
		return 0, false
	}
	return clamp01(e.first[n][c] / e.all[n][c]), true
}

// BuildAdaptiveRecord makes the trials record of a case an adaptive run
// has stopped: BuildRecordFailing over its trials (k is the number the
// policy gave it), plus the Adaptive part with the stop reason, the counts
// of the first MinK trials and the unbiased pass rate.
func BuildAdaptiveRecord(c schemas.PromptCase, recs []schemas.CaptureRecord, est *Estimator, failOn Counting) schemas.TrialsRecord {
	p := est.Policy()
	finished := make(map[int]Verdict, len(recs))
	for i := range recs {
		finished[recs[i].Trial] = VerdictOf(&recs[i], failOn)
	}
	asked, stop := p.Replay(finished)
	kept := slices.DeleteFunc(slices.Clone(recs), func(r schemas.CaptureRecord) bool { return r.Trial > asked })
	tr := BuildRecordFailing(c, asked, kept, failOn)
	a := &schemas.AdaptiveCase{MinK: p.MinK, MaxK: p.MaxK, CIWidth: p.CIWidth, Stop: stop}
	for t := 1; t <= p.MinK; t++ {
		switch finished[t] {
		case VerdictPass:
			a.FirstC++
			a.FirstN++
		case VerdictFail:
			a.FirstN++
		}
	}
	if tr.N == asked && len(kept) == asked {
		if rate, ok := est.Estimate(tr.N, tr.C); ok {
			a.PassRate, a.Estimator = &rate, EstimatorRaoBlackwell
		}
	}
	if a.PassRate == nil && a.FirstN > 0 {
		rate := float64(a.FirstC) / float64(a.FirstN)
		a.PassRate, a.Estimator = &rate, EstimatorFirstMinK
	}
	switch stop {
	case StopMaxK:
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("stopped at max-k=%d trials with the interval still wider than %g", p.MaxK, p.CIWidth))
	case StopUngraded:
		tr.Warnings = append(tr.Warnings, fmt.Sprintf("stopped after %d trials without a graded one", asked))
	}
	tr.Adaptive = a
	return tr
}

// AdaptiveNote is what an adaptive summary says about its figures.
func AdaptiveNote(minK int) string {
	return fmt.Sprintf("adaptive run: passRate is the mean of the cases' Rao-Blackwell estimates, unbiased under the stopping rule; "+
		"pass@k and pass^k are from the first %d trials of every case (unbiased for k ≤ %d); per-case c/n and naivePassRate are biased by the stopping rule", minK, minK)
}
