// Package neededcmd is harness trials-needed: from a pilot run, the trials per case a run needs for a given interval width or to detect a difference.
package neededcmd

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/trials"
)

// neededOptions are the flags of harness trials-needed.
type neededOptions struct {
	width, delta, power, alpha float64
	other, output, seed        string
	simulations, resamples     int
	js, force                  bool
}

const neededLong = `trials-needed reads a pilot run (a capture or trials file with a few graded
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
  harness trials-needed a.jsonl --compare b.jsonl --delta 0.05 --power 0.8`

// NewCmd returns the harness trials-needed command.
func NewCmd() *cli.Command {
	var o neededOptions
	c := &cli.Command{
		Name:  "trials-needed",
		Usage: "trials-needed RESULTS [--width W] [--compare OTHER --delta D --power P --alpha A] [--json]",
		Short: "from a pilot run, the trials per case a run needs for a given interval width or to detect a difference",
		Long:  neededLong,
		Flags: pflag.NewFlagSet("trials-needed", pflag.ContinueOnError),
	}
	c.Flags.Float64Var(&o.width, "width", 0.1, "target `width` of the headline pass rate's 95% interval")
	c.Flags.StringVar(&o.other, "compare", "", "a pilot `file` of a second agent on the same cases: plan the trials to tell the two apart")
	c.Flags.Float64Var(&o.delta, "delta", 0.1, "with --compare, the difference of mean pass rate to detect")
	c.Flags.Float64Var(&o.power, "power", 0.8, "with --compare, the probability of detecting it")
	c.Flags.Float64Var(&o.alpha, "alpha", 0.05, "with --compare, the two-sided significance level")
	c.Flags.IntVar(&o.simulations, "simulations", 200, "simulated runs that check each figure (0: none)")
	c.Flags.IntVar(&o.resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples` of each simulated run")
	c.Flags.StringVar(&o.seed, "seed", "1", "simulation `seed`")
	c.Flags.BoolVar(&o.js, "json", false, "write the report as JSON (TrialsNeeded)")
	c.Flags.StringVarP(&o.output, "output", "o", "", "write to `file` (default stdout)")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite an existing output file")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runTrialsNeeded(e, c.Flags, o, args)
	}
	return c
}

// runTrialsNeeded plans the trials of a run from the pilot args[0].
func runTrialsNeeded(e *cli.Env, fs *pflag.FlagSet, o neededOptions, args []string) error {
	if err := o.check(fs, args); err != nil {
		return err
	}
	sd, err := cli.ParseSeed(o.seed)
	if err != nil {
		return err
	}
	name, err := cli.OneResults(args[0])
	if err != nil {
		return err
	}
	pilot, warnings, err := readPilot(e, name)
	if err != nil {
		return err
	}
	opts := trials.PlanOptions{Width: o.width, Delta: o.delta, Power: o.power, Alpha: o.alpha,
		Simulations: o.simulations, Resamples: o.resamples, Seed: sd}
	if o.other != "" {
		op, ow, err := readPilot(e, o.other)
		if err != nil {
			return err
		}
		opts.Other, opts.OtherWarnings = &op, ow
	}
	rep, err := trials.Plan(pilot, warnings, opts)
	if err != nil {
		return cli.Input(err)
	}
	return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
		if o.js {
			return cli.WritePrettyJSON(out, rep)
		}
		return trials.WriteNeededText(out, rep)
	})
}

// check checks the flags and arguments.
func (o *neededOptions) check(fs *pflag.FlagSet, args []string) error {
	if len(args) != 1 {
		return cli.Usagef("want one pilot results file, got %d arguments", len(args))
	}
	if !(o.width > 0 && o.width <= 1) {
		return cli.Usagef("--width %g: want a width in (0, 1]", o.width)
	}
	if o.other == "" {
		for _, name := range []string{"delta", "power", "alpha"} {
			if fs.Changed(name) {
				return cli.Usagef("--%s needs --compare OTHER", name)
			}
		}
	}
	if !(o.delta > 0 && o.delta <= 1) || !(o.power > 0 && o.power < 1) || !(o.alpha > 0 && o.alpha < 1) {
		return cli.Usagef("--delta must be in (0, 1], --power and --alpha in (0, 1)")
	}
	if o.simulations < 0 || o.resamples < 1 {
		return cli.Usagef("--simulations must not be negative, --resamples must be positive")
	}
	return nil
}

// readPilot reads a pilot run.
func readPilot(e *cli.Env, name string) (trials.Pilot, []string, error) {
	in, err := cli.ReviewInput(e, name)
	if err != nil {
		return trials.Pilot{}, nil, err
	}
	defer in.Close()
	run, err := trials.ReadRun(name, in)
	if err != nil {
		return trials.Pilot{}, nil, cli.ReviewInputErr(err)
	}
	p, warnings, err := trials.PilotOf(run)
	if err != nil {
		return p, nil, cli.Input(err)
	}
	return p, warnings, nil
}
