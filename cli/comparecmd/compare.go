// Package comparecmd is harness compare: compare two runs on the same cases with paired statistics.
package comparecmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/review"
	"harness/schemas"
	"harness/trials"
)

// compareOptions are the flags of harness compare.
type compareOptions struct {
	output, seed, format string
	k, resamples         int
	js, force, asRuns    bool
	maxRegression        float64
}

const compareLong = `Compares run B against run A (capture files: pass from each record's score,
several records of a case are its trials; or trials files, including
acp-harness's). Deltas are B − A.

  - per case: graded trials n, passes c, pass rate, pass@K, and whether the
    case was gained (failed in A, passed in B), lost or the same; a case's
    outcome is "pass" when a strict majority of its graded trials passed
  - McNemar's exact test (two-sided binomial) on the per-case outcomes
  - paired bootstrap 95% intervals (cases resampled with their pairs) of the
    differences of mean pass rate and of mean pass@K
  - cases found in one run only are listed apart and enter no statistic;
    trials with infrastructure errors are excluded from n, never failures

When A and B hold the same trials (the same cases, trial numbers and
trajectories: one run graded twice, as harness grade writes it), they are
two graders, not two runs: compare reports how B's verdicts agree with
A's trial by trial (the flipped trials, Cohen's kappa between the two
graders, the change of score) instead. --as-runs compares them as runs
all the same; --max-regression always does.

Examples:
  harness compare before.jsonl after.jsonl
  harness compare before.jsonl after.jsonl --pass-at 5 --json | jq .passAtK
  harness compare runs/main-last:main runs/pr:candidate --max-regression 0.05
  harness compare graded-v1.jsonl graded-v2.jsonl

A run directory of harness run stands for its agents' outputs, and
RUNDIR:AGENT for one of them.`

// NewCmd returns the harness compare command.
func NewCmd() *cli.Command {
	var o compareOptions
	c := &cli.Command{
		Name:  "compare",
		Usage: "compare A B [C...] [--pass-at K] [--json] [-o FILE]",
		Short: "compare two runs on the same cases with paired statistics",
		Long:  compareLong,
		Flags: pflag.NewFlagSet("compare", pflag.ContinueOnError),
	}
	c.Flags.IntVar(&o.k, "pass-at", 1, "compare mean pass@`K` (cases need K graded trials in both runs)")
	// -k is the number of trials elsewhere.
	cli.DeprecatedAlias(c.Flags, "k", "k", "pass-at")
	c.Flags.BoolVar(&o.js, "json", false, "write the comparison as JSON")
	c.Flags.StringVar(&o.seed, "seed", "1", "bootstrap `seed`")
	c.Flags.IntVar(&o.resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples`")
	c.Flags.StringVarP(&o.output, "output", "o", "", "write to `file` (default stdout)")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite an existing output file")
	c.Flags.StringVar(&o.format, "format", "text", "output `format`: text, json or csv (per-case rows for two runs, the ranking for more)")
	c.Flags.BoolVar(&o.asRuns, "as-runs", false, "compare two files holding the same trials as two runs (cases, McNemar), not as two graders")
	c.Flags.Float64Var(&o.maxRegression, "max-regression", -1, "exit 1 when B's pass rate is lower than A's by more than `x` (0..1) and McNemar's exact test says the change is real (p < 0.05); the lost cases are listed")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runCompare(e, o, args)
	}
	return c
}

// runCompare compares the runs args: two paired, more ranked.
func runCompare(e *cli.Env, o compareOptions, args []string) error {
	switch o.format {
	case "text":
	case "json":
		o.js = true
	case "csv":
		if o.js {
			return cli.Usagef("--json and --format csv contradict each other")
		}
	default:
		return cli.Usagef("--format %q: want text, json or csv", o.format)
	}
	if len(args) < 1 {
		return cli.Usagef("want two or more results files (A B [C...]), got none")
	}
	if o.k < 1 {
		return cli.Usagef("--pass-at %d: K must be at least 1", o.k)
	}
	sd, err := cli.ParseSeed(o.seed)
	if err != nil {
		return err
	}
	if args, err = cli.ResultsArgs(args); err != nil {
		return err
	}
	if len(args) < 2 {
		return cli.Usagef("want two or more results files (A B [C...]; a run directory stands for its agents), got %d", len(args))
	}
	if len(args) == 2 && !o.asRuns && o.maxRegression == -1 && args[0] != "-" && args[1] != "-" {
		rep, same, err := compareGradings(e, args[0], args[1])
		if err != nil {
			return cli.ReviewInputErr(err)
		}
		if same {
			return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
				return writeAs(out, o, rep, review.WriteGraderAgreementText, review.WriteGraderAgreementCSV)
			})
		}
	}
	runs, err := trials.ReadRuns(args, func(name string) (io.ReadCloser, error) { return cli.ReviewInput(e, name) })
	if err != nil {
		return cli.ReviewInputErr(err)
	}
	opts := trials.CompareOptions{K: o.k, Seed: sd, Resamples: o.resamples}
	if len(runs) > 2 {
		if o.maxRegression != -1 {
			return cli.Usagef("--max-regression compares two runs (A B)")
		}
		rk := trials.Rank(runs, opts)
		return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
			return writeAs(out, o, rk, trials.WriteRankingText, trials.WriteRankingCSV)
		})
	}
	if o.maxRegression != -1 && (o.maxRegression < 0 || o.maxRegression > 1) {
		return cli.Usagef("--max-regression %g: want a fraction between 0 and 1", o.maxRegression)
	}
	rep := trials.Compare(runs[0], runs[1], opts)
	err = cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
		return writeAs(out, o, rep, trials.WriteCompareText, trials.WriteCompareCSV)
	})
	if err != nil || o.maxRegression < 0 {
		return err
	}
	if r := trials.Regressed(rep, o.maxRegression); r != nil {
		if r.UnderCovered != "" {
			return cli.WithCode(cli.ExitGateFailed, fmt.Errorf("--max-regression: %s (harness trials --resume --retry-errors)", r.UnderCovered))
		}
		return cli.WithCode(cli.ExitGateFailed, fmt.Errorf("regression: B's pass rate is %.3f lower than A's (over %.3f), McNemar p = %.4f; lost: %s",
			r.Drop, o.maxRegression, r.PValue, strings.Join(r.Lost, ", ")))
	}
	return nil
}

// compareGradings compares the gradings of files a and b when they hold the
// same trials.
func compareGradings(e *cli.Env, a, b string) (schemas.GraderAgreement, bool, error) {
	ra, err := cli.ReviewInput(e, a)
	if err != nil {
		return schemas.GraderAgreement{}, false, err
	}
	defer ra.Close()
	rb, err := cli.ReviewInput(e, b)
	if err != nil {
		return schemas.GraderAgreement{}, false, err
	}
	defer rb.Close()
	return review.CompareGradings(a, ra, b, rb)
}

// writeAs writes v as JSON, CSV or text, as --json and --format ask.
func writeAs[T any](out io.Writer, o compareOptions, v T, text, csv func(io.Writer, T) error) error {
	switch {
	case o.js:
		return cli.WritePrettyJSON(out, v)
	case o.format == "csv":
		return csv(out, v)
	}
	return text(out, v)
}
