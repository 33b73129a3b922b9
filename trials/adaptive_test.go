package trials

import (
	"fmt"
	"math"
	"testing"

	"harness/schemas"
)

func TestPolicyReplayAllPass(t *testing.T) {
	p := Policy{MinK: 5, MaxK: 40, CIWidth: 0.3}
	finished := map[int]Verdict{}
	asked, stop := 0, ""
	for stop == "" {
		asked, stop = p.Replay(finished)
		for tr := 1; tr <= asked; tr++ {
			finished[tr] = VerdictPass
		}
	}
	// Wilson's width at c = n is z²/(n+z²) ≤ 0.3 from n = 9 on.
	if asked != 9 || stop != StopWidth {
		t.Fatalf("all passes: asked %d, stop %q; want 9, width", asked, stop)
	}
	if w := WilsonWidth(9, 9); w > 0.3 || WilsonWidth(8, 8) <= 0.3 {
		t.Fatalf("width at 9/9 = %g, at 8/8 = %g", w, WilsonWidth(8, 8))
	}
	// Alternating outcomes do not get narrow by 30: the case stops at
	// max-k.
	p.MaxK = 30
	finished = map[int]Verdict{}
	for stop = ""; stop == ""; {
		asked, stop = p.Replay(finished)
		for tr := 1; tr <= asked; tr++ {
			finished[tr] = Verdict(1 + tr%2)
		}
	}
	if asked != 30 || stop != StopMaxK {
		t.Fatalf("alternating: asked %d, stop %q; want 30, max-k", asked, stop)
	}
	// A missing trial keeps the case waiting at the round it belongs to.
	delete(finished, 3)
	if asked, stop := p.Replay(finished); asked != 5 || stop != "" {
		t.Fatalf("trial 3 missing: asked %d, stop %q; want 5, waiting", asked, stop)
	}
}

func TestPolicyCheck(t *testing.T) {
	for _, bad := range []Policy{{0, 5, 0.3}, {5, 4, 0.3}, {5, 2000, 0.3}, {5, 10, 0}, {5, 10, 1.5}} {
		if bad.Check() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if err := (Policy{5, 40, 0.3}).Check(); err != nil {
		t.Error(err)
	}
}

// The estimator is exactly unbiased: every outcome sequence the policy can
// follow is enumerated with its probability, for several pass rates, and
// the expected estimate equals the pass rate to rounding; the naive c/n
// of the same runs is off by far more.
func TestEstimatorExactlyUnbiased(t *testing.T) {
	p := Policy{MinK: 3, MaxK: 14, CIWidth: 0.45}
	est := NewEstimator(p)
	for _, rate := range []float64{0.05, 0.2, 0.5, 0.7, 0.93} {
		var mean, naive, total float64
		var walk func(seq []bool, prob float64)
		walk = func(seq []bool, prob float64) {
			finished := map[int]Verdict{}
			c := 0
			for i, pass := range seq {
				finished[i+1] = VerdictFail
				if pass {
					finished[i+1] = VerdictPass
					c++
				}
			}
			asked, stop := p.Replay(finished)
			if stop != "" {
				if asked != len(seq) {
					t.Fatalf("stopped at %d with %d trials", asked, len(seq))
				}
				e, ok := est.Estimate(len(seq), c)
				if !ok {
					t.Fatalf("no estimate at n=%d c=%d where the policy stops", len(seq), c)
				}
				mean += prob * e
				naive += prob * float64(c) / float64(len(seq))
				total += prob
				return
			}
			walk(append(seq[:len(seq):len(seq)], true), prob*rate)
			walk(append(seq[:len(seq):len(seq)], false), prob*(1-rate))
		}
		walk(nil, 1)
		if math.Abs(total-1) > 1e-9 {
			t.Fatalf("rate %g: stopped paths have probability %g, not 1", rate, total)
		}
		if math.Abs(mean-rate) > 1e-9 {
			t.Errorf("rate %g: E[estimate] = %.12f", rate, mean)
		}
		t.Logf("rate %.2f: E[rao-blackwell] %.6f  E[c/n] %.6f", rate, mean, naive)
		if rate == 0.2 && math.Abs(naive-rate) < 0.005 {
			t.Errorf("rate %g: naive c/n is unbiased here too (%g): the enumeration shows no stopping effect", rate, naive)
		}
	}
}

// adaptiveSuite is a suite of known pass rates, most cases settled (as
// agent benchmarks are) and some flaky.
var adaptiveSuite = []float64{0, 0, 0, 0.02, 0.05, 0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 1, 1, 1, 1, 1, 1}

// The stopping rule does not leak into the headline: over many seeded
// simulated runs of a suite with known pass rates, the summary's pass
// rate (the mean of the per-case Rao-Blackwell estimates) and its pass@k /
// pass^k for k ≤ min-k (from the first min-k trials) have a bias within
// 0.004 and intervals that cover the truth at least 93% of the time (95%
// asked); each case's estimate has a bias within 4 standard errors.
// The naive figures of the same runs — passes/graded over every trial,
// and each case's c/n — fail those bounds, so the test would catch a
// summary that used them.
func TestAdaptiveSummaryUnbiased(t *testing.T) {
	const runs = 1500
	p := Policy{MinK: 5, MaxK: 40, CIWidth: 0.3}
	est := NewEstimator(p)
	r := NewRand(26)
	truthRate := mean(adaptiveSuite)
	truthExp := map[int]float64{}
	truthAt := map[int]float64{}
	for k := 1; k <= p.MinK; k++ {
		for _, q := range adaptiveSuite {
			truthExp[k] += math.Pow(q, float64(k)) / float64(len(adaptiveSuite))
			truthAt[k] += (1 - math.Pow(1-q, float64(k))) / float64(len(adaptiveSuite))
		}
	}
	var sumRate, sumNaive float64
	covered, wilsonCovered, wilsonAll := 0, 0, 0
	sumAt, sumExp := map[int]float64{}, map[int]float64{}
	caseSum := make([]float64, len(adaptiveSuite))
	caseSq := make([]float64, len(adaptiveSuite))
	caseNaive := make([]float64, len(adaptiveSuite))
	caseNaiveSq := make([]float64, len(adaptiveSuite))
	for range runs {
		s := NewSummary(p.MinK)
		for i, q := range adaptiveSuite {
			id := string(rune('a' + i))
			recs := simulateCase(r, id, q, p)
			tr := BuildAdaptiveRecord(schemas.PromptCase{ID: id}, recs, est, Counting{})
			if tr.Adaptive.Estimator != EstimatorRaoBlackwell {
				t.Fatalf("case %s: estimator %q", id, tr.Adaptive.Estimator)
			}
			e := *tr.Adaptive.PassRate
			caseSum[i] += e
			caseSq[i] += e * e
			naive := float64(tr.C) / float64(tr.N)
			caseNaive[i] += naive
			caseNaiveSq[i] += naive * naive
			wilsonAll++
			if tr.PassRateCI.Low <= q && q <= tr.PassRateCI.High {
				wilsonCovered++
			}
			s.Add(tr)
		}
		sum := s.Result(uint64(len(caseSum)), 200)
		sumRate += *sum.PassRate
		sumNaive += *sum.Adaptive.NaivePassRate
		if sum.PassRateCI.Low <= truthRate && truthRate <= sum.PassRateCI.High {
			covered++
		}
		for k := 1; k <= p.MinK; k++ {
			key := string(rune('0' + k))
			sumAt[k] += sum.PassAt[key].Mean
			sumExp[k] += sum.PassExp[key].Mean
		}
		if _, ok := sum.PassAt[string(rune('0'+p.MinK+1))]; ok {
			t.Fatalf("the summary curve goes past min-k=%d", p.MinK)
		}
	}
	bias := sumRate/runs - truthRate
	naiveBias := sumNaive/runs - truthRate
	coverage := float64(covered) / runs
	wilson := float64(wilsonCovered) / float64(wilsonAll)
	t.Logf("truth %.4f: headline bias %+.4f (naive pooled %+.4f); headline coverage %.3f; per-case Wilson coverage %.3f",
		truthRate, bias, naiveBias, coverage, wilson)
	if math.Abs(bias) > 0.004 {
		t.Errorf("headline pass rate bias %+.4f exceeds 0.004", bias)
	}
	if math.Abs(naiveBias) <= 0.004 {
		t.Errorf("naive pooled pass rate bias %+.4f is within the bound: the simulation does not show the stopping rule's effect", naiveBias)
	}
	if coverage < 0.93 {
		t.Errorf("headline interval covers the truth in %.3f of runs, want ≥ 0.93", coverage)
	}
	if wilson < 0.93 {
		t.Errorf("per-case Wilson intervals cover in %.3f of cases, want ≥ 0.93", wilson)
	}
	for k := 1; k <= p.MinK; k++ {
		if b := sumAt[k]/runs - truthAt[k]; math.Abs(b) > 0.004 {
			t.Errorf("pass@%d bias %+.4f exceeds 0.004", k, b)
		}
		if b := sumExp[k]/runs - truthExp[k]; math.Abs(b) > 0.004 {
			t.Errorf("pass^%d bias %+.4f exceeds 0.004", k, b)
		}
	}
	worstNaive := 0.0
	for i, q := range adaptiveSuite {
		m := caseSum[i] / runs
		se := math.Sqrt(math.Max(caseSq[i]/runs-m*m, 0) / runs)
		if math.Abs(m-q) > 4*se+1e-9 {
			t.Errorf("case p=%g: estimate mean %.4f, bias %+.4f beyond 4 standard errors (%.4f)", q, m, m-q, 4*se)
		}
		nm := caseNaive[i] / runs
		nse := math.Sqrt(math.Max(caseNaiveSq[i]/runs-nm*nm, 0) / runs)
		if nse > 0 {
			worstNaive = math.Max(worstNaive, math.Abs(nm-q)/nse)
		}
	}
	t.Logf("worst per-case naive c/n bias: %.1f standard errors", worstNaive)
	if worstNaive <= 4 {
		t.Errorf("per-case naive c/n stays within 4 standard errors everywhere (worst %.1f): the simulation does not show the stopping rule's effect", worstNaive)
	}
}

// A case with an excluded trial falls back to its first min-k trials.
func TestBuildAdaptiveRecordFallback(t *testing.T) {
	p := Policy{MinK: 3, MaxK: 6, CIWidth: 0.9}
	est := NewEstimator(p)
	pass := &schemas.GraderResult{Pass: true, Score: 1}
	recs := []schemas.CaptureRecord{
		{ID: "x", Trial: 1, Score: pass},
		{ID: "x", Trial: 2, Error: &schemas.ErrorInfo{Class: schemas.ErrTimeout}},
		{ID: "x", Trial: 3, Score: &schemas.GraderResult{}},
	}
	tr := BuildAdaptiveRecord(schemas.PromptCase{ID: "x"}, recs, est, Counting{})
	a := tr.Adaptive
	if a.Estimator != EstimatorFirstMinK || a.FirstN != 2 || a.FirstC != 1 || *a.PassRate != 0.5 {
		t.Fatalf("got %+v", a)
	}
	if a.Stop != StopWidth || tr.K != 3 {
		t.Fatalf("stop %q k %d", a.Stop, tr.K)
	}
}

// A case none of whose first min-k trials was graded stops there.
func TestAdaptiveStopsUngraded(t *testing.T) {
	p := Policy{MinK: 2, MaxK: 10, CIWidth: 0.3}
	crash := &schemas.ErrorInfo{Class: schemas.ErrAgentCrash}
	recs := []schemas.CaptureRecord{{ID: "x", Trial: 1, Error: crash}, {ID: "x", Trial: 2, Error: crash}}
	tr := BuildAdaptiveRecord(schemas.PromptCase{ID: "x"}, recs, NewEstimator(p), Counting{})
	if tr.Adaptive.Stop != StopUngraded || tr.K != 2 || tr.Adaptive.PassRate != nil {
		t.Fatalf("stop %q k %d passRate %v", tr.Adaptive.Stop, tr.K, tr.Adaptive.PassRate)
	}
	// With --fail-on agent_crash they count as failures: the case goes on.
	if _, stop := p.Replay(map[int]Verdict{1: VerdictOf(&recs[0], NewCounting([]string{schemas.ErrAgentCrash}, nil)), 2: VerdictFail}); stop != "" {
		t.Fatalf("counted failures: stop %q", stop)
	}
}

// The headline interval is calibrated, not just wide: when each run's cases
// are drawn from a population of pass rates (what the interval's bootstrap
// over cases stands for), the interval of the adaptive headline covers the
// population's mean pass rate, and its pass@1 curve point covers the same,
// about 95% of the time: neither under nor over.
func TestAdaptiveHeadlineCoverage(t *testing.T) {
	const runs, cases = 400, 30
	p := Policy{MinK: 5, MaxK: 40, CIWidth: 0.3}
	est := NewEstimator(p)
	r := NewRand(2611)
	truth := mean(adaptiveSuite)
	covered, coveredAt1 := 0, 0
	for run := range runs {
		s := NewSummary(p.MinK)
		for i := range cases {
			q := adaptiveSuite[r.IntN(len(adaptiveSuite))]
			id := fmt.Sprintf("c%d", i)
			s.Add(BuildAdaptiveRecord(schemas.PromptCase{ID: id}, simulateCase(r, id, q, p), est, Counting{}))
		}
		sum := s.Result(uint64(run+1), 300)
		if sum.PassRateCI.Low <= truth && truth <= sum.PassRateCI.High {
			covered++
		}
		if at1 := sum.PassAt["1"]; at1.Low <= truth && truth <= at1.High {
			coveredAt1++
		}
	}
	cov, covAt1 := float64(covered)/runs, float64(coveredAt1)/runs
	t.Logf("headline coverage %.3f, pass@1 coverage %.3f (nominal 0.95, %d runs of %d cases)", cov, covAt1, runs, cases)
	for name, c := range map[string]float64{"headline": cov, "pass@1": covAt1} {
		if c < 0.91 || c > 0.985 {
			t.Errorf("%s interval covers the population mean in %.3f of runs, want 0.91–0.985 around the nominal 0.95", name, c)
		}
	}
}
