package main

import (
	"context"
	"encoding/json"
	"errors"
	"harness/cli"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/graders"
	"harness/judgecache"
	"harness/results"
	"harness/review"
	"harness/schemas"
	"harness/trials"
)

// Helpers shared by the offline commands (summarize, calibrate,
// validate-refs, balance, compare, schemas).

// reviewInput opens an input file ("-" for stdin), decompressing by name.
// A missing file is an input error (exit 2).
func reviewInput(e *cli.Env, name string) (io.ReadCloser, error) {
	r, err := results.Open(name, e.Stdin)
	if err != nil {
		return nil, cli.Input(err)
	}
	return r, nil
}

// writeOutput writes a command's whole output through write to path (""
// or "-" is stdout): on success the file appears, on failure nothing does.
func writeOutput(e *cli.Env, path string, force bool, write func(io.Writer) error) error {
	out, err := reviewOutput(e, path, force)
	if err != nil {
		return err
	}
	if err := write(out); err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// reviewOutput opens path for writing a whole output ("" or "-" is stdout):
// a file written under a temporary name and renamed into place by Commit,
// so a failed command leaves no partial file and never touches an existing
// one without --force.
func reviewOutput(e *cli.Env, path string, force bool) (*results.File, error) {
	f, err := results.CreateFile(path, e.Stdout, force)
	if err != nil {
		return nil, cli.OutputOpenError(err)
	}
	if e.Redact.Active() {
		f.Redact(e.Redact.JSON)
	}
	return f, nil
}

// writeRecords writes a whole output of records (see reviewOutput): write
// is given the output's writer; the file is renamed into place only when
// write and the writer's close succeed, else nothing is left.
func writeRecords(e *cli.Env, path string, force bool, write func(w *results.Writer) error) error {
	return writeOutput(e, path, force, func(out io.Writer) error {
		w, err := results.NewWriter(path, out)
		if err != nil {
			return err
		}
		err = write(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// writePrettyJSON writes v as indented JSON (2 spaces, no HTML escaping)
// with a final newline.
func writePrettyJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// reviewInputErr marks schema-level input errors (bad lines, mixed formats)
// as exit 2 and leaves other errors alone.
func reviewInputErr(err error) error {
	if err == nil {
		return nil
	}
	var ie *schemas.InputError
	if errors.As(err, &ie) {
		return cli.Input(err)
	}
	return err
}

// loadReviewGrader loads -g for calibrate and validate-refs.
func loadReviewGrader(e *cli.Env, spec string, to time.Duration, cache *judgecache.Cache) (graders.Grader, review.GradeFunc, error) {
	wd, _ := os.Getwd()
	g, err := graders.Load(spec, graders.Options{Timeout: to, Getenv: e.Getenv, Dir: wd, JudgeCache: cache})
	if err != nil {
		return nil, nil, cli.Input(err)
	}
	fn := func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) schemas.GraderResult {
		return g.Grade(ctx, &graders.Input{Record: rec, Case: c})
	}
	return g, fn, nil
}

// parseSeed reads a --seed value (any unsigned 64-bit integer).
func parseSeed(s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, cli.Usagef("--seed %q: want a whole number ≥ 0", s)
	}
	return v, nil
}

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

func newSummarizeCmd() *cli.Command {
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
	sd, err := parseSeed(o.seed)
	if err != nil {
		return err
	}
	in, err := reviewInput(e, args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	return writeOutput(e, o.output, o.force, func(out io.Writer) error {
		opts := review.ViewOptions{View: view, Seed: sd, Resamples: o.resamples, OutName: o.output}
		return reviewInputErr(review.WriteView(out, in, args[0], opts))
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
