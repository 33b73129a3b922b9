package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"harness/schemas"
	"harness/trials"
)

func newTrialsNeededCmd() *command {
	var (
		width, delta, power, alpha float64
		other, output, seed        string
		simulations, resamples     int
		js, force                  bool
	)
	c := &command{
		name:  "trials-needed",
		usage: "trials-needed RESULTS [--width W] [--compare OTHER --delta D --power P --alpha A] [--json]",
		short: "from a pilot run, the trials per case a run needs for a given interval width or to detect a difference",
		long: `trials-needed reads a pilot run (a capture or trials file with a few graded
trials per case) and estimates, from the spread of its pass rates, how many
trials per case a run of the same cases needs:

  - for the 95% interval of the headline pass rate (the bootstrap over cases
    harness trials reports) to be at most --width wide;
  - with --compare OTHER (a pilot of a second agent on the same cases), for
    each agent, to detect a difference of --delta in mean pass rate with
    probability --power at two-sided level --alpha, paired on the cases
    (as harness compare tests it).

The interval across cases never gets narrower than the cases' own spread
allows: when more trials cannot reach the target, it says so and how many
cases would. Each figure is checked by simulating runs of that many trials
from the pilot's rates (--simulations, 0 to skip). See docs/metrics.md.

Examples:
  harness trials-needed pilot.jsonl --width 0.1
  harness trials-needed a.jsonl --compare b.jsonl --delta 0.05 --power 0.8`,
		flags: pflag.NewFlagSet("trials-needed", pflag.ContinueOnError),
	}
	c.flags.Float64Var(&width, "width", 0.1, "target `width` of the headline pass rate's 95% interval")
	c.flags.StringVar(&other, "compare", "", "a pilot `file` of a second agent on the same cases: plan the trials to tell the two apart")
	c.flags.Float64Var(&delta, "delta", 0.1, "with --compare, the difference of mean pass rate to detect")
	c.flags.Float64Var(&power, "power", 0.8, "with --compare, the probability of detecting it")
	c.flags.Float64Var(&alpha, "alpha", 0.05, "with --compare, the two-sided significance level")
	c.flags.IntVar(&simulations, "simulations", 200, "simulated runs that check each figure (0: none)")
	c.flags.IntVar(&resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples` of each simulated run")
	c.flags.StringVar(&seed, "seed", "1", "simulation `seed`")
	c.flags.BoolVar(&js, "json", false, "write the report as JSON (TrialsNeeded)")
	c.flags.StringVarP(&output, "output", "o", "", "write to `file` (default stdout)")
	c.flags.BoolVar(&force, "force", false, "overwrite an existing output file")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if len(args) != 1 {
			return usageErrorf("want one pilot results file, got %d arguments", len(args))
		}
		if !(width > 0 && width <= 1) {
			return usageErrorf("--width %g: want a width in (0, 1]", width)
		}
		if other == "" {
			for _, name := range []string{"delta", "power", "alpha"} {
				if c.flags.Changed(name) {
					return usageErrorf("--%s needs --compare OTHER", name)
				}
			}
		}
		if !(delta > 0 && delta <= 1) || !(power > 0 && power < 1) || !(alpha > 0 && alpha < 1) {
			return usageErrorf("--delta must be in (0, 1], --power and --alpha in (0, 1)")
		}
		if simulations < 0 || resamples < 1 {
			return usageErrorf("--simulations must not be negative, --resamples must be positive")
		}
		sd, err := parseSeed(seed)
		if err != nil {
			return err
		}
		read := func(name string) (trials.Pilot, []string, error) {
			in, err := reviewInput(e, name)
			if err != nil {
				return trials.Pilot{}, nil, err
			}
			defer in.Close()
			run, err := trials.ReadRun(name, in)
			if err != nil {
				return trials.Pilot{}, nil, reviewInputErr(err)
			}
			p, warnings, err := trials.PilotOf(run)
			if err != nil {
				return p, nil, inputError(err)
			}
			return p, warnings, nil
		}
		pilot, warnings, err := read(args[0])
		if err != nil {
			return err
		}
		rep := schemas.TrialsNeeded{Type: schemas.NeededType, Pilot: pilot.Variance, Warnings: warnings}
		if pilot.Variance.Cases < 10 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("only %d cases: the figures rest on a normal approximation over cases, which is rough with so few", pilot.Variance.Cases))
		}
		plan := pilot.TrialsForWidth(width)
		if plan.Reachable && simulations > 0 {
			w := trials.SimulateWidth(pilot.Truth(), plan.Trials, simulations, sd, resamples)
			plan.SimulatedWidth, plan.Simulations = &w, simulations
			if w > 1.1*width {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("the simulated runs at %d trials per case reach width %.3f, not %g: with few cases or rates near 0 or 1 the formula is optimistic; trust the simulation", plan.Trials, w, width))
			}
		}
		rep.Width = &plan
		if other != "" {
			op, warnings, err := read(other)
			if err != nil {
				return err
			}
			rep.Warnings = append(rep.Warnings, warnings...)
			rep.Other = &op.Variance
			pp, err := trials.PairPilots(pilot, op)
			if err != nil {
				return inputError(err)
			}
			d := pp.TrialsForDifference(delta, power, alpha)
			if d.Reachable && simulations > 0 {
				a, b := pp.Truth(delta)
				p := trials.SimulatePower(a, b, d.Trials, simulations, alpha, sd, resamples)
				d.SimulatedPower, d.Simulations = &p, simulations
				if p < power-0.1 {
					rep.Warnings = append(rep.Warnings, fmt.Sprintf("the simulated pairs of runs at %d trials per case reach power %.3f, not %g: with few cases, or rates so near 0 or 1 that a difference of %g does not fit, the formula is optimistic; trust the simulation", d.Trials, p, power, delta))
				}
			}
			rep.Difference = &d
		}
		return writeOutput(e, output, force, func(out io.Writer) error {
			if js {
				return writePrettyJSON(out, rep)
			}
			return trials.WriteNeededText(out, rep)
		})
	}
	return c
}
