package view

import (
	"math"
	"sort"

	"harness/schemas"
	"harness/trials"
)

// Comparison is what the compare view shows of two or more sources on
// their common cases: each other source against the first (the baseline)
// with harness compare's paired statistics, and with more than two the
// ranking with pairwise McNemar tests Holm-corrected.
type Comparison struct {
	Sources []compareSource `json:"sources"`
	Against []versus        `json:"against"`
	// Ranking is set with three sources or more.
	Ranking *trials.Ranking `json:"ranking,omitempty"`
	K       int             `json:"k"`
}

type compareSource struct {
	ID     string `json:"src"`
	Name   string `json:"name"`
	Run    string `json:"run"`
	Totals Totals `json:"totals"`
}

// versus is one source against the baseline: B against A.
type versus struct {
	A      string                `json:"a"`
	B      string                `json:"b"`
	Report schemas.CompareReport `json:"report"`
	// Flips are the cases gained or lost, most evident first.
	Flips []flip `json:"flips"`
	// Curves are the mean differences of pass@k and pass^k for each k.
	Curves []curveDelta `json:"curves"`
	// Cost and Time are the mean per-case differences of cost (USD) and
	// of the mean trial duration (ms).
	Cost *delta `json:"cost,omitempty"`
	Time *delta `json:"time,omitempty"`
}

// flip is a case whose verdict changed, with how strongly its trials say
// so: Fisher's exact test on its passes and failures in A and in B.
type flip struct {
	ID     string  `json:"id"`
	Change string  `json:"change"`
	NA     int     `json:"nA"`
	CA     int     `json:"cA"`
	NB     int     `json:"nB"`
	CB     int     `json:"cB"`
	P      float64 `json:"p"`
	Delta  float64 `json:"delta"` // pass rate B − A
}

// delta is a mean paired difference B − A with its bootstrap interval.
type delta struct {
	Cases int     `json:"cases"`
	A     float64 `json:"a"`
	B     float64 `json:"b"`
	Diff  float64 `json:"diff"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// None says every pair changed by the same amount, so the paired
	// bootstrap has no spread and there is no interval.
	None bool `json:"none,omitempty"`
}

type curveDelta struct {
	K   int    `json:"k"`
	At  *delta `json:"at,omitempty"`
	Exp *delta `json:"exp,omitempty"`
}

// compare builds the comparison of sources (the first is the baseline);
// ix.mu is held.
func compare(srcs []*Source, k int, seed uint64, resamples int) Comparison {
	c := Comparison{K: max(k, 1)}
	runs := make([]*trials.Run, len(srcs))
	for i, s := range srcs {
		c.Sources = append(c.Sources, compareSource{ID: s.ID, Name: s.Name, Run: s.run.Name, Totals: s.totals()})
		runs[i] = trials.NewRun(s.ID, s.kind, s.counts())
	}
	opt := trials.CompareOptions{K: c.K, Seed: seed, Resamples: resamples}
	base := srcs[0].caseAggs()
	for i := 1; i < len(srcs); i++ {
		v := versus{A: srcs[0].ID, B: srcs[i].ID, Report: trials.Compare(runs[0], runs[i], opt)}
		other := srcs[i].caseAggs()
		var costA, costB, timeA, timeB []float64
		maxK := 0
		for _, id := range srcs[0].order {
			a, b := base[id], other[id]
			if a == nil || b == nil {
				continue
			}
			if a.priced && b.priced {
				costA, costB = append(costA, a.cost), append(costB, b.cost)
			}
			if a.Trials > 0 && b.Trials > 0 {
				timeA, timeB = append(timeA, float64(a.dur)/float64(a.Trials)), append(timeB, float64(b.dur)/float64(b.Trials))
			}
			if a.N == 0 || b.N == 0 {
				continue
			}
			maxK = max(maxK, min(a.N, b.N))
			chg := changeOf(b, a)
			if chg == "gained" || chg == "lost" {
				v.Flips = append(v.Flips, flip{ID: id, Change: chg, NA: a.N, CA: a.C, NB: b.N, CB: b.C,
					P:     fisherExact(a.C, a.N-a.C, b.C, b.N-b.C),
					Delta: float64(b.C)/float64(b.N) - float64(a.C)/float64(a.N)})
			}
		}
		sort.SliceStable(v.Flips, func(x, y int) bool {
			fx, fy := v.Flips[x], v.Flips[y]
			if fx.P != fy.P {
				return fx.P < fy.P
			}
			return math.Abs(fx.Delta) > math.Abs(fy.Delta)
		})
		if v.Flips == nil {
			v.Flips = []flip{}
		}
		for kk := 1; kk <= maxK; kk++ {
			var atA, atB, exA, exB []float64
			for _, id := range srcs[0].order {
				a, b := base[id], other[id]
				if a == nil || b == nil || a.N < kk || b.N < kk {
					continue
				}
				pa, _ := trials.PassAtK(a.N, a.C, kk)
				pb, _ := trials.PassAtK(b.N, b.C, kk)
				ea, _ := trials.PassExpK(a.N, a.C, kk)
				eb, _ := trials.PassExpK(b.N, b.C, kk)
				atA, atB, exA, exB = append(atA, pa), append(atB, pb), append(exA, ea), append(exB, eb)
			}
			v.Curves = append(v.Curves, curveDelta{K: kk, At: pairedDelta(atA, atB, seed, resamples), Exp: pairedDelta(exA, exB, seed, resamples)})
		}
		v.Cost = pairedDelta(costA, costB, seed, resamples)
		v.Time = pairedDelta(timeA, timeB, seed, resamples)
		c.Against = append(c.Against, v)
	}
	if len(srcs) > 2 {
		rk := trials.Rank(runs, opt)
		c.Ranking = &rk
	}
	return c
}

// pairedDelta is the mean of b − a over pairs with its paired bootstrap
// interval (nil without pairs).
func pairedDelta(a, b []float64, seed uint64, resamples int) *delta {
	if len(a) == 0 {
		return nil
	}
	d := &delta{Cases: len(a), A: mean(a), B: mean(b)}
	d.Diff = d.B - d.A
	d.Low, d.High = d.Diff, d.Diff
	if lo, hi, ok := trials.PairedBootstrapDiff(a, b, seed, resamples, trials.DefaultConfidence); ok {
		d.Low, d.High = lo, hi
		d.None = lo == hi
	}
	return d
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// fisherExact is the two-sided p-value of Fisher's exact test on the 2×2
// table [[a, b], [c, d]] (passes and failures in A, then in B): the sum
// of the probabilities of the tables with the same margins no more likely
// than the one seen.
func fisherExact(a, b, c, d int) float64 {
	r1, c1, n := a+b, a+c, a+b+c+d
	if n == 0 {
		return 1
	}
	lp := func(x int) float64 {
		return lchoose(r1, x) + lchoose(n-r1, c1-x) - lchoose(n, c1)
	}
	seen := lp(a)
	p := 0.0
	for x := max(0, c1-(n-r1)); x <= min(r1, c1); x++ {
		if l := lp(x); l <= seen+1e-9 {
			p += math.Exp(l)
		}
	}
	return math.Min(1, p)
}

func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
