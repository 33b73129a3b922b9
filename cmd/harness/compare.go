package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"harness/schemas"
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
		usage: "compare A B [C...] [--pass-at K] [--json] [-o FILE]",
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
  harness compare before.jsonl after.jsonl --pass-at 5 --json | jq .passAtK`,
		flags: pflag.NewFlagSet("compare", pflag.ContinueOnError),
	}
	c.flags.IntVar(&k, "pass-at", 1, "compare mean pass@`K` (cases need K graded trials in both runs)")
	// -k is the number of trials elsewhere.
	deprecatedAlias(c.flags, "k", "k", "pass-at")
	c.flags.BoolVar(&js, "json", false, "write the comparison as JSON")
	c.flags.StringVar(&seed, "seed", "1", "bootstrap `seed`")
	c.flags.IntVar(&resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples`")
	c.flags.StringVarP(&output, "output", "o", "", "write to `file` (default stdout)")
	c.flags.BoolVar(&force, "force", false, "overwrite an existing output file")
	format := c.flags.String("format", "text", "output `format`: text, json or csv (per-case rows for two runs, the ranking for more)")
	maxRegression := c.flags.Float64("max-regression", -1, "exit 1 when B's pass rate is lower than A's by more than `x` (0..1) and McNemar's exact test says the change is real (p < 0.05); the lost cases are listed")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		switch *format {
		case "text":
		case "json":
			js = true
		case "csv":
			if js {
				return usageErrorf("--json and --format csv contradict each other")
			}
		default:
			return usageErrorf("--format %q: want text, json or csv", *format)
		}
		if len(args) < 2 {
			return usageErrorf("want two or more results files (A B [C...]), got %d arguments", len(args))
		}
		if k < 1 {
			return usageErrorf("--pass-at %d: K must be at least 1", k)
		}
		sd, err := parseSeed(seed)
		if err != nil {
			return err
		}
		runs := make([]*trials.Run, len(args))
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
		if len(runs) > 2 {
			if *maxRegression != -1 {
				return usageErrorf("--max-regression compares two runs (A B)")
			}
			rk := trials.Rank(runs, trials.CompareOptions{K: k, Seed: sd, Resamples: resamples})
			return writeOutput(e, output, force, func(out io.Writer) error {
				switch {
				case js:
					return writePrettyJSON(out, rk)
				case *format == "csv":
					return rankingCSV(out, rk)
				}
				return trials.WriteRankingText(out, rk)
			})
		}
		if *maxRegression != -1 && (*maxRegression < 0 || *maxRegression > 1) {
			return usageErrorf("--max-regression %g: want a fraction between 0 and 1", *maxRegression)
		}
		rep := trials.Compare(runs[0], runs[1], trials.CompareOptions{K: k, Seed: sd, Resamples: resamples})
		err = writeOutput(e, output, force, func(out io.Writer) error {
			switch {
			case js:
				return writePrettyJSON(out, rep)
			case *format == "csv":
				return compareCSV(out, rep)
			}
			return trials.WriteCompareText(out, rep)
		})
		if err != nil || *maxRegression < 0 || rep.PassRate == nil {
			return err
		}
		drop := -rep.PassRate.Diff
		if drop <= *maxRegression || rep.McNemar.PValue >= 0.05 {
			return nil
		}
		var lost []string
		for _, cd := range rep.Cases {
			if cd.Change == "lost" {
				lost = append(lost, cd.ID)
			}
		}
		return withCode(exitGateFailed, fmt.Errorf("regression: B's pass rate is %.3f lower than A's (over %.3f), McNemar p = %.4f; lost: %s",
			drop, *maxRegression, rep.McNemar.PValue, strings.Join(lost, ", ")))
	}
	return c
}

// compareCSV writes a comparison of two runs as CSV, one row per case.
func compareCSV(out io.Writer, rep schemas.CompareReport) error {
	w := csv.NewWriter(out)
	w.Write([]string{"id", "a_n", "a_c", "a_passRate", "b_n", "b_c", "b_passRate", "delta", "change"})
	f := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	for _, c := range rep.Cases {
		w.Write([]string{c.ID, strconv.Itoa(c.A.N), strconv.Itoa(c.A.C), f(c.A.PassRate), strconv.Itoa(c.B.N), strconv.Itoa(c.B.C), f(c.B.PassRate), f(c.Delta), c.Change})
	}
	w.Flush()
	return w.Error()
}

// rankingCSV writes a ranking as CSV, one row per run.
func rankingCSV(out io.Writer, rk trials.Ranking) error {
	w := csv.NewWriter(out)
	w.Write([]string{"rank", "run", "meanPassRate", "low", "high"})
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, r := range rk.Runs {
		w.Write([]string{strconv.Itoa(r.Rank), r.File, g(r.MeanPassRate), g(r.Low), g(r.High)})
	}
	w.Flush()
	return w.Error()
}
