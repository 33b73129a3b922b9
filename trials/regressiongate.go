package trials

import (
	"fmt"
	"strings"

	"harness/schemas"
)

// RegressionGate is a comparison gate: a run fails it when its mean pass
// rate is lower than the baseline's by more than MaxDrop and McNemar's
// exact test on the cases' outcomes gives a p-value below Alpha.
type RegressionGate struct {
	// Baseline names the run the others are compared with.
	Baseline string
	// MaxDrop is the largest drop of mean pass rate allowed (0..1).
	MaxDrop float64
	// Alpha is the significance level.
	Alpha float64
}

// RegressionVerdict is a comparison gate decided for one run.
type RegressionVerdict struct {
	// Run is the run compared with the baseline, Baseline the baseline.
	Run      string `json:"agent"`
	Baseline string `json:"baseline"`
	// Failed says the run failed the gate.
	Failed bool `json:"failed"`
	// Reason says why, in one sentence.
	Reason  string  `json:"reason"`
	MaxDrop float64 `json:"maxRegression"`
	Alpha   float64 `json:"significance"`
	// BaselinePassRate and PassRate are the mean pass rates over the
	// cases both runs graded; Drop is the first less the second. Absent
	// when no case was graded in both.
	BaselinePassRate *float64 `json:"baselinePassRate,omitempty"`
	PassRate         *float64 `json:"passRate,omitempty"`
	Drop             *float64 `json:"drop,omitempty"`
	// PValue is McNemar's exact test's, on the cases both graded.
	PValue float64 `json:"pValue"`
	// Lost are the cases the baseline passes and the run fails.
	Lost []string `json:"lost,omitempty"`
}

// Decide decides the gate for the comparison rep of the baseline (A)
// with run (B). A comparison with no case graded in both runs fails: the
// gate cannot be passed by running nothing.
func (g RegressionGate) Decide(run string, rep schemas.CompareReport) RegressionVerdict {
	v := RegressionVerdict{Run: run, Baseline: g.Baseline, MaxDrop: g.MaxDrop, Alpha: g.Alpha, PValue: rep.McNemar.PValue}
	for _, cd := range rep.Cases {
		if cd.Change == "lost" {
			v.Lost = append(v.Lost, cd.ID)
		}
	}
	if rep.PassRate == nil {
		v.Failed = true
		v.Reason = fmt.Sprintf("%s: no case was graded in both %s and %s, so the comparison with the baseline cannot be made", run, g.Baseline, run)
		return v
	}
	d := rep.PassRate
	base, got, drop := d.MeanA, d.MeanB, -d.Diff
	v.BaselinePassRate, v.PassRate, v.Drop = &base, &got, &drop
	rates := fmt.Sprintf("%s: pass rate %.3f against %.3f for the baseline %s", run, got, base, g.Baseline)
	lost := fmt.Sprintf("%d lost", len(v.Lost))
	if len(v.Lost) > 0 {
		lost += ": " + listCases(v.Lost, 10)
	}
	switch {
	case drop > g.MaxDrop && v.PValue < g.Alpha:
		v.Failed = true
		v.Reason = fmt.Sprintf("%s, a drop of %.3f, over the %g allowed, and significant (McNemar p = %.4f < %g; %s)", rates, drop, g.MaxDrop, v.PValue, g.Alpha, lost)
	case drop > g.MaxDrop:
		v.Reason = fmt.Sprintf("%s, a drop of %.3f, over the %g allowed but not significant (McNemar p = %.4f, not below %g; %s)", rates, drop, g.MaxDrop, v.PValue, g.Alpha, lost)
	default:
		v.Reason = fmt.Sprintf("%s, a change of %+.3f, within the %g drop allowed (McNemar p = %.4f; %s)", rates, -drop, g.MaxDrop, v.PValue, lost)
	}
	return v
}

// listCases joins up to max case ids, saying how many more there are.
func listCases(ids []string, max int) string {
	if len(ids) <= max {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:max], ", "), len(ids)-max)
}
