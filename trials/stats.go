// Package trials computes what repeated trials of prompt cases say: the
// unbiased pass@k and pass^k estimators and their curves, Wilson and
// bootstrap intervals, the per-case trials record, the aggregate summary
// over cases with its gates, and paired comparisons of two runs (McNemar's
// exact test, a paired bootstrap) and of two raters (Cohen's kappa).
//
// Every function here returns finite numbers: where a quantity is undefined
// (k larger than n, no graded trial) it says so with an error or an ok flag
// instead of returning NaN, which JSON cannot hold.
package trials

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"harness/schemas"
)

// Z95 is the standard normal quantile for a two-sided 95% interval.
const Z95 = 1.959963984540054

// PassAtK is the unbiased estimator of the probability that at least one of
// k trials passes, given c passes in n trials (Chen et al. 2021):
// 1 − C(n−c, k)/C(n, k), computed as 1 − ∏_{i=n−c+1..n} (1 − k/i) so that
// neither binomial coefficients nor factorials overflow. It needs
// 1 ≤ k ≤ n and 0 ≤ c ≤ n.
func PassAtK(n, c, k int) (float64, error) {
	if err := checkNCK(n, c, k); err != nil {
		return 0, err
	}
	if n-c < k {
		return 1, nil
	}
	if k == 1 {
		return float64(c) / float64(n), nil // exact: pass@1 is the pass rate
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return clamp01(1 - prod), nil
}

// PassExpK is the unbiased estimator of the probability that all of k trials
// pass, given c passes in n trials (Yao et al. 2024, tau-bench):
// C(c, k)/C(n, k), computed as ∏_{i=0..k−1} (c−i)/(n−i). It needs
// 1 ≤ k ≤ n and 0 ≤ c ≤ n.
func PassExpK(n, c, k int) (float64, error) {
	if err := checkNCK(n, c, k); err != nil {
		return 0, err
	}
	if c < k {
		return 0, nil
	}
	prod := 1.0
	for i := 0; i < k; i++ {
		prod *= float64(c-i) / float64(n-i)
	}
	return clamp01(prod), nil
}

func checkNCK(n, c, k int) error {
	switch {
	case n < 1:
		return fmt.Errorf("n=%d: need at least one graded trial", n)
	case c < 0 || c > n:
		return fmt.Errorf("c=%d: passes must be between 0 and n=%d", c, n)
	case k < 1:
		return fmt.Errorf("k=%d: k must be at least 1", k)
	case k > n:
		return fmt.Errorf("k=%d is larger than n=%d graded trials: the unbiased estimator is undefined", k, n)
	}
	return nil
}

// Curves returns pass@k and pass^k for k = 1..n (index k−1). Both are empty
// when n is 0.
func Curves(n, c int) (passAt, passExp []float64) {
	if n < 1 || c < 0 || c > n {
		return nil, nil
	}
	passAt = make([]float64, n)
	passExp = make([]float64, n)
	for k := 1; k <= n; k++ {
		passAt[k-1], _ = PassAtK(n, c, k)
		passExp[k-1], _ = PassExpK(n, c, k)
	}
	return passAt, passExp
}

// PlugInPassAtK is the biased plug-in estimate 1 − (1 − c/n)^k that the
// TypeScript acp-harness reports (with n = k). It is here only so tests and
// docs can show how far it is from the unbiased value.
func PlugInPassAtK(n, c, k int) float64 {
	if n < 1 {
		return 0
	}
	return 1 - math.Pow(1-float64(c)/float64(n), float64(k))
}

// Wilson returns the Wilson score interval for c successes in n trials at
// the normal quantile z (Z95 for 95%). ok is false when n is 0.
func Wilson(c, n int, z float64) (low, high float64, ok bool) {
	if n < 1 || c < 0 || c > n {
		return 0, 0, false
	}
	nf := float64(n)
	p := float64(c) / nf
	z2 := z * z
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	low, high = clamp01(center-half), clamp01(center+half)
	if c == 0 {
		low = 0
	}
	if c == n {
		high = 1
	}
	return low, high, true
}

// NewRand returns the generator every resampling in harness uses: PCG from
// math/rand/v2, seeded with (seed, seed), so a seed names one sequence.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed))
}

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted values by linear
// interpolation between closest ranks; it returns 0 for no values.
func Percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

// BootstrapMean returns a percentile bootstrap interval at confidence conf
// (0.95 for 95%) for the mean of values, resampling values with replacement
// resamples times from a generator seeded with seed. ok is false when there
// are no values or resamples < 1.
func BootstrapMean(values []float64, seed uint64, resamples int, conf float64) (low, high float64, ok bool) {
	if len(values) == 0 || resamples < 1 {
		return 0, 0, false
	}
	r := NewRand(seed)
	means := make([]float64, resamples)
	n := len(values)
	for b := range means {
		sum := 0.0
		for range n {
			sum += values[r.IntN(n)]
		}
		means[b] = sum / float64(n)
	}
	slices.Sort(means)
	alpha := (1 - conf) / 2
	return Percentile(means, alpha), Percentile(means, 1-alpha), true
}

// McNemar is the exact McNemar test on paired binary outcomes: of the cases
// both runs graded, BothPass and BothFail agree, OnlyA passed only in run A
// and OnlyB only in run B. P is the two-sided exact binomial p-value of the
// discordant counts under "no difference" (1 when there are none).
type McNemar struct {
	BothPass int     `json:"bothPass"`
	OnlyA    int     `json:"onlyA"`
	OnlyB    int     `json:"onlyB"`
	BothFail int     `json:"bothFail"`
	P        float64 `json:"pValue"`
}

// McNemarExact runs the exact (binomial, two-sided) McNemar test on paired
// outcomes a[i], b[i] of the same cases. The slices must be the same length.
func McNemarExact(a, b []bool) (McNemar, error) {
	if len(a) != len(b) {
		return McNemar{}, fmt.Errorf("mcnemar: %d outcomes in A but %d in B", len(a), len(b))
	}
	var m McNemar
	for i := range a {
		switch {
		case a[i] && b[i]:
			m.BothPass++
		case a[i]:
			m.OnlyA++
		case b[i]:
			m.OnlyB++
		default:
			m.BothFail++
		}
	}
	m.P = BinomialTwoSidedHalf(m.OnlyA, m.OnlyB)
	return m, nil
}

// BinomialTwoSidedHalf is the exact two-sided p-value of x successes against
// y failures under p = 1/2: min(1, 2·P(X ≤ min(x, y))) for X ~ Bin(x+y, 1/2).
// It works in logarithms so large counts do not underflow.
func BinomialTwoSidedHalf(x, y int) float64 {
	n := x + y
	if n == 0 {
		return 1
	}
	m := min(x, y)
	lgN, _ := math.Lgamma(float64(n + 1))
	logHalfN := float64(n) * math.Log(0.5)
	// Sum the terms in log space with the largest one factored out.
	logs := make([]float64, m+1)
	top := math.Inf(-1)
	for i := 0; i <= m; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgNI, _ := math.Lgamma(float64(n - i + 1))
		logs[i] = lgN - lgI - lgNI + logHalfN
		top = max(top, logs[i])
	}
	sum := 0.0
	for _, l := range logs {
		sum += math.Exp(l - top)
	}
	p := 2 * math.Exp(top) * sum
	return min(1, p)
}

// PairedBootstrapDiff returns a percentile bootstrap interval at confidence
// conf for mean(b) − mean(a) over paired values (a[i], b[i] belong to the
// same case): cases are resampled with replacement, keeping pairs together.
// ok is false when there are no pairs, the lengths differ or resamples < 1.
func PairedBootstrapDiff(a, b []float64, seed uint64, resamples int, conf float64) (low, high float64, ok bool) {
	if len(a) == 0 || len(a) != len(b) || resamples < 1 {
		return 0, 0, false
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = b[i] - a[i]
	}
	return BootstrapMean(d, seed, resamples, conf)
}

// CohenKappa computes Cohen's kappa for the paired labels a[i], b[i] (A
// and B are two raters; see schemas.Kappa). The
// label set is the sorted union of both, unless labels is given (then every
// label must be in it).
func CohenKappa(a, b []string, labels []string) (schemas.Kappa, error) {
	if len(a) != len(b) {
		return schemas.Kappa{}, fmt.Errorf("kappa: %d labels from A but %d from B", len(a), len(b))
	}
	if labels == nil {
		seen := map[string]bool{}
		for _, s := range append(slices.Clone(a), b...) {
			if !seen[s] {
				seen[s] = true
				labels = append(labels, s)
			}
		}
		slices.Sort(labels)
	}
	index := map[string]int{}
	for i, l := range labels {
		index[l] = i
	}
	k := schemas.Kappa{Labels: labels, Items: len(a), Confusion: make([][]int, len(labels))}
	for i := range k.Confusion {
		k.Confusion[i] = make([]int, len(labels))
	}
	for i := range a {
		ia, okA := index[a[i]]
		ib, okB := index[b[i]]
		if !okA || !okB {
			return schemas.Kappa{}, fmt.Errorf("kappa: item %d has a label outside %v", i+1, labels)
		}
		k.Confusion[ia][ib]++
	}
	if k.Items == 0 {
		k.Note = "no items to compare"
		return k, nil
	}
	n := float64(k.Items)
	for i := range labels {
		k.Observed += float64(k.Confusion[i][i]) / n
		rowSum, colSum := 0, 0
		for j := range labels {
			rowSum += k.Confusion[i][j]
			colSum += k.Confusion[j][i]
		}
		k.Expected += float64(rowSum) / n * float64(colSum) / n
	}
	if k.Expected >= 1-1e-12 {
		k.Note = "kappa is undefined: both raters used a single, identical label for every item"
		return k, nil
	}
	v := (k.Observed - k.Expected) / (1 - k.Expected)
	k.Kappa = &v
	return k, nil
}

func clamp01(x float64) float64 {
	return math.Min(1, math.Max(0, x))
}
