// Package summarizecmd is harness summarize: compact JSONL, markdown (-m) or aggregate (-a) views of results.
package summarizecmd

import (
	"bytes"
	"context"
	"io"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/review"
	"harness/trials"
)

// Helpers shared by the offline commands (summarize, calibrate,
// validate-refs, balance, compare, schemas).

// summarizeOptions are the flags of harness summarize.
type summarizeOptions struct {
	output, seed, format string
	markdown, agg, js    bool
	force                bool
	resamples            int
}

const summarizeLong = `Reads a capture or trials file (.zst/.gz too; - for stdin) and writes one
of three views:

  (default)  compact JSONL, one line per trial: id, input, output, toolCalls,
             duration (the acp-harness SummaryResult) plus trial, turns, steps,
             stopReason, toolErrors, pass, score, excluded and error.
  -m         markdown per trial for people or an LLM judge: each step with its
             stepId, tool file previews, output, metadata, score.
  -a         an aggregate table: per case (trials, graded, passed, pass rate with
             a Wilson 95% interval, mean duration, tool calls, excluded trials),
             then pass@k / pass^k for k = 1..n with bootstrap intervals.
             With --json, the trials summary record instead (JSON).

Trials that failed for infrastructure reasons (an error on the record or the
grader) are excluded from n and counted by class, never counted as failures.

Examples:
  harness summarize results.jsonl | jq -r '.toolCalls | length'
  harness summarize results.jsonl -m -o results.md
  harness summarize trials.jsonl -a`

// NewCmd returns the harness summarize command.
func NewCmd() *cli.Command {
	var o summarizeOptions
	c := &cli.Command{
		Name:  "summarize",
		Usage: "summarize RESULTS [-m | -a] [-o FILE]",
		Short: "compact JSONL, markdown (-m) or aggregate (-a) views of results",
		Long:  summarizeLong,
		Flags: pflag.NewFlagSet("summarize", pflag.ContinueOnError),
	}
	c.Flags.StringVarP(&o.output, "output", "o", "", "write to `file` (default stdout); a .zst or .gz suffix compresses JSONL")
	c.Flags.BoolVarP(&o.markdown, "markdown", "m", false, "write markdown instead of JSONL")
	c.Flags.BoolVarP(&o.agg, "aggregate", "a", false, "write the aggregate table (per case and pass@k)")
	c.Flags.BoolVar(&o.js, "json", false, "with -a: write the trials summary record as JSON")
	c.Flags.StringVar(&o.seed, "seed", "1", "bootstrap `seed` for -a")
	c.Flags.IntVar(&o.resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples` for -a")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite an existing output file")
	c.Flags.StringVar(&o.format, "format", "jsonl", "the compact view's `format`: jsonl or csv (one row per record)")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runSummarize(e, o, args)
	}
	return c
}

// runSummarize writes the view of args[0] the options ask for.
func runSummarize(e *cli.Env, o summarizeOptions, args []string) error {
	if len(args) != 1 {
		return cli.Usagef("want one results file, got %d arguments", len(args))
	}
	view, err := o.view()
	if err != nil {
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
	args = []string{name}
	in, err := cli.ReviewInput(e, args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
		opts := review.ViewOptions{View: view, Seed: sd, Resamples: o.resamples, OutName: o.output}
		if o.output != "" && o.output != "-" {
			return cli.ReviewInputErr(review.WriteView(out, in, args[0], opts))
		}
		// On standard output too, a file with a bad line gives its
		// error and nothing else: no view of the lines before it.
		var buf bytes.Buffer
		if err := review.WriteView(&buf, in, args[0], opts); err != nil {
			return cli.ReviewInputErr(err)
		}
		_, err := out.Write(buf.Bytes())
		return err
	})
}

// view is the view the flags ask for.
func (o *summarizeOptions) view() (review.View, error) {
	switch o.format {
	case "jsonl":
	case "csv":
		if o.markdown || o.agg {
			return 0, cli.Usagef("--format csv is for the compact view (not with -m or -a)")
		}
	default:
		return 0, cli.Usagef("--format %q: want jsonl or csv", o.format)
	}
	if o.markdown && o.agg {
		return 0, cli.Usagef("-m and -a are different views: choose one")
	}
	if o.js && !o.agg {
		return 0, cli.Usagef("--json goes with -a")
	}
	switch {
	case o.format == "csv":
		return review.ViewCSV, nil
	case o.agg && o.js:
		return review.ViewAggregateJSON, nil
	case o.agg:
		return review.ViewAggregate, nil
	case o.markdown:
		return review.ViewMarkdown, nil
	}
	return review.ViewCompact, nil
}
