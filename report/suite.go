package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"harness/results"
	"harness/rundir"
	"harness/trials"
)

// Names of the files WriteSuite writes in a run directory.
const (
	CompareName  = "compare.json"
	ReportName   = "report.html"
	SummaryName  = "summary.md"
	JUnitName    = "junit.xml"
	reportPrefix = "report-"
)

// SuiteOptions are the options of WriteSuite.
type SuiteOptions struct {
	// Title heads the reports (the suite's name).
	Title string
	// Create opens a report file for writing whole (written under a
	// temporary name, renamed into place by Commit); nil is
	// results.CreateFile, overwriting.
	Create func(path string) (*results.File, error)
	// Text receives the comparison of the agents as text; nil discards it.
	Text io.Writer
	// Warn is told of a comparison or report that could not be made
	// (what is "compare" or "report"); nil ignores them.
	Warn func(what string, err error)
	// Regression, when not nil, is the comparison gate: its baseline (an
	// agent of the manifest) is compared with every other agent that
	// wrote records, and the verdicts come first in every output.
	Regression *trials.RegressionGate
	// Stopped, when not empty, says what stopped the run early and what
	// did not run: it comes first in the reports.
	Stopped string
	// gates are the verdicts WriteSuite decided, for the reports.
	gates []trials.RegressionVerdict
}

// SuiteReports name the files WriteSuite made in the run directory (""
// when not made).
type SuiteReports struct {
	// Compare is the comparison of the agents (CompareName), made for two
	// or more.
	Compare string
	// Report is the HTML report of the agents side by side (ReportName,
	// with SummaryName beside it), made for up to MaxRuns agents; with
	// more, each agent gets a report of its own (report-AGENT.html) and
	// Report is "".
	Report string
	// Gates are the comparison gate's verdicts, one per agent other than
	// the baseline, in the manifest's order.
	Gates []trials.RegressionVerdict
	// JUnit is the JUnit XML of every agent (JUnitName), one testsuite
	// each.
	JUnit string
}

// WriteSuite writes the comparison and reports of a run of a suite in dir,
// from the records of the agents of its manifest m that wrote any:
// compare.json (several agents: per case and McNemar for two, the
// ranking for more), report.html and summary.md. A problem is told to
// opt.Warn and the rest is still made: the records are safe whatever
// happens here.
func WriteSuite(dir string, m *rundir.Manifest, opt SuiteOptions) SuiteReports {
	var rep SuiteReports
	warn := func(what string, err error) {
		if opt.Warn != nil {
			opt.Warn(what, err)
		}
	}
	var outs, names []string
	for _, a := range m.Agents {
		p := filepath.Join(dir, a.Output)
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			outs = append(outs, p)
			names = append(names, a.Name)
		}
	}
	if len(outs) == 0 {
		return rep
	}
	text := opt.Text
	if text == nil {
		text = io.Discard
	}
	if opt.Regression != nil {
		gates, err := decideGates(*opt.Regression, outs, names)
		if err != nil {
			warn("gates", err)
		}
		rep.Gates = gates
		if len(gates) > 0 {
			fmt.Fprintln(text)
			WriteGatesText(text, gates)
		}
	}
	if len(outs) >= 2 {
		fmt.Fprintln(text)
		if err := CompareRuns(outs, filepath.Join(dir, CompareName), text); err != nil {
			warn("compare", err)
		} else {
			rep.Compare = CompareName
		}
	}
	ropt := opt
	ropt.gates = rep.Gates
	if err := writeSuiteJUnit(outs, filepath.Join(dir, JUnitName), opt); err != nil {
		warn("junit", err)
	} else {
		rep.JUnit = JUnitName
	}
	if len(outs) <= MaxRuns {
		if err := WriteRunReport(outs, filepath.Join(dir, ReportName), filepath.Join(dir, SummaryName), ropt); err != nil {
			warn("report", err)
			return rep
		}
		rep.Report = ReportName
		return rep
	}
	for _, o := range outs {
		name := reportPrefix + strings.TrimSuffix(filepath.Base(o), ".jsonl") + ".html"
		if err := WriteRunReport([]string{o}, filepath.Join(dir, name), "", ropt); err != nil {
			warn("report", err)
		}
	}
	return rep
}

// writeSuiteJUnit writes the JUnit XML of the agents' outputs outs to
// path: one testsuite per agent (named after its output), cases passing
// when every graded trial passes.
func writeSuiteJUnit(outs []string, path string, opt SuiteOptions) error {
	var runs []*Run
	defer func() { CloseRuns(runs) }()
	for _, name := range outs {
		in, err := results.Open(name, nil)
		if err != nil {
			return err
		}
		r, err := ReadRun(name, in, RunOptions{})
		in.Close()
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	create := opt.Create
	if create == nil {
		create = func(path string) (*results.File, error) { return results.CreateFile(path, nil, true) }
	}
	out, err := create(path)
	if err != nil {
		return err
	}
	if err := WriteJUnit(out, JUnitOptions{Name: opt.Title}, runs...); err != nil {
		out.Abort()
		return fmt.Errorf("%s: %w", path, err)
	}
	return out.Commit()
}

// WriteRunReport writes the HTML report of the trials outputs outs side by
// side to html and, unless markdown is "", their markdown summary to
// markdown, with the default options of a report (details, seed 1, the
// default resamples) and opt's title and file creation.
func WriteRunReport(outs []string, html, markdown string, opt SuiteOptions) error {
	var runs []*Run
	defer func() {
		for _, r := range runs {
			r.Close()
		}
	}()
	for _, name := range outs {
		in, err := results.Open(name, nil)
		if err != nil {
			return err
		}
		r, err := ReadRun(name, in, RunOptions{Details: true})
		in.Close()
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	create := opt.Create
	if create == nil {
		create = func(path string) (*results.File, error) { return results.CreateFile(path, nil, true) }
	}
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		out, err := create(path)
		if err != nil {
			return err
		}
		if err := fn(out); err != nil {
			out.Abort()
			return fmt.Errorf("%s: %w", path, err)
		}
		return out.Commit()
	}
	return errors.Join(
		write(html, func(w io.Writer) error {
			return WriteHTML(w, Options{Title: opt.Title, Seed: 1, Resamples: trials.DefaultResamples, Gates: opt.gates, Stopped: opt.Stopped, Dir: pageDir(html)}, runs...)
		}),
		write(markdown, func(w io.Writer) error {
			return WriteMarkdownSummary(w, MarkdownOptions{Title: opt.Title, Rule: RuleAll, Seed: 1, Resamples: trials.DefaultResamples, Gates: opt.gates, Stopped: opt.Stopped}, runs...)
		}),
	)
}

// CompareRuns reads the trials outputs outs once and writes their
// comparison (two: per case and McNemar; more: the ranking) as JSON to
// jsonPath and as text to text.
func CompareRuns(outs []string, jsonPath string, text io.Writer) error {
	runs := make([]*trials.Run, len(outs))
	for i, name := range outs {
		var err error
		if runs[i], err = readTrialsRun(name); err != nil {
			return err
		}
	}
	opt := trials.CompareOptions{K: 1, Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples}
	var v any
	var writeText func(io.Writer) error
	if len(runs) > 2 {
		rk := trials.Rank(runs, opt)
		v, writeText = rk, func(w io.Writer) error { return trials.WriteRankingText(w, rk) }
	} else {
		rep := trials.Compare(runs[0], runs[1], opt)
		v, writeText = rep, func(w io.Writer) error { return trials.WriteCompareText(w, rep) }
	}
	if err := results.ReplaceFile(jsonPath, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}); err != nil {
		return err
	}
	return writeText(text)
}

// decideGates compares the baseline of g (one of names, the agents whose
// outputs are outs) with every other agent. Without the baseline's
// records every other agent fails: the gate cannot be decided.
func decideGates(g trials.RegressionGate, outs, names []string) ([]trials.RegressionVerdict, error) {
	bi := -1
	for i, n := range names {
		if n == g.Baseline {
			bi = i
		}
	}
	var verdicts []trials.RegressionVerdict
	if bi < 0 {
		for _, n := range names {
			verdicts = append(verdicts, trials.RegressionVerdict{Run: n, Baseline: g.Baseline, Failed: true, MaxDrop: g.MaxDrop, Alpha: g.Alpha,
				Reason: fmt.Sprintf("%s: the baseline %s wrote no records, so the comparison cannot be made", n, g.Baseline)})
		}
		return verdicts, nil
	}
	base, err := readTrialsRun(outs[bi])
	if err != nil {
		return nil, err
	}
	opt := trials.CompareOptions{K: 1, Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples}
	for i, n := range names {
		if i == bi {
			continue
		}
		r, err := readTrialsRun(outs[i])
		if err != nil {
			return verdicts, err
		}
		verdicts = append(verdicts, g.Decide(n, trials.Compare(base, r, opt)))
	}
	return verdicts, nil
}

func readTrialsRun(name string) (*trials.Run, error) {
	in, err := results.Open(name, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return trials.ReadRun(name, in)
}

// WriteGatesText writes the comparison gates' verdicts for the terminal,
// one line each, failures first.
func WriteGatesText(w io.Writer, gates []trials.RegressionVerdict) {
	for _, failed := range []bool{true, false} {
		for _, v := range gates {
			if v.Failed != failed {
				continue
			}
			verdict := "passed"
			if v.Failed {
				verdict = "FAILED"
			}
			fmt.Fprintf(w, "gate %s (comparison with %s): %s\n", verdict, v.Baseline, v.Reason)
		}
	}
}
