package trials

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// neededSuite is a suite of known pass rates: some settled cases, many
// flaky ones.
func neededSuite(m int) []float64 {
	rates := make([]float64, m)
	for i := range rates {
		switch i % 5 {
		case 0:
			rates[i] = 1
		case 1:
			rates[i] = 0.1 + 0.8*float64(i)/float64(m)
		case 2:
			rates[i] = 0.5
		case 3:
			rates[i] = 0.9 - 0.6*float64(i)/float64(m)
		default:
			rates[i] = 0.7
		}
	}
	return rates
}

// oraclePilot is a pilot whose variances are the true ones.
func oraclePilot(rates []float64) Pilot {
	p := Pilot{rates: rates}
	within := 0.0
	for _, q := range rates {
		within += q * (1 - q)
	}
	mu := mean(rates)
	between := 0.0
	for _, q := range rates {
		between += (q - mu) * (q - mu)
	}
	p.Variance.Cases = len(rates)
	p.Variance.MeanTrials = 5
	p.Variance.Within = within / float64(len(rates))
	p.Variance.Between = between / float64(len(rates))
	return p
}

// simulatedRun is a pilot run of k trials per case at the true rates.
func simulatedRun(name string, rates []float64, k int, seed uint64) *Run {
	r := NewRand(seed)
	run := &Run{File: name, index: map[string]int{}}
	for i, q := range rates {
		id := fmt.Sprintf("c%d", i)
		run.index[id] = i
		run.Cases = append(run.Cases, &CaseCount{ID: id, Trials: k, N: k, C: binomial(r, k, q)})
	}
	return run
}

// The width plan agrees with simulation: at the planned k, the interval
// harness trials reports has a mean width within 10% of the target, and at
// two thirds of k it is wider than the target.
func TestTrialsForWidthMatchesSimulation(t *testing.T) {
	truth := neededSuite(60)
	for _, width := range []float64{0.18, 0.14} {
		plan := oraclePilot(truth).TrialsForWidth(width)
		if !plan.Reachable {
			t.Fatalf("width %g: unreachable (floor %g)", width, plan.Floor)
		}
		at := SimulateWidth(truth, plan.Trials, 300, 7, 400)
		fewer := SimulateWidth(truth, plan.Trials*2/3, 300, 8, 400)
		t.Logf("width %g: k=%d, simulated width %.4f; at k=%d %.4f", width, plan.Trials, at, plan.Trials*2/3, fewer)
		if at > width*1.1 || at < width*0.85 {
			t.Errorf("width %g: simulated width %.4f at the planned k=%d", width, at, plan.Trials)
		}
		if fewer <= width {
			t.Errorf("width %g: at k=%d the simulated width %.4f already reaches it: the plan asks too many", width, plan.Trials*2/3, fewer)
		}
	}
	// From a simulated pilot of 8 trials per case instead of the truth.
	pilot, _, err := PilotOf(simulatedRun("pilot", truth, 8, 3))
	if err != nil {
		t.Fatal(err)
	}
	plan := pilot.TrialsForWidth(0.15)
	at := SimulateWidth(truth, plan.Trials, 300, 9, 400)
	t.Logf("from a pilot: k=%d, simulated width %.4f", plan.Trials, at)
	if !plan.Reachable || at > 0.15*1.2 || at < 0.15*0.8 {
		t.Errorf("from a pilot: k=%d gives width %.4f, not within 20%% of 0.15", plan.Trials, at)
	}
	// A width below what the cases' spread allows is unreachable.
	narrow := oraclePilot(truth).TrialsForWidth(0.05)
	if narrow.Reachable || narrow.Floor <= 0.05 || narrow.CasesNeeded <= 60 {
		t.Errorf("width 0.05: %+v", narrow)
	}
}

// The difference plan agrees with simulation: at the planned k the share of
// simulated pairs of runs whose paired bootstrap interval excludes zero is
// within 0.07 of the asked power, and at a third of k it is well below.
func TestTrialsForDifferenceMatchesSimulation(t *testing.T) {
	const m = 50
	a := make([]float64, m)
	b := make([]float64, m)
	for i := range a {
		a[i] = 0.25 + 0.4*float64(i%10)/10
		b[i] = a[i] + 0.1 + 0.04*float64(i%3-1)
	}
	oracle := func(x []float64) Pilot {
		p := oraclePilot(x)
		p.ids = make([]string, m)
		p.trials = make([]int, m)
		for i := range p.ids {
			p.ids[i] = fmt.Sprint(i)
			p.trials[i] = 1 << 20 // the truth: no sampling noise
		}
		return p
	}
	pp, err := PairPilots(oracle(a), oracle(b))
	if err != nil {
		t.Fatal(err)
	}
	plan := pp.TrialsForDifference(0.1, 0.8, 0.05)
	if !plan.Reachable {
		t.Fatalf("unreachable: %+v", plan)
	}
	power := SimulatePower(a, b, plan.Trials, 600, 0.05, 11, 400)
	weak := SimulatePower(a, b, max(1, plan.Trials/3), 600, 0.05, 12, 400)
	t.Logf("k=%d: simulated power %.3f; at k=%d %.3f", plan.Trials, power, max(1, plan.Trials/3), weak)
	if math.Abs(power-0.8) > 0.07 {
		t.Errorf("simulated power %.3f at the planned k=%d, want 0.8 ± 0.07", power, plan.Trials)
	}
	if weak > 0.7 {
		t.Errorf("at k=%d the simulated power is already %.3f: the plan asks too many", max(1, plan.Trials/3), weak)
	}
	// From simulated pilots of 6 trials per case.
	pa, _, err := PilotOf(simulatedRun("a", a, 6, 21))
	if err != nil {
		t.Fatal(err)
	}
	pb, _, err := PilotOf(simulatedRun("b", b, 6, 22))
	if err != nil {
		t.Fatal(err)
	}
	pp, err = PairPilots(pa, pb)
	if err != nil {
		t.Fatal(err)
	}
	plan = pp.TrialsForDifference(0.1, 0.8, 0.05)
	power = SimulatePower(a, b, plan.Trials, 600, 0.05, 13, 400)
	t.Logf("from pilots: k=%d, simulated power %.3f", plan.Trials, power)
	if !plan.Reachable || power < 0.65 || power > 0.95 {
		t.Errorf("from pilots: k=%d gives power %.3f", plan.Trials, power)
	}
}

// An adaptive pilot gives its cases' unbiased estimates, not c/n, which
// its stopping rule biases, and says so.
func TestPilotOfAdaptiveRunUsesEstimates(t *testing.T) {
	est := func(v float64) *float64 { return &v }
	run := &Run{File: "a.jsonl", Cases: []*CaseCount{
		{ID: "a", Trials: 5, N: 5, C: 5, Estimate: est(0.9)},
		{ID: "b", Trials: 40, N: 40, C: 10, Estimate: est(0.3)},
	}}
	p, warnings, err := PilotOf(run)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Variance.PassRate; math.Abs(got-0.6) > 1e-9 {
		t.Errorf("pilot pass rate %.4f, want 0.6 (the mean of the estimates; c/n gives 0.625)", got)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "a.jsonl is an adaptive run") {
		t.Errorf("warnings %q", warnings)
	}
}
