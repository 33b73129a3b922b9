package trials

import (
	"fmt"
	"strconv"
	"strings"

	"harness/schemas"
)

// Gate metrics.
const (
	GatePassRate = "pass-rate" // the pooled pass rate of the summary
	GatePassAt   = "pass-at"   // the mean pass@K of the summary
	GatePassExp  = "pass-exp"  // the mean pass^K of the summary
	GateCoverage = "coverage"  // the share of the asked trials in n
)

// DefaultMinCoverage is the coverage every gate needs when none is set:
// a pass rate over fewer of the asked trials (the others left out for
// infrastructure, grader or configuration failures) decides no gate.
const DefaultMinCoverage = 0.9

// Gate is one threshold a run must reach: a minimum pooled pass rate, or
// a minimum mean pass@K or pass^K.
type Gate struct {
	Metric string  // GatePassRate, GatePassAt or GatePassExp
	K      int     // for GatePassAt and GatePassExp
	Min    float64 // 0..1
}

// String writes the gate for people: "pass rate >= 0.8", "pass@3 >= 0.6".
func (g Gate) String() string {
	switch g.Metric {
	case GatePassRate:
		return fmt.Sprintf("pass rate >= %g", g.Min)
	case GatePassAt:
		return fmt.Sprintf("pass@%d >= %g", g.K, g.Min)
	case GatePassExp:
		return fmt.Sprintf("pass^%d >= %g", g.K, g.Min)
	case GateCoverage:
		return fmt.Sprintf("coverage >= %g", g.Min)
	}
	return fmt.Sprintf("%s %d >= %g", g.Metric, g.K, g.Min)
}

// ParseKX reads a "K=X" threshold: K a whole number >= 1, X a fraction.
func ParseKX(s string) (int, float64, error) { return parseKX(s) }

// ParseFraction reads a threshold: a number between 0 and 1.
func ParseFraction(s string) (float64, error) { return parseFraction(s) }

func parseKX(s string) (int, float64, error) {
	ks, xs, ok := strings.Cut(s, "=")
	if !ok {
		return 0, 0, fmt.Errorf("want K=X, as in 5=0.8")
	}
	k, err := strconv.Atoi(strings.TrimSpace(ks))
	if err != nil || k < 1 {
		return 0, 0, fmt.Errorf("k must be a whole number ≥ 1, got %q", ks)
	}
	x, err := parseFraction(xs)
	if err != nil {
		return 0, 0, err
	}
	return k, x, nil
}

func parseFraction(s string) (float64, error) {
	s = strings.TrimSpace(s)
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if x < 0 || x > 1 || x != x {
		return 0, fmt.Errorf("%q must be a fraction between 0 and 1 (0.8, not 80)", s)
	}
	return x, nil
}

// CheckGates evaluates the gates against a summary and returns one line per
// failed gate (nil when all pass). A gate whose metric is absent from the
// summary (nothing graded, or no case with K graded trials) fails. A run
// under-covered (fewer of its asked trials in n than the coverage gate,
// DefaultMinCoverage when none is given) fails every gate for that reason,
// not for a number.
func CheckGates(gates []Gate, s schemas.TrialsSummary) []string {
	if len(gates) == 0 {
		return nil
	}
	minCov := DefaultMinCoverage
	for _, g := range gates {
		if g.Metric == GateCoverage {
			minCov = g.Min
		}
	}
	// Grader failures have their own gate, and trials run without a
	// grader have no verdict to cover: the coverage gate is about the
	// trials the infrastructure or the configuration lost.
	c := CountsOf(s)
	lost := c.LeftOutCount() - GraderErrors(s) - c.Ungraded
	if asked := c.Trials + c.Missing; asked > 0 && lost > 0 && float64(asked-lost)/float64(asked) < minCov {
		return []string{fmt.Sprintf("coverage >= %g: the run is under-covered, its pass rate is %s (%.1f%% covered); it decides no gate until the left-out trials run again",
			minCov, c.Coverage(), 100*float64(asked-lost)/float64(asked))}
	}
	var fails []string
	for _, g := range gates {
		if g.Metric == GateCoverage {
			continue
		}
		var (
			got   float64
			have  bool
			label string
		)
		switch g.Metric {
		case GatePassRate:
			label = "pass rate"
			if s.PassRate != nil {
				got, have = *s.PassRate, true
			}
		case GatePassAt, GatePassExp:
			curve := s.PassAt
			label = fmt.Sprintf("pass@%d", g.K)
			if g.Metric == GatePassExp {
				curve, label = s.PassExp, fmt.Sprintf("pass^%d", g.K)
			}
			if e, ok := curve[strconv.Itoa(g.K)]; ok {
				got, have = e.Mean, true
			}
		default:
			fails = append(fails, fmt.Sprintf("%s: unknown gate metric %q", g, g.Metric))
			continue
		}
		switch {
		case !have:
			fails = append(fails, fmt.Sprintf("%s: %s is not available (no case has enough graded trials)", g, label))
		case got < g.Min:
			fails = append(fails, fmt.Sprintf("%s: %s is %.4f, below %g", g, label, got, g.Min))
		}
	}
	return fails
}
