package report

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// memSink is an output kept in memory that records what became of it.
type memSink struct {
	bytes.Buffer
	committed, aborted bool
}

func (s *memSink) Commit() error { s.committed = true; return nil }
func (s *memSink) Abort()        { s.aborted = true }

func TestBuildWritesEveryOutput(t *testing.T) {
	runs, err := ReadRuns([]string{fixture("trials_a.jsonl")}, func(name string) (io.ReadCloser, error) { return os.Open(name) }, true)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseRuns(runs)
	sinks := map[string]*memSink{}
	err = Build(runs, Outputs{HTML: "r.html", JUnit: "j.xml"}, BuildOptions{Title: "T"}, func(path string) (Sink, error) {
		s := &memSink{}
		sinks[path] = s
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sinks) != 2 {
		t.Fatalf("opened %d outputs, want 2 (no markdown asked)", len(sinks))
	}
	if s := sinks["r.html"]; !s.committed || !strings.Contains(s.String(), "<html") {
		t.Errorf("HTML: committed %v, %d bytes; want a committed page", s.committed, s.Len())
	}
	if s := sinks["j.xml"]; !s.committed || !strings.Contains(s.String(), "<testsuite") {
		t.Errorf("JUnit: committed %v; want committed XML", s.committed)
	}
}

// An output that cannot be opened stops the build before anything is
// written: the ones already opened are aborted, none committed.
func TestBuildOpensAllFirst(t *testing.T) {
	runs, err := ReadRuns([]string{fixture("trials_a.jsonl")}, func(name string) (io.ReadCloser, error) { return os.Open(name) }, false)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseRuns(runs)
	first := &memSink{}
	refused := errors.New("exists")
	err = Build(runs, Outputs{JUnit: "j.xml", Markdown: "m.md"}, BuildOptions{}, func(path string) (Sink, error) {
		if path == "m.md" {
			return nil, refused
		}
		return first, nil
	})
	if !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the open error", err)
	}
	if first.Len() != 0 || first.committed || !first.aborted {
		t.Errorf("first output: %d bytes, committed %v, aborted %v; want nothing written, aborted", first.Len(), first.committed, first.aborted)
	}
}

func TestReadRunsNamesTheFile(t *testing.T) {
	_, err := ReadRuns([]string{fixture("trials_a.jsonl"), "nosuch.jsonl"}, func(name string) (io.ReadCloser, error) { return os.Open(name) }, false)
	if err == nil || !strings.Contains(err.Error(), "nosuch.jsonl") {
		t.Fatalf("err = %v, want one naming nosuch.jsonl", err)
	}
}

// Build tells the page where it is written: a report beside a run's
// results file links its artifacts directory; one on stdout does not.
func TestBuildPageDirLinksArtifacts(t *testing.T) {
	dir := t.TempDir()
	run := artifactsRun(t, dir)
	for out, want := range map[string]bool{filepath.Join(dir, "r.html"): true, "-": false, filepath.Join(t.TempDir(), "r.html"): false} {
		s := &memSink{}
		if err := Build([]*Run{run}, Outputs{HTML: out}, BuildOptions{}, func(string) (Sink, error) { return s, nil }); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(s.String(), `"artifacts":"out.artifacts/"`); got != want {
			t.Errorf("%s: links the artifacts %v, want %v", out, got, want)
		}
	}
}

// A suite run's report, written in the run directory beside the agents'
// outputs, links their artifacts.
func TestRunReportLinksArtifacts(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../testdata/results/capture_steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "agent.jsonl")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, ReportName)
	if err := WriteRunReport([]string{out}, html, "", SuiteOptions{}); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), `"artifacts":"agent.artifacts/"`) {
		t.Errorf("the run's report does not link agent.artifacts/ (%v)", err)
	}
}
