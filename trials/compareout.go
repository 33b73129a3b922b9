package trials

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"harness/schemas"
)

// ReadRuns reads each named results file, opened with open, as a Run.
func ReadRuns(names []string, open func(name string) (io.ReadCloser, error)) ([]*Run, error) {
	runs := make([]*Run, len(names))
	for i, name := range names {
		in, err := open(name)
		if err != nil {
			return nil, err
		}
		runs[i], err = ReadRun(name, in)
		in.Close()
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// Regression is a drop of pass rate from A to B that a comparison shows
// to be real.
type Regression struct {
	// Drop is how much lower B's mean pass rate is than A's.
	Drop float64
	// PValue is McNemar's exact test's.
	PValue float64
	// Lost are the cases that passed in A and fail in B.
	Lost []string
	// UnderCovered, when set, says why the comparison decides no
	// regression: a run's pass rate is over too few of its trials (the
	// gate fails for that reason, not for a number).
	UnderCovered string
}

// Regressed reports a regression when B's pass rate is lower than A's by
// more than maxDrop and McNemar's exact test says the change is real
// (p < 0.05); nil otherwise, or when the report has no pass rates.
//
// A run under-covered (fewer than DefaultMinCoverage of its trials in n)
// decides nothing: the result is a Regression with UnderCovered saying so.
func Regressed(rep schemas.CompareReport, maxDrop float64) *Regression {
	return RegressedAt(rep, maxDrop, 0.05)
}

// RegressedAt is Regressed at the significance level alpha: a regression
// needs McNemar's p below alpha.
func RegressedAt(rep schemas.CompareReport, maxDrop, alpha float64) *Regression {
	if rep.PassRate == nil {
		return nil
	}
	if under := func(r schemas.RunSummary) bool { return r.Coverage != "" && r.Covered < DefaultMinCoverage }; under(rep.A) || under(rep.B) {
		return &Regression{UnderCovered: fmt.Sprintf("under-covered: A's pass rate is %s, B's %s; no regression can be decided until the left-out trials run again",
			rep.A.Coverage, rep.B.Coverage)}
	}
	drop := -rep.PassRate.Diff
	if drop <= maxDrop || rep.McNemar.PValue >= alpha {
		return nil
	}
	r := &Regression{Drop: drop, PValue: rep.McNemar.PValue}
	for _, cd := range rep.Cases {
		if cd.Change == "lost" {
			r.Lost = append(r.Lost, cd.ID)
		}
	}
	return r
}

// WriteCompareCSV writes a comparison of two runs as CSV, one row per
// case.
func WriteCompareCSV(out io.Writer, rep schemas.CompareReport) error {
	w := csv.NewWriter(out)
	w.Write([]string{"id", "a_n", "a_c", "a_passRate", "b_n", "b_c", "b_passRate", "delta", "change"})
	f := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	for _, c := range rep.Cases {
		w.Write([]string{c.ID, strconv.Itoa(c.A.N), strconv.Itoa(c.A.C), f(c.A.PassRate), strconv.Itoa(c.B.N), strconv.Itoa(c.B.C), f(c.B.PassRate), f(c.Delta), c.Change})
	}
	w.Flush()
	return w.Error()
}

// WriteRankingCSV writes a ranking as CSV, one row per run.
func WriteRankingCSV(out io.Writer, rk Ranking) error {
	w := csv.NewWriter(out)
	w.Write([]string{"rank", "run", "meanPassRate", "low", "high", "interval"})
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, r := range rk.Runs {
		method := r.Method
		if method == "" {
			method = IntervalBootstrap
		}
		w.Write([]string{strconv.Itoa(r.Rank), r.File, g(r.MeanPassRate), g(r.Low), g(r.High), method})
	}
	w.Flush()
	return w.Error()
}
