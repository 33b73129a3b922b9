package trials

import (
	"math"
	"strings"
	"testing"
)

// TestHolm: the textbook example (p = 0.01, 0.04, 0.03, 0.005 at 0.05):
// adjusted 0.03, 0.06, 0.06, 0.02; the first two smallest significant.
func TestHolm(t *testing.T) {
	pairs := []RankPair{{P: 0.01}, {P: 0.04}, {P: 0.03}, {P: 0.005}}
	holm(pairs, 0.05)
	want := []float64{0.03, 0.06, 0.06, 0.02}
	sig := []bool{true, false, false, true}
	for i := range pairs {
		if math.Abs(pairs[i].PHolm-want[i]) > 1e-12 || pairs[i].Significant != sig[i] {
			t.Errorf("pair %d: pHolm %v significant %v, want %v %v", i, pairs[i].PHolm, pairs[i].Significant, want[i], sig[i])
		}
	}
}

func TestRank(t *testing.T) {
	run := func(name string, passes ...bool) *Run {
		r := &Run{File: name, index: map[string]int{}}
		for i, p := range passes {
			c := &CaseCount{ID: string(rune('a' + i)), N: 1}
			if p {
				c.C = 1
			}
			r.index[c.ID] = len(r.Cases)
			r.Cases = append(r.Cases, c)
		}
		return r
	}
	all := func(v bool) []bool {
		out := make([]bool, 12)
		for i := range out {
			out[i] = v
		}
		return out
	}
	rk := Rank([]*Run{run("weak", all(false)...), run("strong", all(true)...), run("mid", append(all(true)[:6], all(false)[:6]...)...)},
		CompareOptions{Seed: 1, Resamples: 200})
	if rk.Cases != 12 || rk.Runs[1].Rank != 1 || rk.Runs[2].Rank != 2 || rk.Runs[0].Rank != 3 || rk.Runs[1].MeanPassRate != 1 {
		t.Fatalf("ranking %+v", rk.Runs)
	}
	if len(rk.Pairs) != 3 || !rk.Pairs[0].Significant || rk.Pairs[0].P > 0.001 {
		t.Errorf("pairs %+v", rk.Pairs)
	}
	var b strings.Builder
	WriteRankingText(&b, rk)
	if !strings.Contains(b.String(), "1     strong") {
		t.Errorf("text:\n%s", b.String())
	}
}
