package report

import (
	"fmt"
	"io"
	"path/filepath"

	"harness/trials"
)

// Outputs are the files a report writes: the HTML page, JUnit XML and the
// markdown summary, each a path ("" for none) the caller's create opens.
type Outputs struct {
	HTML, JUnit, Markdown string
}

// BuildOptions configure Build.
type BuildOptions struct {
	// Title heads the page and the summary.
	Title string
	// Rule says when a case passes in JUnit and the summary.
	Rule CaseRule
	// Seed and Resamples are for the bootstrap intervals (Resamples 0:
	// the default; negative: no bootstrap).
	Seed      uint64
	Resamples int
	// Gates and Stopped are what a run directory's manifest says of its
	// run: the comparison gate's verdicts, and what stopped it early;
	// they come first in the page and the summary.
	Gates   []trials.RegressionVerdict
	Stopped string
}

// Sink is an output written whole: Commit puts it in place, Abort drops
// it (a file written under a temporary name, say).
type Sink interface {
	io.Writer
	Commit() error
	Abort()
}

// ReadRuns reads each named results file, opened with open, into a Run;
// details keeps the full records (for the HTML page). On error the runs
// read so far are closed.
func ReadRuns(names []string, open func(name string) (io.ReadCloser, error), details bool) ([]*Run, error) {
	var runs []*Run
	for _, name := range names {
		in, err := open(name)
		if err != nil {
			CloseRuns(runs)
			return nil, err
		}
		r, err := ReadRun(name, in, RunOptions{Details: details})
		in.Close()
		if err != nil {
			CloseRuns(runs)
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// CloseRuns closes every run.
func CloseRuns(runs []*Run) {
	for _, r := range runs {
		r.Close()
	}
}

// Build writes each output asked for of the runs side by side. Every
// output is opened with create first, so that one that cannot be opened
// stops the build before anything is written; they are committed only
// once all were written, and all are aborted on an error. An error
// writing an output names its path.
func Build(runs []*Run, out Outputs, opts BuildOptions, create func(path string) (Sink, error)) error {
	jobs := []struct {
		path  string
		write func(io.Writer) error
	}{
		{out.HTML, func(w io.Writer) error {
			return WriteHTML(w, Options{Title: opts.Title, Seed: opts.Seed, Resamples: opts.Resamples, Gates: opts.Gates, Stopped: opts.Stopped, Dir: pageDir(out.HTML)}, runs...)
		}},
		{out.JUnit, func(w io.Writer) error {
			return WriteJUnit(w, JUnitOptions{Rule: opts.Rule}, runs...)
		}},
		{out.Markdown, func(w io.Writer) error {
			return WriteMarkdownSummary(w, MarkdownOptions{Title: opts.Title, Rule: opts.Rule, Seed: opts.Seed, Resamples: opts.Resamples, Gates: opts.Gates, Stopped: opts.Stopped}, runs...)
		}},
	}
	sinks := make([]Sink, len(jobs))
	abortAll := func() {
		for _, s := range sinks {
			if s != nil {
				s.Abort()
			}
		}
	}
	for i, j := range jobs {
		if j.path == "" {
			continue
		}
		s, err := create(j.path)
		if err != nil {
			abortAll()
			return err
		}
		sinks[i] = s
	}
	for i, j := range jobs {
		if sinks[i] == nil {
			continue
		}
		if err := j.write(sinks[i]); err != nil {
			abortAll()
			return fmt.Errorf("%s: %w", j.path, err)
		}
	}
	for _, s := range sinks {
		if s == nil {
			continue
		}
		if err := s.Commit(); err != nil {
			abortAll()
			return err
		}
	}
	return nil
}

// pageDir is the directory of the page written to path ("" for stdout).
func pageDir(path string) string {
	if path == "" || path == "-" {
		return ""
	}
	return filepath.Dir(path)
}
