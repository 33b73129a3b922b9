package trials

import (
	"fmt"

	"harness/schemas"
)

// PlanOptions configure Plan.
type PlanOptions struct {
	// Width is the target width of the headline pass rate's 95% interval.
	Width float64
	// Other, when set, is a pilot of a second agent on the same cases
	// (with the warnings read with it): the plan then also says how many
	// trials tell the two apart by Delta in mean pass rate with
	// probability Power at two-sided level Alpha.
	Other               *Pilot
	OtherWarnings       []string
	Delta, Power, Alpha float64
	// Simulations is how many simulated runs check each figure (0: none),
	// each with Resamples bootstrap resamples, drawn from Seed.
	Simulations int
	Resamples   int
	Seed        uint64
}

// Plan estimates from a pilot run (and the warnings read with it) the
// trials per case a run needs, as harness trials-needed reports it. The
// only error is pilots that do not pair (Other on other cases).
func Plan(pilot Pilot, warnings []string, opts PlanOptions) (schemas.TrialsNeeded, error) {
	rep := schemas.TrialsNeeded{Type: schemas.NeededType, Pilot: pilot.Variance, Warnings: warnings}
	if pilot.Variance.Cases < 10 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("only %d cases: the figures rest on a normal approximation over cases, which is rough with so few", pilot.Variance.Cases))
	}
	plan := pilot.TrialsForWidth(opts.Width)
	if plan.Reachable && opts.Simulations > 0 {
		w := SimulateWidth(pilot.Truth(), plan.Trials, opts.Simulations, opts.Seed, opts.Resamples)
		plan.SimulatedWidth, plan.Simulations = &w, opts.Simulations
		if w > 1.1*opts.Width {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the simulated runs at %d trials per case reach width %.3f, not %g: with few cases or rates near 0 or 1 the formula is optimistic; trust the simulation", plan.Trials, w, opts.Width))
		}
	}
	rep.Width = &plan
	if opts.Other == nil {
		return rep, nil
	}
	rep.Warnings = append(rep.Warnings, opts.OtherWarnings...)
	rep.Other = &opts.Other.Variance
	pp, err := PairPilots(pilot, *opts.Other)
	if err != nil {
		return rep, err
	}
	d := pp.TrialsForDifference(opts.Delta, opts.Power, opts.Alpha)
	if d.Reachable && opts.Simulations > 0 {
		a, b := pp.Truth(opts.Delta)
		p := SimulatePower(a, b, d.Trials, opts.Simulations, opts.Alpha, opts.Seed, opts.Resamples)
		d.SimulatedPower, d.Simulations = &p, opts.Simulations
		if p < opts.Power-0.1 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the simulated pairs of runs at %d trials per case reach power %.3f, not %g: with few cases, or rates so near 0 or 1 that a difference of %g does not fit, the formula is optimistic; trust the simulation", d.Trials, p, opts.Power, opts.Delta))
		}
	}
	rep.Difference = &d
	return rep, nil
}
