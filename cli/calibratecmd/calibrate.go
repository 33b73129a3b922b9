// Package calibratecmd is harness calibrate: sample failures for human review; grader health and agreement.
package calibratecmd

import (
	"context"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/graders"
	"harness/review"
	"harness/schemas"
)

// calibrateOptions are the flags of harness calibrate.
type calibrateOptions struct {
	output, seed, grader, labels string
	sample, repeat               int
	js, force                    bool
	graderTO                     time.Duration
	judgeCache                   cli.JudgeCacheFlags
	threshold                    cli.Threshold
}

const calibrateLong = `Reads graded results (capture or trials file) and writes a markdown review
sheet (or JSON with --json):

  - a seeded sample of N failures (--seed; reservoir sampling with PCG), each
    with input, expected, output, score, reasoning, a trajectory snippet and
    three checkboxes: valid failure / grader bug / ambiguous
  - grader health over all graded trials: score histogram, mean and std, and
    flags for too lenient (most scores > 0.9), too strict (most < 0.1) and
    no variance (std < 0.1)
  - with -g GRADER: each sampled failure re-scored by GRADER; with --repeat M
    (M ≥ 2) a sample of N graded trials is graded M times each and the flip
    rate (trials whose verdicts disagree) is reported
  - with --labels FILE: human verdicts (JSONL {"id", "trial"?, "pass": bool}
    or {"id", "trial"?, "label": "pass"|"fail"|"valid_failure"|"grader_bug"|
    "ambiguous"}) compared with the grader's: confusion table, Cohen's
    kappa and the disagreements (trial, human label, grader verdict), under
    the name of the grader they belong to. With -g, every labelled trial is
    graded again by GRADER and its agreement comes first, then that of the
    verdicts stored in RESULTS. A label for a case or trial not in RESULTS
    is an input error. -s 0 samples no failures: agreement alone.

Trials with infrastructure errors have no verdict and are never sampled.
The "Generated" time is taken from SOURCE_DATE_EPOCH when it is set.

Examples:
  harness calibrate results.jsonl -s 20 -o review.md
  harness calibrate results.jsonl -g judge.yaml --repeat 5
  harness calibrate results.jsonl --labels labels.jsonl --json | jq .agreement.kappa
  harness calibrate results.jsonl -g grader-v2.js --labels labels.jsonl -s 0`

// NewCmd returns the harness calibrate command.
func NewCmd() *cli.Command {
	var o calibrateOptions
	c := &cli.Command{
		Name:  "calibrate",
		Usage: "calibrate RESULTS [-s N] [-g GRADER [--repeat M]] [--labels FILE]",
		Short: "sample failures for human review; grader health and agreement",
		Long:  calibrateLong,
		Flags: pflag.NewFlagSet("calibrate", pflag.ContinueOnError),
	}
	c.Flags.IntVarP(&o.sample, "sample", "s", review.DefaultSampleSize, "sample `n` failures (0: none, agreement alone)")
	c.Flags.StringVar(&o.seed, "seed", "1", "sampling `seed`")
	c.Flags.StringVarP(&o.grader, "grader", "g", "", "re-score the samples with `grader`")
	cli.GraderTimeoutVar(c.Flags, &o.graderTO)
	o.threshold.Add(c.Flags)
	c.Flags.IntVar(&o.repeat, "repeat", 0, "with -g: grade a sample of graded trials `m` times each and report the flip rate")
	c.Flags.StringVar(&o.labels, "labels", "", "human labels `file` (JSONL) to compare with the grader's verdicts")
	c.Flags.BoolVar(&o.js, "json", false, "write the report as JSON")
	c.Flags.StringVarP(&o.output, "output", "o", "", "write to `file` (default stdout)")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite an existing output file")
	o.judgeCache.AddFlags(c.Flags)
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runCalibrate(ctx, e, &o, args)
	}
	return c
}

// runCalibrate writes the review sheet of the results file args[0].
func runCalibrate(ctx context.Context, e *cli.Env, o *calibrateOptions, args []string) error {
	if len(args) != 1 {
		return cli.Usagef("want one results file, got %d arguments", len(args))
	}
	if o.sample < 0 {
		return cli.Usagef("--sample %d: want 0 (no sample: agreement alone) or more", o.sample)
	}
	if o.repeat != 0 && (o.repeat < 2 || o.grader == "") {
		return cli.Usagef("--repeat needs -g and a count of at least 2")
	}
	sd, err := cli.ParseSeed(o.seed)
	if err != nil {
		return err
	}
	opt := review.CalibrateOptions{Sample: o.sample, Seed: sd, Repeat: o.repeat, Generated: generatedTime(e)}
	if o.labels != "" {
		lin, err := cli.ReviewInput(e, o.labels)
		if err != nil {
			return err
		}
		opt.Labels, err = review.ReadLabels(o.labels, lin)
		lin.Close()
		if err != nil {
			return cli.Input(err)
		}
	}
	if o.grader != "" {
		cache, err := o.judgeCache.Open(e)
		if err != nil {
			return err
		}
		th, err := o.threshold.Value()
		if err != nil {
			return err
		}
		g, fn, err := cli.LoadReviewGrader(e, "calibrate", o.grader, o.graderTO, th, cache)
		if err != nil {
			return err
		}
		opt.Grade, opt.GraderName = drawCounter(fn), g.Name()
	}
	name, err := cli.OneResults(args[0])
	if err != nil {
		return err
	}
	args = []string{name}
	in, err := cli.ReviewInput(e, args[0])
	if err != nil {
		return err
	}
	rep, err := review.Calibrate(ctx, args[0], in, opt)
	in.Close()
	if err != nil {
		return cli.ReviewInputErr(err)
	}
	return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
		if o.js {
			return cli.WritePrettyJSON(out, rep)
		}
		return review.WriteCalibrationMarkdown(out, rep)
	})
}

// generatedTime is now in RFC 3339 UTC, or SOURCE_DATE_EPOCH when set (for
// reproducible output).
func generatedTime(e *cli.Env) string {
	t := time.Now()
	if s := e.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			t = time.Unix(sec, 0)
		}
	}
	return t.UTC().Format(time.RFC3339)
}

// drawCounter numbers the gradings of each trial, so that repeated
// gradings of one record (calibrate --repeat) are separate judge draws,
// each cached on its own, while the first is the draw a plain grading
// makes.
func drawCounter(fn review.GradeFunc) review.GradeFunc {
	var mu sync.Mutex
	draws := map[[2]any]int{}
	return func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) schemas.GraderResult {
		mu.Lock()
		k := [2]any{rec.ID, rec.Trial}
		draws[k]++
		n := draws[k]
		mu.Unlock()
		return fn(graders.WithJudgeDraw(ctx, n), rec, c)
	}
}
