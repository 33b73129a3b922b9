package trials

import (
	"math"
	"strings"
	"testing"
)

// Twelve cases that all passed: the bootstrap over cases has no spread,
// so the pass rate and pass@1 get the exact interval over the cases, and
// the table says so instead of "[1.000, 1.000]".
func TestAllPassingCasesGetTheExactInterval(t *testing.T) {
	s := NewSummary(1)
	for i := range 12 {
		s.Add(trialsRec(string(rune('a'+i)), 1, 1, 1))
	}
	r := s.Result(1, 200)
	ci := r.PassRateCI
	if ci == nil || ci.Method != IntervalExact || math.Abs(ci.Low-0.7353515) > 1e-6 || ci.High != 1 {
		t.Fatalf("pass rate interval %+v, want exact [0.735, 1]", ci)
	}
	if e := r.PassAt["1"]; e.Method != IntervalExact || math.Abs(e.Low-0.7353515) > 1e-6 {
		t.Errorf("pass@1 %+v", e)
	}
	var b strings.Builder
	if err := WriteSummaryTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"pass rate: 1.000 [0.735, 1.000] exact (12/12 graded trials; 95% exact Clopper–Pearson over the 12 cases, as every case had the same verdict; other intervals: 95% bootstrap over cases, 200 resamples, seed 1)",
		"[0.735, 1.000] exact",
		"note: every case has the same verdict for the pass rate, the mean score, pass@1, pass^1 (all pass or all fail)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[1.000, 1.000]") {
		t.Errorf("a zero-width interval is printed:\n%s", out)
	}
}

// Every case passed one of its two trials: no interval can be had for
// the pass rate (it is not a pass or fail per case); pass@2 (1 for every
// case) and pass^2 (0) get exact ones.
func TestAlikeCasesSayThereIsNoInterval(t *testing.T) {
	s := NewSummary(2)
	for i := range 6 {
		s.Add(trialsRec(string(rune('a'+i)), 2, 2, 1))
	}
	r := s.Result(1, 200)
	if r.PassRateCI.Method != IntervalNone || r.PassRateCI.Low != 0.5 || r.PassRateCI.High != 0.5 {
		t.Errorf("pass rate interval %+v", r.PassRateCI)
	}
	if r.PassAt["2"].Method != IntervalExact || r.PassExp["2"].Method != IntervalExact || r.PassAt["1"].Method != IntervalNone {
		t.Errorf("curves: %+v %+v", r.PassAt, r.PassExp)
	}
	var b strings.Builder
	WriteSummaryTable(&b, r)
	if out := b.String(); !strings.Contains(out, "pass rate: 0.500 no interval (6/12 graded trials; every case has the same pass rate") || !strings.Contains(out, "no interval") {
		t.Errorf("table:\n%s", out)
	}

	// A sample with spread keeps the bootstrap, its method unnamed in
	// the data.
	s = NewSummary(2)
	s.Add(trialsRec("a", 2, 2, 2))
	s.Add(trialsRec("b", 2, 2, 0))
	s.Add(trialsRec("c", 2, 2, 1))
	r = s.Result(1, 200)
	if r.PassRateCI.Method != "" || r.PassRateCI.Low >= r.PassRateCI.High {
		t.Errorf("bootstrap interval %+v", r.PassRateCI)
	}
	for _, w := range r.Warnings {
		if strings.Contains(w, "same") {
			t.Errorf("warning on a sample with spread: %s", w)
		}
	}
}

func rankRun(name string, passes ...bool) *Run {
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

// Identical runs rank alike; the next rank counts the runs above.
func TestRankTiesAreTies(t *testing.T) {
	all := []bool{true, true, true, true}
	half := []bool{true, false, true, false}
	rk := Rank([]*Run{rankRun("x", all...), rankRun("y", all...), rankRun("z", half...), rankRun("w", all...)}, CompareOptions{Seed: 1, Resamples: 100})
	var ranks []int
	for _, r := range rk.Runs {
		ranks = append(ranks, r.Rank)
	}
	if want := []int{1, 1, 4, 1}; !slicesEqual(ranks, want) {
		t.Errorf("ranks %v, want %v", ranks, want)
	}
	if rk.Runs[0].Method != IntervalExact || rk.Runs[2].Method != "" {
		t.Errorf("interval methods %+v", rk.Runs)
	}
	var b strings.Builder
	WriteRankingText(&b, rk)
	if !strings.Contains(b.String(), "1     x    1.000      [0.398, 1.000] exact") {
		t.Errorf("ranking text:\n%s", b.String())
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Twelve cases that all flipped: every difference is −1, the paired
// bootstrap has no spread, and the comparison says there is no interval
// instead of "[-1.000, -1.000]".
func TestAllFlippedHasNoInterval(t *testing.T) {
	var a, b []bool
	for range 12 {
		a, b = append(a, true), append(b, false)
	}
	rep := Compare(rankRun("a", a...), rankRun("b", b...), CompareOptions{K: 1, Seed: 1, Resamples: 200})
	if !NoInterval(rep.PassRate) {
		t.Fatalf("pass rate difference %+v", rep.PassRate)
	}
	found := false
	for _, w := range rep.Warnings {
		found = found || strings.Contains(w, "every one of the 12 cases changed its pass rate by the same amount (-1.000)")
	}
	if !found {
		t.Errorf("warnings %v", rep.Warnings)
	}
	var out strings.Builder
	WriteCompareText(&out, rep)
	if s := out.String(); !strings.Contains(s, "B−A -1.000 (no interval: every one of the 12 cases changed by the same amount") || strings.Contains(s, "[-1.000, -1.000]") {
		t.Errorf("compare text:\n%s", s)
	}
	// Mixed changes keep the interval.
	rep = Compare(rankRun("a", true, true, false, true), rankRun("b", false, true, false, false), CompareOptions{K: 1, Seed: 1, Resamples: 200})
	if NoInterval(rep.PassRate) {
		t.Errorf("mixed changes: %+v", rep.PassRate)
	}
}
