package trials

import (
	"fmt"
	"math"
	"testing"

	"harness/schemas"
)

// generatedSuite is m cases with known pass rates, drawn by a seeded
// generator the way agent benchmarks tend to look: 35% of the cases always
// pass, 20% never do, and 45% are flaky with a pass rate uniform in
// [0.05, 0.95].
func generatedSuite(m int, seed uint64) []float64 {
	r := NewRand(seed)
	rates := make([]float64, m)
	for i := range rates {
		switch u := r.Float64(); {
		case u < 0.35:
			rates[i] = 1
		case u < 0.55:
			rates[i] = 0
		default:
			rates[i] = 0.05 + 0.9*r.Float64()
		}
	}
	return rates
}

// fixedKWidth is the widest Wilson 95% interval k graded trials can leave
// a case with (at c = k/2): the per-case width a fixed -k run guarantees.
func fixedKWidth(k int) float64 {
	w := 0.0
	for c := 0; c <= k; c++ {
		w = math.Max(w, WilsonWidth(c, k))
	}
	return w
}

// savingRun simulates one adaptive run and one fixed -k run of the suite
// and returns their trials and headline interval widths.
type savingRun struct {
	adaptiveTrials, fixedTrials int
	adaptiveWidth, fixedWidth   float64
	widest                      float64 // widest per-case interval of the adaptive run
}

func simulateSaving(r interface{ Float64() float64 }, rates []float64, k int, est *Estimator, seed uint64) savingRun {
	var out savingRun
	p := est.Policy()
	adaptive, fixed := NewSummary(p.MinK), NewSummary(k)
	for i, q := range rates {
		id := fmt.Sprint(i)
		recs := simulateCase(r, id, q, p)
		tr := BuildAdaptiveRecord(schemas.PromptCase{ID: id}, recs, est, Counting{})
		out.adaptiveTrials += len(tr.Trials)
		out.widest = math.Max(out.widest, tr.PassRateCI.High-tr.PassRateCI.Low)
		adaptive.Add(tr)
		c := 0
		for range k {
			if r.Float64() < q {
				c++
			}
		}
		fixed.add(id, k, k, k, c, 0, 0, nil)
		out.fixedTrials += k
	}
	a, f := adaptive.Result(seed, 200), fixed.Result(seed, 200)
	out.adaptiveWidth = a.PassRateCI.High - a.PassRateCI.Low
	out.fixedWidth = f.PassRateCI.High - f.PassRateCI.Low
	return out
}

// simulateCase runs one case under the policy with pass rate rate and
// returns its capture records.
func simulateCase(r interface{ Float64() float64 }, id string, rate float64, p Policy) []schemas.CaptureRecord {
	var recs []schemas.CaptureRecord
	finished := map[int]Verdict{}
	for {
		asked, stop := p.Replay(finished)
		if stop != "" {
			return recs
		}
		for t := len(recs) + 1; t <= asked; t++ {
			pass := r.Float64() < rate
			score := 0.0
			finished[t] = VerdictFail
			if pass {
				score = 1
				finished[t] = VerdictPass
			}
			recs = append(recs, schemas.CaptureRecord{ID: id, Trial: t, Score: &schemas.GraderResult{Pass: pass, Score: score}})
		}
	}
}

// On the generated suite, --adaptive with --ci-width set to the widest
// interval fixed -k 40 can leave (and --max-k 40) gives every case an
// interval at least as narrow as fixed -k does, with at least 40% fewer
// trials.
func TestAdaptiveSavesTrials(t *testing.T) {
	const k, m, runs = 40, 100, 40
	policy := Policy{MinK: 5, MaxK: k, CIWidth: fixedKWidth(k)}
	est := NewEstimator(policy)
	r := NewRand(2026)
	var adaptive, fixed int
	var aw, fw float64
	for i := range runs {
		s := simulateSaving(r, generatedSuite(m, uint64(i)), k, est, uint64(i))
		if s.widest > policy.CIWidth+1e-12 {
			t.Fatalf("run %d: an adaptive case ends with an interval %.4f wide, wider than fixed -k %d's %.4f", i, s.widest, k, policy.CIWidth)
		}
		adaptive += s.adaptiveTrials
		fixed += s.fixedTrials
		aw += s.adaptiveWidth
		fw += s.fixedWidth
	}
	saved := 1 - float64(adaptive)/float64(fixed)
	t.Logf("per-case width ≤ %.4f: adaptive %.1f trials per case, fixed -k %d; saved %.1f%%; headline interval width adaptive %.4f, fixed %.4f",
		policy.CIWidth, float64(adaptive)/(runs*m), k, 100*saved, aw/runs, fw/runs)
	if saved < 0.40 {
		t.Errorf("adaptive saved %.1f%% of the trials, want at least 40%%", 100*saved)
	}
}

// BenchmarkAdaptiveTrials reports the trials an adaptive run spends on the
// generated suite against fixed -k 40, for the same per-case width.
func BenchmarkAdaptiveTrials(b *testing.B) {
	const k, m = 40, 100
	policy := Policy{MinK: 5, MaxK: k, CIWidth: fixedKWidth(k)}
	est := NewEstimator(policy)
	r := NewRand(2026)
	var adaptive, fixed int
	var aw, fw float64
	for i := 0; i < b.N; i++ {
		s := simulateSaving(r, generatedSuite(m, uint64(i)), k, est, uint64(i))
		adaptive += s.adaptiveTrials
		fixed += s.fixedTrials
		aw += s.adaptiveWidth
		fw += s.fixedWidth
	}
	b.ReportMetric(float64(adaptive)/float64(b.N*m), "trials/case")
	b.ReportMetric(float64(fixed)/float64(b.N*m), "fixed-trials/case")
	b.ReportMetric(100*(1-float64(adaptive)/float64(fixed)), "saved%")
	b.ReportMetric(aw/float64(b.N), "headline-width")
	b.ReportMetric(fw/float64(b.N), "fixed-headline-width")
}
