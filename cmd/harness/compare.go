package main

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"harness/trials"
)

func newCompareCmd() *command {
	var (
		output, seed string
		k, resamples int
		js, force    bool
	)
	c := &command{
		name:  "compare",
		usage: "compare A B [-k K] [--json] [-o FILE]",
		short: "compare two runs on the same cases with paired statistics",
		long: `Compares run B against run A (capture files: pass from each record's score,
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

Examples:
  harness compare before.jsonl after.jsonl
  harness compare before.jsonl after.jsonl -k 5 --json | jq .passAtK`,
		flags: pflag.NewFlagSet("compare", pflag.ContinueOnError),
	}
	c.flags.IntVarP(&k, "k", "k", 1, "compare mean pass@`K` (cases need K graded trials in both runs)")
	c.flags.BoolVar(&js, "json", false, "write the comparison as JSON")
	c.flags.StringVar(&seed, "seed", "1", "bootstrap `seed`")
	c.flags.IntVar(&resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples`")
	c.flags.StringVarP(&output, "output", "o", "", "write to `file` (default stdout)")
	c.flags.BoolVar(&force, "force", false, "overwrite an existing output file")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if len(args) != 2 {
			return usageErrorf("want two results files (A B), got %d arguments", len(args))
		}
		if k < 1 {
			return usageErrorf("-k %d: K must be at least 1", k)
		}
		sd, err := parseSeed(seed)
		if err != nil {
			return err
		}
		var runs [2]*trials.Run
		for i, name := range args {
			in, err := reviewInput(e, name)
			if err != nil {
				return err
			}
			runs[i], err = trials.ReadRun(name, in)
			in.Close()
			if err != nil {
				return reviewInputErr(err)
			}
		}
		rep := trials.Compare(runs[0], runs[1], trials.CompareOptions{K: k, Seed: sd, Resamples: resamples})
		return writeOutput(e, output, force, func(out io.Writer) error {
			if js {
				return writePrettyJSON(out, rep)
			}
			return trials.WriteCompareText(out, rep)
		})
	}
	return c
}
