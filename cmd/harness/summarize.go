package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
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
func reviewInput(e *env, name string) (io.ReadCloser, error) {
	r, err := results.Open(name, e.stdin)
	if err != nil {
		return nil, inputError(err)
	}
	return r, nil
}

// writeOutput writes a command's whole output through write to path (""
// or "-" is stdout): on success the file appears, on failure nothing does.
func writeOutput(e *env, path string, force bool, write func(io.Writer) error) error {
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
func reviewOutput(e *env, path string, force bool) (*results.File, error) {
	f, err := results.CreateFile(path, e.stdout, force)
	if err != nil {
		return nil, outputOpenError(err)
	}
	if e.redact.Active() {
		f.Redact(e.redact.JSON)
	}
	return f, nil
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
		return inputError(err)
	}
	return err
}

// loadReviewGrader loads -g for calibrate and validate-refs.
func loadReviewGrader(e *env, spec string, to time.Duration, cache *judgecache.Cache) (graders.Grader, review.GradeFunc, error) {
	wd, _ := os.Getwd()
	g, err := graders.Load(spec, graders.Options{Timeout: to, Getenv: e.getenv, Dir: wd, JudgeCache: cache})
	if err != nil {
		return nil, nil, inputError(err)
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
		return 0, usageErrorf("--seed %q: want a whole number ≥ 0", s)
	}
	return v, nil
}

func newSummarizeCmd() *command {
	var (
		output, seed      string
		markdown, agg, js bool
		force             bool
		resamples         int
	)
	c := &command{
		name:  "summarize",
		usage: "summarize RESULTS [-m | -a] [-o FILE]",
		short: "compact JSONL, markdown (-m) or aggregate (-a) views of results",
		long: `Reads a capture or trials file (.zst/.gz too; - for stdin) and writes one
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
  harness summarize trials.jsonl -a`,
		flags: pflag.NewFlagSet("summarize", pflag.ContinueOnError),
	}
	c.flags.StringVarP(&output, "output", "o", "", "write to `file` (default stdout); a .zst or .gz suffix compresses JSONL")
	c.flags.BoolVarP(&markdown, "markdown", "m", false, "write markdown instead of JSONL")
	c.flags.BoolVarP(&agg, "aggregate", "a", false, "write the aggregate table (per case and pass@k)")
	c.flags.BoolVar(&js, "json", false, "with -a: write the trials summary record as JSON")
	c.flags.StringVar(&seed, "seed", "1", "bootstrap `seed` for -a")
	c.flags.IntVar(&resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples` for -a")
	c.flags.BoolVar(&force, "force", false, "overwrite an existing output file")
	csvOut := false
	format := c.flags.String("format", "jsonl", "the compact view's `format`: jsonl or csv (one row per record)")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if len(args) != 1 {
			return usageErrorf("want one results file, got %d arguments", len(args))
		}
		switch *format {
		case "jsonl":
		case "csv":
			if markdown || agg {
				return usageErrorf("--format csv is for the compact view (not with -m or -a)")
			}
			csvOut = true
		default:
			return usageErrorf("--format %q: want jsonl or csv", *format)
		}
		if markdown && agg {
			return usageErrorf("-m and -a are different views: choose one")
		}
		if js && !agg {
			return usageErrorf("--json goes with -a")
		}
		sd, err := parseSeed(seed)
		if err != nil {
			return err
		}
		in, err := reviewInput(e, args[0])
		if err != nil {
			return err
		}
		defer in.Close()
		return writeOutput(e, output, force, func(out io.Writer) error {
			if csvOut {
				return summarizeCSV(in, args[0], out)
			}
			return runSummarize(in, args[0], out, output, markdown, agg, js, sd, resamples)
		})
	}
	return c
}

func runSummarize(in io.Reader, name string, out io.Writer, outName string, markdown, agg, js bool, seed uint64, resamples int) error {
	switch {
	case agg:
		rows, sum, _, err := review.Aggregate(name, in, seed, resamples)
		if err != nil {
			return reviewInputErr(err)
		}
		if js {
			return writePrettyJSON(out, sum)
		}
		return review.WriteAggregate(out, rows, sum)
	case markdown:
		n := 0
		_, err := review.EachRecord(name, in, func(_ int, rec *schemas.CaptureRecord) error {
			n++
			return review.WriteMarkdown(out, rec)
		})
		if err == nil && n == 0 {
			err = &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
		}
		return reviewInputErr(err)
	}
	w, err := results.NewWriter(outName, out)
	if err != nil {
		return err
	}
	n := 0
	_, err = review.EachRecordBrief(name, in, func(_ int, rec *schemas.CaptureRecord) error {
		n++
		return w.Write(review.Summarize(rec))
	})
	if err == nil && n == 0 {
		err = &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return reviewInputErr(err)
}

// summarizeCSV writes the compact view as CSV, one row per record.
func summarizeCSV(in io.Reader, name string, out io.Writer) error {
	w := csv.NewWriter(out)
	w.Write([]string{"id", "trial", "input", "output", "toolCalls", "duration", "steps", "stopReason", "toolErrors", "pass", "score", "excluded"})
	n := 0
	_, err := review.EachRecordBrief(name, in, func(_ int, rec *schemas.CaptureRecord) error {
		n++
		s := review.Summarize(rec)
		pass, score := "", ""
		if s.Pass != nil {
			pass = strconv.FormatBool(*s.Pass)
		}
		if s.Score != nil {
			score = strconv.FormatFloat(*s.Score, 'g', -1, 64)
		}
		return w.Write([]string{s.ID, strconv.Itoa(max(s.Trial, 1)), s.Input, s.Output, strings.Join(s.ToolCalls, " "),
			strconv.FormatInt(s.Duration, 10), strconv.Itoa(s.Steps), s.StopReason, strconv.FormatBool(s.ToolErrors), pass, score, s.Excluded})
	})
	if err == nil && n == 0 {
		err = &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	w.Flush()
	if err == nil {
		err = w.Error()
	}
	return reviewInputErr(err)
}
