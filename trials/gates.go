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
)

// Gate is one threshold a run must reach: --min-pass-rate X,
// --min-pass-at K=X or --min-pass-exp K=X.
type Gate struct {
	Metric string  // GatePassRate, GatePassAt or GatePassExp
	K      int     // for GatePassAt and GatePassExp
	Min    float64 // 0..1
}

// String writes the gate as its flag.
func (g Gate) String() string {
	if g.Metric == GatePassRate {
		return fmt.Sprintf("--min-pass-rate %g", g.Min)
	}
	return fmt.Sprintf("--min-%s %d=%g", g.Metric, g.K, g.Min)
}

// ParseGates reads the gate flags: minPassRate is the value of
// --min-pass-rate ("" for none), minPassAt and minPassExp the values of
// the repeatable --min-pass-at and --min-pass-exp ("K=X" each). Thresholds
// are fractions in 0..1.
func ParseGates(minPassRate string, minPassAt, minPassExp []string) ([]Gate, error) {
	var gates []Gate
	if strings.TrimSpace(minPassRate) != "" {
		x, err := parseFraction(minPassRate)
		if err != nil {
			return nil, fmt.Errorf("--min-pass-rate: %w", err)
		}
		gates = append(gates, Gate{Metric: GatePassRate, Min: x})
	}
	for _, spec := range []struct {
		metric string
		values []string
	}{{GatePassAt, minPassAt}, {GatePassExp, minPassExp}} {
		for _, v := range spec.values {
			k, x, err := parseKX(v)
			if err != nil {
				return nil, fmt.Errorf("--min-%s %q: %w", spec.metric, v, err)
			}
			gates = append(gates, Gate{Metric: spec.metric, K: k, Min: x})
		}
	}
	return gates, nil
}

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
// summary (nothing graded, or no case with K graded trials) fails.
func CheckGates(gates []Gate, s schemas.TrialsSummary) []string {
	var fails []string
	for _, g := range gates {
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
