package trials

import (
	"strings"
	"testing"
)

func TestPlanWarnsOfFewCasesAndSimulates(t *testing.T) {
	pilot, _, err := PilotOf(simulatedRun("a", []float64{0.2, 0.5, 0.8, 0.4, 0.6}, 5, 1))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Plan(pilot, []string{"from the pilot"}, PlanOptions{Width: 0.3, Simulations: 20, Resamples: 50, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) < 2 || rep.Warnings[0] != "from the pilot" || !strings.HasPrefix(rep.Warnings[1], "only 5 cases") {
		t.Errorf("warnings %q: want the pilot's first, then the few-cases one", rep.Warnings)
	}
	if rep.Width == nil || (rep.Width.Reachable && (rep.Width.SimulatedWidth == nil || rep.Width.Simulations != 20)) {
		t.Errorf("width plan %+v: want a reachable plan checked by 20 simulations", rep.Width)
	}
	if rep.Difference != nil || rep.Other != nil {
		t.Errorf("no second pilot, yet a difference plan %+v", rep.Difference)
	}
}

func TestPlanDifference(t *testing.T) {
	rates := []float64{0.2, 0.5, 0.8, 0.4, 0.6, 0.3, 0.7, 0.5, 0.5, 0.6, 0.4, 0.2}
	a, _, _ := PilotOf(simulatedRun("a", rates, 5, 1))
	b, _, _ := PilotOf(simulatedRun("b", rates, 5, 2))
	rep, err := Plan(a, nil, PlanOptions{Width: 0.2, Other: &b, OtherWarnings: []string{"from b"}, Delta: 0.2, Power: 0.8, Alpha: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Difference == nil || rep.Other == nil || rep.Difference.SimulatedPower != nil {
		t.Errorf("difference %+v, other %+v: want a plan, unsimulated (0 simulations)", rep.Difference, rep.Other)
	}
	if len(rep.Warnings) == 0 || rep.Warnings[len(rep.Warnings)-1] != "from b" {
		t.Errorf("warnings %q: want the second pilot's", rep.Warnings)
	}
	// Other cases than a's: none in common.
	other, _, _ := PilotOf(simulatedRun("c", rates[:3], 5, 3))
	other.ids = []string{"x", "y", "z"}
	if _, err := Plan(a, nil, PlanOptions{Width: 0.2, Other: &other, Delta: 0.2, Power: 0.8, Alpha: 0.05}); err == nil {
		t.Errorf("pilots on different cases paired without an error")
	}
}
