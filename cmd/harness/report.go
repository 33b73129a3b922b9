package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/pflag"

	"harness/report"
	"harness/results"
	"harness/rundir"
	"harness/trials"
)

func newReportCmd() *command {
	var (
		output, junit, markdown string
		title, rule, seed       string
		resamples               int
		force                   bool
	)
	c := &command{
		name:  "report",
		usage: "report RESULTS [RESULTS_B...] | RUNDIR | RUNS [-o report.html] [--junit FILE] [--markdown FILE]",
		short: "one self-contained HTML page of a run (or several side by side); JUnit XML; markdown",
		long: `Reads one results file (capture or trials; .zst/.gz too; - for stdin), or up
to 8 side by side (A, B, C...; two are also compared A → B), and writes:

  -o FILE          one self-contained HTML page (inline CSS, JavaScript and SVG;
                   nothing is fetched): the summary, pass@k and pass^k curves
                   with intervals, flaky, failing and errored cases, and every
                   case with a strip of its trials; opening a case shows the
                   grader's reasoning and checks and the trajectory (thoughts,
                   messages, tool calls with input and output, plans,
                   permissions, fs and terminal steps, events). Filters by
                   status, category (metadata.category), A→B change and text.
  --junit FILE     JUnit XML: one testcase per case (classname = category)
  --markdown FILE  a short markdown summary for pull-request comments

Without any of the three, the HTML page goes to stdout. "-" as FILE is stdout.

A run directory of harness run (RUNDIR, with run.json) stands for its
agents' outputs, side by side. A directory of runs (RUNS, such as runs/)
gives one page of every run in it, oldest first, with the pass-rate trend
of each suite's agents across them (-o, and --markdown for the same as
tables).

Case status, from the n graded trials of which c passed (trials with
infrastructure errors are left out of n, never failures): pass (c = n),
fail (c = 0), flaky (0 < c < n), error (n = 0 and some trial errored),
ungraded (no grader ran).

In JUnit a case is a <failure> when it breaks --rule: "all" (default: every
graded trial must pass, so flaky cases fail), "majority" (more than half
pass) or "any" (at least one passes). A case with no graded trial and an
infrastructure error is an <error>; one run without a grader is <skipped>.

Examples:
  harness report trials.jsonl -o report.html
  harness report before.jsonl after.jsonl -o compare.html
  harness report trials.jsonl --junit junit.xml --markdown summary.md
  harness report runs/ -o runs.html`,
		flags: pflag.NewFlagSet("report", pflag.ContinueOnError),
	}
	c.flags.StringVarP(&output, "output", "o", "", "write the HTML page to `file`")
	c.flags.StringVar(&junit, "junit", "", "write JUnit XML to `file`")
	c.flags.StringVar(&markdown, "markdown", "", "write a markdown summary to `file`")
	c.flags.StringVar(&title, "title", "", "page and summary `title`")
	c.flags.StringVar(&rule, "rule", "all", "when a case passes in JUnit: `all`, majority or any of its graded trials")
	c.flags.StringVar(&seed, "seed", "1", "bootstrap `seed`")
	c.flags.IntVar(&resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples`")
	c.flags.BoolVar(&force, "force", false, "overwrite existing output files")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if len(args) < 1 || len(args) > report.MaxRuns {
			return usageErrorf("want one results file, or up to %d side by side (two are compared A → B), got %d arguments", report.MaxRuns, len(args))
		}
		if stdins := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a != "-" }); len(stdins) > 1 {
			return usageErrorf("only one input can be stdin (-)")
		}
		cr, err := report.ParseCaseRule(rule)
		if err != nil {
			return usageErrorf("--rule: %v", err)
		}
		sd, err := parseSeed(seed)
		if err != nil {
			return err
		}
		if output == "" && junit == "" && markdown == "" {
			output = "-"
		}
		stdouts := 0
		for _, o := range []string{output, junit, markdown} {
			if o == "-" {
				stdouts++
			}
		}
		if stdouts > 1 {
			return usageErrorf("only one of -o, --junit and --markdown can write to stdout")
		}

		if len(args) == 1 {
			if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
				if !rundir.Is(args[0]) {
					return reportRunsDir(e, args[0], title, output, junit, markdown, force)
				}
				// One run directory: its agents side by side.
				dir := args[0]
				m, err := rundir.Read(dir)
				if err != nil {
					return inputError(err)
				}
				args = nil
				for _, a := range m.Agents {
					if p := filepath.Join(dir, a.Output); fileExists(p) {
						args = append(args, p)
					}
				}
				if len(args) == 0 || len(args) > report.MaxRuns {
					return usageErrorf("%s holds %d agent outputs; a report shows 1 to %d side by side: name the files", dir, len(args), report.MaxRuns)
				}
				if title == "" {
					title = m.Suite.Name
				}
			}
		}
		var runs []*report.Run
		defer func() {
			for _, r := range runs {
				r.Close()
			}
		}()
		for _, name := range args {
			in, err := reviewInput(e, name)
			if err != nil {
				return err
			}
			r, err := report.ReadRun(name, in, report.RunOptions{Details: output != ""})
			in.Close()
			if err != nil {
				return reviewInputErr(err)
			}
			runs = append(runs, r)
		}

		type job struct {
			path  string
			write func(*results.File) error
		}
		jobs := []job{
			{output, func(w *results.File) error {
				return report.WriteHTML(w, report.Options{Title: title, Seed: sd, Resamples: resamplesOpt(resamples)}, runs...)
			}},
			{junit, func(w *results.File) error {
				return report.WriteJUnit(w, report.JUnitOptions{Rule: cr}, runs...)
			}},
			{markdown, func(w *results.File) error {
				return report.WriteMarkdownSummary(w, report.MarkdownOptions{Title: title, Rule: cr, Seed: sd, Resamples: resamplesOpt(resamples)}, runs...)
			}},
		}
		// Open every output first, so an existing file stops the command
		// before anything is written.
		outs := make([]*results.File, len(jobs))
		abortAll := func() {
			for _, o := range outs {
				if o != nil {
					o.Abort()
				}
			}
		}
		for i, j := range jobs {
			if j.path == "" {
				continue
			}
			o, err := reviewOutput(e, j.path, force)
			if err != nil {
				abortAll()
				return err
			}
			outs[i] = o
		}
		for i, j := range jobs {
			if outs[i] == nil {
				continue
			}
			if err := j.write(outs[i]); err != nil {
				abortAll()
				return fmt.Errorf("%s: %w", j.path, err)
			}
		}
		for _, o := range outs {
			if o == nil {
				continue
			}
			if err := o.Commit(); err != nil {
				abortAll()
				return err
			}
		}
		return nil
	}
	return c
}

// resamplesOpt maps --resamples to report's option, where 0 means the
// default and a negative number turns the bootstrap off.
func resamplesOpt(n int) int {
	if n < 1 {
		return -1
	}
	return n
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// reportRunsDir writes the report of a directory of runs: the pass-rate
// trend of each suite's agents across runs, and every run.
func reportRunsDir(e *env, dir, title, output, junit, markdown string, force bool) error {
	if junit != "" {
		return usageErrorf("--junit is for results files, not for a directory of runs")
	}
	runs, err := rundir.List(dir)
	if err != nil {
		return inputError(fmt.Errorf("%s: %w", dir, err))
	}
	if output != "" {
		if err := writeOutput(e, output, force, func(w io.Writer) error {
			return report.WriteRunsHTML(w, title, dir, runs)
		}); err != nil {
			return err
		}
	}
	if markdown != "" {
		return writeOutput(e, markdown, force, func(w io.Writer) error {
			return report.WriteRunsMarkdown(w, title, runs)
		})
	}
	return nil
}
