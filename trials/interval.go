package trials

import (
	"fmt"
	"math"
	"strings"
)

// The ways an interval over cases is had. A bootstrap resamples cases, so
// when every case has the same value it has no spread and says nothing
// about uncertainty: then, if every case is a plain pass or fail (all 1 or
// all 0), the exact Clopper–Pearson interval over the cases stands in;
// otherwise the interval is the point, and the summary says so.
const (
	// IntervalBootstrap: the percentile bootstrap over cases.
	IntervalBootstrap = "bootstrap"
	// IntervalExact: Clopper–Pearson over the cases, each a pass or fail.
	IntervalExact = "exact"
	// IntervalNone: every case has the same value, not 0 or 1: no
	// interval can be had from the sample.
	IntervalNone = "none"
)

// ClopperPearson returns the exact (Clopper–Pearson) binomial interval at
// confidence conf for c successes in n trials. ok is false when n < 1 or
// c is outside 0..n.
func ClopperPearson(c, n int, conf float64) (low, high float64, ok bool) {
	if n < 1 || c < 0 || c > n {
		return 0, 0, false
	}
	alpha := (1 - conf) / 2
	low, high = 0, 1
	if c > 0 {
		// P(X ≥ c; p) = alpha, rising in p.
		low = bisect(func(p float64) float64 { return 1 - binomCDF(c-1, n, p) - alpha })
	}
	if c < n {
		// P(X ≤ c; p) = alpha, falling in p.
		high = bisect(func(p float64) float64 { return alpha - binomCDF(c, n, p) })
	}
	return low, high, true
}

// bisect finds the root in [0, 1] of f, rising from negative to positive.
func bisect(f func(float64) float64) float64 {
	lo, hi := 0.0, 1.0
	for range 100 {
		mid := (lo + hi) / 2
		if f(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// binomCDF is P(X ≤ c) for X ~ Bin(n, p), summed in logarithms.
func binomCDF(c, n int, p float64) float64 {
	if c < 0 {
		return 0
	}
	if c >= n || p <= 0 {
		return 1
	}
	if p >= 1 {
		return 0
	}
	lgN, _ := math.Lgamma(float64(n + 1))
	lp, lq := math.Log(p), math.Log1p(-p)
	sum := 0.0
	for i := 0; i <= c; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgNI, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgNI + float64(i)*lp + float64(n-i)*lq)
	}
	return min(1, sum)
}

// alike reports whether every value is the same (and there is one).
func alike(values []float64) bool {
	if len(values) == 0 {
		return false
	}
	for _, v := range values[1:] {
		if v != values[0] {
			return false
		}
	}
	return true
}

// casesInterval is the 95% interval of the mean of per-case values: the
// bootstrap over cases, or, when every case has the same value, the exact
// interval (all 0 or all 1) or none; method says which. With resamples
// below 1 the bootstrap is off and the interval is the point.
func casesInterval(values []float64, seed uint64, resamples int) (low, high float64, method string) {
	m := mean(values)
	if resamples < 1 || len(values) == 0 {
		return m, m, IntervalBootstrap
	}
	if alike(values) {
		if v := values[0]; v == 0 || v == 1 {
			lo, hi, _ := ClopperPearson(int(v)*len(values), len(values), DefaultConfidence)
			return lo, hi, IntervalExact
		}
		return m, m, IntervalNone
	}
	lo, hi, _ := BootstrapMean(values, seed, resamples, DefaultConfidence)
	return lo, hi, IntervalBootstrap
}

// intervalNotes collects, by method, the figures whose interval is not the
// bootstrap, for one note each.
type intervalNotes struct {
	exact, none []string
	cases       int
}

func (n *intervalNotes) add(name, method string, cases int) {
	switch method {
	case IntervalExact:
		n.exact = append(n.exact, name)
	case IntervalNone:
		n.none = append(n.none, name)
	default:
		return
	}
	n.cases = max(n.cases, cases)
}

// warnings words the notes.
func (n *intervalNotes) warnings() []string {
	var out []string
	if len(n.exact) > 0 {
		out = append(out, fmt.Sprintf("every case has the same verdict for %s (all pass or all fail): resampling cases has no spread, so the interval is the exact Clopper–Pearson 95%% interval over the %d cases",
			strings.Join(n.exact, ", "), n.cases))
	}
	if len(n.none) > 0 {
		out = append(out, fmt.Sprintf("every case has the same value for %s: resampling cases has no spread, so no interval can be estimated from the sample (it is shown as the point)",
			strings.Join(n.none, ", ")))
	}
	return out
}

// methodField is the method as a summary's JSON has it: empty for the
// bootstrap.
func methodField(method string) string {
	if method == IntervalBootstrap {
		return ""
	}
	return method
}

// MethodNote names, once per page or table, how a summary's intervals
// are had: "95% intervals: percentile bootstrap over cases (1000
// resamples, seed 1); where every case has the same verdict, exact
// (Clopper–Pearson over the cases)". resamples below 1: no bootstrap.
func MethodNote(confidence float64, resamples int, seed uint64) string {
	if resamples < 1 {
		return "no intervals: the bootstrap is off (resamples < 1)"
	}
	return fmt.Sprintf("%.0f%% intervals: percentile bootstrap over cases (%d resamples, seed %d); where every case has the same verdict, exact (Clopper–Pearson over the cases)",
		100*confidence, resamples, seed)
}

// FormatInterval words an interval of a summary for people, each end
// formatted by f: "[low, high]" for the bootstrap, "[low, high] exact" for
// the exact interval, "no interval" where none could be estimated.
func FormatInterval(low, high float64, method string, f func(float64) string) string {
	switch method {
	case IntervalNone:
		return "no interval"
	case IntervalExact:
		return "[" + f(low) + ", " + f(high) + "] exact"
	}
	return "[" + f(low) + ", " + f(high) + "]"
}
