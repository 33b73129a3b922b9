package trials

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"harness/schemas"
)

// RankedRun, RankPair and Ranking are the ranking's data format, kept
// with the others in package schemas (harness schemas Ranking).
type (
	RankedRun = schemas.RankedRun
	RankPair  = schemas.RankPair
	Ranking   = schemas.Ranking
)

// Rank ranks runs by mean per-case pass rate over the cases every run has
// with a graded trial (runs with the same mean share a rank), with seeded
// bootstrap intervals (exact ones where every case is alike), and tests every
// pair with McNemar's exact test (a case passes when a strict majority of
// its graded trials passed), the p-values corrected with Holm's method.
func Rank(runs []*Run, opt CompareOptions) Ranking {
	rk := Ranking{Type: schemas.RankingType, Alpha: 0.05, Seed: opt.Seed}
	var common []string
	for _, c := range runs[0].Cases {
		ok := c.N > 0
		for _, r := range runs[1:] {
			if cc := r.Case(c.ID); cc == nil || cc.N == 0 {
				ok = false
			}
		}
		if ok {
			common = append(common, c.ID)
		}
	}
	rk.Cases = len(common)
	if len(common) == 0 {
		rk.Warnings = append(rk.Warnings, "no case has a graded trial in every run: nothing to rank")
	}
	outcomes := make([][]bool, len(runs))
	var notes intervalNotes
	for i, r := range runs {
		rates := make([]float64, 0, len(common))
		for _, id := range common {
			c := r.Case(id)
			rates = append(rates, float64(c.C)/float64(c.N))
			outcomes[i] = append(outcomes[i], 2*c.C > c.N)
		}
		rr := RankedRun{File: r.File, MeanPassRate: mean(rates)}
		var method string
		rr.Low, rr.High, method = casesInterval(rates, opt.Seed, opt.Resamples)
		rr.Method = methodField(method)
		notes.add("the mean pass rate of "+r.File, method, len(rates))
		rk.Runs = append(rk.Runs, rr)
	}
	// Ties are ties: a run's rank is one more than the number of runs with
	// a higher mean pass rate (1, 1, 3), so identical runs rank alike.
	for i := range rk.Runs {
		rk.Runs[i].Rank = 1
		for j := range rk.Runs {
			if rk.Runs[j].MeanPassRate > rk.Runs[i].MeanPassRate {
				rk.Runs[i].Rank++
			}
		}
	}
	rk.Warnings = append(rk.Warnings, notes.warnings()...)
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			m, _ := McNemarExact(outcomes[i], outcomes[j])
			rk.Pairs = append(rk.Pairs, RankPair{A: runs[i].File, B: runs[j].File, OnlyA: m.OnlyA, OnlyB: m.OnlyB, P: m.P})
		}
	}
	holm(rk.Pairs, rk.Alpha)
	return rk
}

// holm sets the Holm-corrected p-values of the pairs and which are
// significant at alpha.
func holm(pairs []RankPair, alpha float64) {
	idx := make([]int, len(pairs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return pairs[idx[a]].P < pairs[idx[b]].P })
	m := len(pairs)
	running := 0.0
	stop := false
	for rank, i := range idx {
		adj := min(1, float64(m-rank)*pairs[i].P)
		running = max(running, adj) // adjusted p-values never decrease
		pairs[i].PHolm = running
		if !stop && pairs[i].P <= alpha/float64(m-rank) {
			pairs[i].Significant = true
		} else {
			stop = true
		}
	}
}

// WriteRankingText writes a ranking for people.
func WriteRankingText(w io.Writer, rk Ranking) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d runs ranked on the %d cases graded in every run (mean per-case pass rate, 95%% bootstrap over cases, seed %d)\n\n", len(rk.Runs), rk.Cases, rk.Seed)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\trun\tpass rate\t95% CI")
	runs := slices.Clone(rk.Runs)
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Rank < runs[j].Rank })
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%s\n", r.Rank, r.File, r.MeanPassRate, FormatInterval(r.Low, r.High, r.Method, func(x float64) string { return fmt.Sprintf("%.3f", x) }))
	}
	tw.Flush()
	b.WriteString("\npairwise McNemar (exact), Holm-corrected:\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "A\tB\tonly A\tonly B\tp\tp (Holm)\t")
	for _, p := range rk.Pairs {
		mark := ""
		if p.Significant {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.4f\t%.4f\t%s\n", p.A, p.B, p.OnlyA, p.OnlyB, p.P, p.PHolm, mark)
	}
	tw.Flush()
	fmt.Fprintf(&b, "* significant at %.2f after correction\n", rk.Alpha)
	for _, warn := range rk.Warnings {
		fmt.Fprintf(&b, "note: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
