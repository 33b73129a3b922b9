package trials

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"harness/schemas"
)

// The model behind the trials-needed figures. A run of m cases with k
// trials each estimates the mean pass rate by the mean of the per-case
// rates p̂ᵢ = cᵢ/k. Across cases, Var(p̂ᵢ) = σ²_b + τ²/k, where τ² is the
// mean of pᵢ(1−pᵢ) (the variance of one trial) and σ²_b the variance of the
// true pᵢ across cases. The summary's interval resamples cases, so its
// width is about 2·z·√((σ²_b + τ²/k)/m): more trials shrink only the τ²/k
// part. A paired comparison of two agents has the same form with the
// per-case differences: Var = (σ²_d + (τ²_A + τ²_B)/k)/m.

// Pilot estimates τ² and σ²_b from a pilot run. Cases with fewer than two
// graded trials say nothing about τ² and are left out.
type Pilot struct {
	Variance schemas.PilotVariance
	// rates and trials are the per-case pass rates and graded trials of
	// the cases used, in the run's order.
	ids    []string
	rates  []float64
	trials []int
}

// PilotOf estimates the variances of a run. τ² is the mean of the unbiased
// per-case p̂(1−p̂)·n/(n−1); σ²_b is the variance of the p̂ᵢ less the mean
// sampling variance τ²ᵢ/nᵢ, and at least 0.
func PilotOf(r *Run) (Pilot, []string, error) {
	var p Pilot
	var warnings []string
	var short []string
	adaptive := 0
	for _, cc := range r.Cases {
		if cc.N < 2 {
			short = append(short, cc.ID)
			continue
		}
		p.ids = append(p.ids, cc.ID)
		rate := float64(cc.C) / float64(cc.N)
		if cc.Estimate != nil {
			// An adaptive run's c/n is biased by its stopping rule.
			rate = *cc.Estimate
			adaptive++
		}
		p.rates = append(p.rates, rate)
		p.trials = append(p.trials, cc.N)
	}
	if adaptive > 0 {
		warnings = append(warnings, fmt.Sprintf("%s is an adaptive run: its cases' unbiased pass rates are used, not c/n, which its stopping rule biases", r.File))
	}
	if len(short) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: %d case(s) with fewer than 2 graded trials are left out: %s", r.File, len(short), idList(short, 10)))
	}
	if len(p.rates) < 2 {
		return p, warnings, fmt.Errorf("%s: %d case(s) with at least 2 graded trials; a pilot needs at least 2", r.File, len(p.rates))
	}
	within, noise := 0.0, 0.0
	total := 0
	for i, q := range p.rates {
		n := float64(p.trials[i])
		w := q * (1 - q) * n / (n - 1)
		within += w
		noise += w / n
		total += p.trials[i]
	}
	m := float64(len(p.rates))
	v := &p.Variance
	v.File = r.File
	v.Cases = len(p.rates)
	v.MeanTrials = float64(total) / m
	v.PassRate = mean(p.rates)
	v.Within = within / m
	v.Between = math.Max(0, sampleVariance(p.rates)-noise/m)
	return p, warnings, nil
}

func sampleVariance(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	mu := mean(v)
	s := 0.0
	for _, x := range v {
		s += (x - mu) * (x - mu)
	}
	return s / float64(len(v)-1)
}

// normalQuantile is the q-quantile of the standard normal distribution.
func normalQuantile(q float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*q-1)
}

// trialsFor is the smallest k ≥ 1 with (between + within/k)/m ≤ target
// (ok false when between/m alone exceeds it).
func trialsFor(within, between float64, m int, target float64) (int, bool) {
	room := target*float64(m) - between
	if room <= 0 {
		return 0, false
	}
	if within <= 0 {
		return 1, true
	}
	return max(1, int(math.Ceil(within/room-1e-9))), true
}

// TrialsForWidth plans the trials per case for a 95% interval of the
// headline pass rate no wider than width, on the pilot's cases.
func (p Pilot) TrialsForWidth(width float64) schemas.WidthPlan {
	v := p.Variance
	half := width / (2 * Z95)
	plan := schemas.WidthPlan{Width: width, Floor: 2 * Z95 * math.Sqrt(v.Between/float64(v.Cases))}
	k, ok := trialsFor(v.Within, v.Between, v.Cases, half*half)
	plan.Reachable = ok
	if ok {
		plan.Trials, plan.TotalTrials = k, k*v.Cases
		return plan
	}
	perCase := v.Between + v.Within/math.Max(v.MeanTrials, 1)
	plan.CasesNeeded = int(math.Ceil(perCase / (half * half)))
	return plan
}

// PairedPilot holds two pilot runs of the same cases.
type PairedPilot struct {
	A, B Pilot
	// diffs are the per-case differences b − a of the common cases.
	diffs        []float64
	ra, rb       []float64
	na, nb       []int
	noise        float64 // mean sampling variance of a difference
	noiseA       float64 // mean sampling variance of A's rates
	withinA      float64
	withinB      float64
	between      float64
	observedDiff float64
}

// PairPilots pairs two pilots on the cases both have.
func PairPilots(a, b Pilot) (PairedPilot, error) {
	pp := PairedPilot{A: a, B: b}
	index := map[string]int{}
	for i, id := range b.ids {
		index[id] = i
	}
	for i, id := range a.ids {
		j, ok := index[id]
		if !ok {
			continue
		}
		pp.ra = append(pp.ra, a.rates[i])
		pp.rb = append(pp.rb, b.rates[j])
		pp.na = append(pp.na, a.trials[i])
		pp.nb = append(pp.nb, b.trials[j])
		pp.diffs = append(pp.diffs, b.rates[j]-a.rates[i])
	}
	m := len(pp.diffs)
	if m < 2 {
		return pp, fmt.Errorf("%s and %s have %d common case(s) with at least 2 graded trials; a comparison needs at least 2", a.Variance.File, b.Variance.File, m)
	}
	for i := range pp.diffs {
		wa := pp.ra[i] * (1 - pp.ra[i]) * float64(pp.na[i]) / float64(pp.na[i]-1)
		wb := pp.rb[i] * (1 - pp.rb[i]) * float64(pp.nb[i]) / float64(pp.nb[i]-1)
		pp.withinA += wa / float64(m)
		pp.withinB += wb / float64(m)
		pp.noise += (wa/float64(pp.na[i]) + wb/float64(pp.nb[i])) / float64(m)
		pp.noiseA += wa / float64(pp.na[i]) / float64(m)
	}
	pp.between = math.Max(0, sampleVariance(pp.diffs)-pp.noise)
	pp.observedDiff = mean(pp.diffs)
	return pp, nil
}

// TrialsForDifference plans the trials per case per agent to detect a
// difference delta of mean pass rates with probability power at two-sided
// level alpha: (z₁₋α/₂ + z_power)²·Var ≤ delta².
func (pp PairedPilot) TrialsForDifference(delta, power, alpha float64) schemas.DifferencePlan {
	m := len(pp.diffs)
	z := normalQuantile(1-alpha/2) + normalQuantile(power)
	plan := schemas.DifferencePlan{Delta: delta, Power: power, Alpha: alpha, Cases: m,
		ObservedDiff: pp.observedDiff, Between: pp.between,
		Floor: z * math.Sqrt(pp.between/float64(m))}
	target := (delta / z) * (delta / z)
	k, ok := trialsFor(pp.withinA+pp.withinB, pp.between, m, target)
	plan.Reachable = ok
	if ok {
		plan.Trials = k
		return plan
	}
	meanN := (mean(intsToFloats(pp.na)) + mean(intsToFloats(pp.nb))) / 2
	perCase := pp.between + (pp.withinA+pp.withinB)/math.Max(meanN, 1)
	plan.CasesNeeded = int(math.Ceil(perCase / target))
	return plan
}

func intsToFloats(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// shrink pulls the rates towards their mean so that their spread is the
// estimated spread of the true rates (σ_b), not of the noisy estimates:
// the truth a simulation of the pilot's cases draws from.
func shrink(rates []float64, between float64) []float64 {
	mu := mean(rates)
	s2 := sampleVariance(rates)
	f := 0.0
	if s2 > 0 {
		f = math.Sqrt(math.Min(1, between/s2))
	}
	out := make([]float64, len(rates))
	for i, q := range rates {
		out[i] = clamp01(mu + (q-mu)*f)
	}
	return out
}

// Truth returns per-case pass rates for simulating the pilot's cases.
func (p Pilot) Truth() []float64 { return shrink(p.rates, p.Variance.Between) }

// Truth returns per-case pass rates for simulating both agents with a
// mean difference of delta: A's rates as Pilot.Truth gives them, B's
// A's plus delta plus the case's own (shrunk) deviation from the mean
// difference, kept inside [0, 1].
func (pp PairedPilot) Truth(delta float64) (a, b []float64) {
	a = shrink(pp.ra, math.Max(0, sampleVariance(pp.ra)-pp.noiseA))
	dev := shrink(pp.diffs, pp.between)
	mu := mean(dev)
	b = make([]float64, len(a))
	for i := range a {
		b[i] = clamp01(a[i] + delta + dev[i] - mu)
	}
	return a, b
}

// binomial draws the passes of k trials at rate q.
func binomial(r *rand.Rand, k int, q float64) int {
	c := 0
	for range k {
		if r.Float64() < q {
			c++
		}
	}
	return c
}

// SimulateWidth runs sims simulated runs of k trials per case at the true
// rates and returns the mean width of the interval the trials summary
// reports for the pass rate (a percentile bootstrap over cases with
// resamples resamples).
func SimulateWidth(rates []float64, k, sims int, seed uint64, resamples int) float64 {
	r := NewRand(seed)
	n := make([]int, len(rates))
	c := make([]int, len(rates))
	total := 0.0
	for s := range sims {
		for i, q := range rates {
			n[i], c[i] = k, binomial(r, k, q)
		}
		ns, cs := canonical(n, c)
		lo, hi, _ := bootstrapRatio(cs, ns, seed+uint64(s), resamples, DefaultConfidence)
		total += hi - lo
	}
	return total / float64(sims)
}

// SimulatePower runs sims simulated pairs of runs, k trials per case per
// agent at the true rates a and b, and returns the share whose paired
// bootstrap interval of the difference of mean pass rates (as compare
// computes it, at level 1−alpha) excludes zero.
func SimulatePower(a, b []float64, k, sims int, alpha float64, seed uint64, resamples int) float64 {
	r := NewRand(seed)
	ra := make([]float64, len(a))
	rb := make([]float64, len(b))
	hits := 0
	for s := range sims {
		for i := range a {
			ra[i] = float64(binomial(r, k, a[i])) / float64(k)
			rb[i] = float64(binomial(r, k, b[i])) / float64(k)
		}
		lo, hi, _ := PairedBootstrapDiff(ra, rb, seed+uint64(s), resamples, 1-alpha)
		if lo > 0 || hi < 0 {
			hits++
		}
	}
	return float64(hits) / float64(sims)
}

// WriteNeededText writes a trials-needed report for people.
func WriteNeededText(w io.Writer, r schemas.TrialsNeeded) error {
	var b strings.Builder
	pilot := func(v schemas.PilotVariance) {
		fmt.Fprintf(&b, "pilot %s: %d cases, %.1f graded trials per case, pass rate %.3f; trial variance p(1-p) %.4f, between-case variance %.4f\n",
			v.File, v.Cases, v.MeanTrials, v.PassRate, v.Within, v.Between)
	}
	pilot(r.Pilot)
	if r.Other != nil {
		pilot(*r.Other)
	}
	if p := r.Width; p != nil {
		fmt.Fprintf(&b, "\nheadline pass rate, 95%% interval at most %g wide (bootstrap over cases, as trials reports it):\n", p.Width)
		if p.Reachable {
			fmt.Fprintf(&b, "  %d trials per case (%d trials for %d cases)\n", p.Trials, p.TotalTrials, r.Pilot.Cases)
			if p.SimulatedWidth != nil {
				fmt.Fprintf(&b, "  simulated: mean width %.4f over %d runs of %d trials per case\n", *p.SimulatedWidth, p.Simulations, p.Trials)
			}
		} else {
			fmt.Fprintf(&b, "  not reachable with these %d cases: however many trials, the width stays above %.4f (the cases differ); at %.0f trials per case it needs about %d cases like these\n",
				r.Pilot.Cases, p.Floor, r.Pilot.MeanTrials, p.CasesNeeded)
		}
	}
	if d := r.Difference; d != nil {
		fmt.Fprintf(&b, "\ndetect a difference of %g in mean pass rate (B − A; observed %+.3f) with power %g at alpha %g, paired on %d common cases:\n",
			d.Delta, d.ObservedDiff, d.Power, d.Alpha, d.Cases)
		if d.Reachable {
			fmt.Fprintf(&b, "  %d trials per case for each agent (%d trials in all)\n", d.Trials, 2*d.Trials*d.Cases)
			if d.SimulatedPower != nil {
				fmt.Fprintf(&b, "  simulated: power %.3f over %d pairs of runs (paired bootstrap interval excludes 0)\n", *d.SimulatedPower, d.Simulations)
			}
		} else {
			fmt.Fprintf(&b, "  not reachable with these %d cases: however many trials, the smallest detectable difference is %.4f; at the pilots' trials per case it needs about %d cases like these\n",
				d.Cases, d.Floor, d.CasesNeeded)
		}
	}
	for _, warn := range slices.Clone(r.Warnings) {
		fmt.Fprintf(&b, "note: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
