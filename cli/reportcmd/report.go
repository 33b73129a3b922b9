// Package reportcmd is harness report: one self-contained HTML page of a run (or several side by side); JUnit XML; markdown.
package reportcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/report"
	"harness/rundir"
	"harness/trials"
)

// reportOptions are the flags of harness report.
type reportOptions struct {
	output, junit, markdown string
	title, rule, seed       string
	resamples               int
	force                   bool
}

const reportLong = `Reads one results file (capture or trials; .zst/.gz too; - for stdin), or up
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
  harness report runs/ -o runs.html`

// NewCmd returns the harness report command.
func NewCmd() *cli.Command {
	var o reportOptions
	c := &cli.Command{
		Name:  "report",
		Usage: "report RESULTS [RESULTS_B...] | RUNDIR | RUNS [-o report.html] [--junit FILE] [--markdown FILE]",
		Short: "one self-contained HTML page of a run (or several side by side); JUnit XML; markdown",
		Long:  reportLong,
		Flags: pflag.NewFlagSet("report", pflag.ContinueOnError),
	}
	c.Flags.StringVarP(&o.output, "output", "o", "", "write the HTML page to `file`")
	c.Flags.StringVar(&o.junit, "junit", "", "write JUnit XML to `file`")
	c.Flags.StringVar(&o.markdown, "markdown", "", "write a markdown summary to `file`")
	c.Flags.StringVar(&o.title, "title", "", "page and summary `title`")
	c.Flags.StringVar(&o.rule, "rule", "all", "when a case passes in JUnit: `all`, majority or any of its graded trials")
	c.Flags.StringVar(&o.seed, "seed", "1", "bootstrap `seed`")
	c.Flags.IntVar(&o.resamples, "resamples", trials.DefaultResamples, "bootstrap `resamples`")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite existing output files")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runReport(e, o, args)
	}
	return c
}

// runReport writes the report of the results files (or run directory, or
// directory of runs) args.
func runReport(e *cli.Env, o reportOptions, args []string) error {
	if len(args) < 1 || len(args) > report.MaxRuns {
		return cli.Usagef("want one results file, or up to %d side by side (two are compared A → B), got %d arguments", report.MaxRuns, len(args))
	}
	if stdins := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a != "-" }); len(stdins) > 1 {
		return cli.Usagef("only one input can be stdin (-)")
	}
	cr, err := report.ParseCaseRule(o.rule)
	if err != nil {
		return cli.Usagef("--rule: %v", err)
	}
	sd, err := cli.ParseSeed(o.seed)
	if err != nil {
		return err
	}
	if o.output == "" && o.junit == "" && o.markdown == "" {
		o.output = "-"
	}
	if countStdout(o.output, o.junit, o.markdown) > 1 {
		return cli.Usagef("only one of -o, --junit and --markdown can write to stdout")
	}
	if len(args) == 1 {
		if st, err := os.Stat(args[0]); err == nil && st.IsDir() && !rundir.Is(args[0]) {
			return reportRunsDir(e, args[0], o.title, o.output, o.junit, o.markdown, o.force)
		}
	}
	// A run still running stands for what its agents wrote so far.
	var running []string
	if len(args) == 1 && rundir.Is(args[0]) {
		m, err := rundir.Read(args[0])
		if err != nil {
			return cli.Input(err)
		}
		if m.Status == "running" {
			if running, err = runningInputs(e, args[0], m); err != nil {
				return err
			}
		}
	}
	// A run directory stands for its agents, DIR:AGENT for one of them.
	var inputs []rundir.Input
	if running == nil {
		if inputs, err = rundir.ExpandAll(args); err != nil {
			return cli.Input(err)
		}
	} else {
		inputs = []rundir.Input{{Dir: args[0]}}
	}
	if len(inputs) > report.MaxRuns {
		return cli.Usagef("%s name %d agent outputs; a report shows 1 to %d side by side: name the agents (RUNDIR:AGENT)", strings.Join(args, " "), len(inputs), report.MaxRuns)
	}
	var stopped string
	var gates []trials.RegressionVerdict
	if len(args) == 1 && len(inputs) > 0 && inputs[0].Dir == args[0] {
		// One whole run directory: its suite's name, and what its
		// manifest says of the run (stopped early, the comparison gate).
		m, err := rundir.Read(args[0])
		if err != nil {
			return cli.Input(err)
		}
		if o.title == "" {
			o.title = m.Suite.Name
		}
		stopped, gates = m.Stopped, m.Gates
	}
	if running != nil {
		args = running
	} else {
		args = rundir.Files(inputs)
	}
	runs, err := report.ReadRuns(args, func(name string) (io.ReadCloser, error) { return cli.ReviewInput(e, name) }, o.output != "")
	if err != nil {
		return cli.ReviewInputErr(err)
	}
	defer report.CloseRuns(runs)
	out := report.Outputs{HTML: o.output, JUnit: o.junit, Markdown: o.markdown}
	opts := report.BuildOptions{Title: o.title, Rule: cr, Seed: sd, Resamples: resamplesOpt(o.resamples), Gates: gates, Stopped: stopped}
	return report.Build(runs, out, opts, func(path string) (report.Sink, error) { return cli.ReviewOutput(e, path, o.force) })
}

// runningInputs are the agent outputs of a run still running (or killed
// before it ended) that hold records: they are reported, with a note
// naming the agents that have none yet; with none, it is an error that
// points to the live viewer.
func runningInputs(e *cli.Env, dir string, m *rundir.Manifest) ([]string, error) {
	var have []string
	var waiting []string
	for _, a := range m.Agents {
		p := filepath.Join(dir, a.Output)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			have = append(have, p)
			continue
		}
		what := a.Name + " (no case finished yet"
		if n := countLines(p + ".partial"); n > 0 {
			what += fmt.Sprintf("; %s of unfinished cases in %s.partial", cli.Plural(n, "finished trial"), a.Output)
		}
		waiting = append(waiting, what+")")
	}
	running := fmt.Sprintf("%s is still running (its %s says so, or its run was killed before it ended)", dir, rundir.ManifestName)
	if len(have) == 0 {
		return nil, cli.Input(fmt.Errorf("%s: nothing to report yet: %s; watch it live with: harness view %s",
			running, strings.Join(waiting, ", "), dir))
	}
	if len(waiting) > 0 {
		fmt.Fprintf(e.Stderr, "harness report: note: %s: the report holds what its agents wrote so far; not yet: %s; watch it live with: harness view %s\n",
			running, strings.Join(waiting, ", "), dir)
	} else {
		fmt.Fprintf(e.Stderr, "harness report: note: %s: the report holds what its agents wrote so far; watch it live with: harness view %s\n", running, dir)
	}
	return have, nil
}

// countLines counts the non-empty lines of a file (0 when it cannot be
// read).
func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

// countStdout counts the outputs that go to stdout ("-").
func countStdout(paths ...string) int {
	n := 0
	for _, p := range paths {
		if p == "-" {
			n++
		}
	}
	return n
}

// resamplesOpt maps --resamples to report's option, where 0 means the
// default and a negative number turns the bootstrap off.
func resamplesOpt(n int) int {
	if n < 1 {
		return -1
	}
	return n
}

// reportRunsDir writes the report of a directory of runs: the pass-rate
// trend of each suite's agents across runs, and every run.
func reportRunsDir(e *cli.Env, dir, title, output, junit, markdown string, force bool) error {
	if junit != "" {
		return cli.Usagef("--junit is for results files, not for a directory of runs")
	}
	runs, err := rundir.List(dir)
	if err != nil {
		return cli.Input(fmt.Errorf("%s: %w", dir, err))
	}
	if output != "" {
		if err := cli.WriteOutput(e, output, force, func(w io.Writer) error {
			return report.WriteRunsHTML(w, title, dir, runs)
		}); err != nil {
			return err
		}
	}
	if markdown != "" {
		return cli.WriteOutput(e, markdown, force, func(w io.Writer) error {
			return report.WriteRunsMarkdown(w, title, runs)
		})
	}
	return nil
}
