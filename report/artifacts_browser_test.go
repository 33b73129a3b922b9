package report

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// artifactsRun reads the multi-step trial of testdata/results as the
// results file dir/out.jsonl, its record with artifacts (a file and a
// directory) that are in dir/out.artifacts.
func artifactsRun(t *testing.T, dir string) *Run {
	t.Helper()
	b, err := os.ReadFile("../testdata/results/capture_steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["artifacts"] = map[string]any{"dir": "elsewhere/out.artifacts/three-steps-t1", "paths": []string{"report.txt", "logs dir"}}
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"report.txt": "done\n", "logs dir/run.log": "trial-log\n"} {
		p := filepath.Join(dir, "out.artifacts", "three-steps-t1", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run, err := ReadRun(filepath.Join(dir, "out.jsonl"), bytes.NewReader(append(line, '\n')), RunOptions{Details: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	return run
}

// TestBrowserArtifactLinks: a report written beside a run's artifacts
// directory links each artifact relatively, and the link leads to the
// file's bytes; written elsewhere, it names them without links.
func TestBrowserArtifactLinks(t *testing.T) {
	dir := t.TempDir()
	run := artifactsRun(t, dir)
	path := writeHTML(t, dir, Options{Dir: dir}, run)
	tb := newTab(t, 1200, 900)
	tb.open(path, "case=three-steps")
	tb.waitJS(`!!document.querySelector("#detail .artifacts")`)
	type link struct{ Text, Href, URL string }
	links := evalJS[[]link](tb, `[...document.querySelectorAll("#detail .artifacts a.alink")].map(a => ({Text: a.textContent, Href: a.getAttribute("href"), URL: a.href}))`)
	if len(links) != 2 || links[0].Href != "out.artifacts/three-steps-t1/report.txt" || links[1].Href != "out.artifacts/three-steps-t1/logs%20dir" {
		t.Fatalf("links %+v", links)
	}
	u, err := url.Parse(links[0].URL)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("link URL %q: %v", links[0].URL, err)
	}
	if b, err := os.ReadFile(u.Path); err != nil || string(b) != "done\n" {
		t.Errorf("the link leads to %q: %v", b, err)
	}
	tb.clean()

	other := t.TempDir()
	path = writeHTML(t, other, Options{Dir: other}, run)
	tb = newTab(t, 1200, 900)
	tb.open(path, "case=three-steps")
	tb.waitJS(`!!document.querySelector("#detail .artifacts")`)
	if n := evalJS[int](tb, `document.querySelectorAll("#detail .artifacts a").length`); n != 0 {
		t.Errorf("a report away from the artifacts has %d links", n)
	}
	if arts := evalJS[[]string](tb, `[...document.querySelectorAll("#detail .artifacts li")].map(l => l.textContent)`); strings.Join(arts, "|") != "report.txt|logs dir" {
		t.Errorf("artifacts %q", arts)
	}
	tb.clean()
}

func TestArtifactsBeside(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, dir, want string }{
		{filepath.Join(dir, "out.jsonl"), dir, "out.artifacts/"},
		{filepath.Join(dir, "a b.jsonl.zst"), dir, "a%20b.artifacts/"},
		{filepath.Join(dir, "sub", "out.jsonl"), dir, ""},
		{filepath.Join(dir, "out.jsonl"), "", ""},
		{"-", dir, ""},
	} {
		if got := artifactsBeside(tc.name, tc.dir); got != tc.want {
			t.Errorf("artifactsBeside(%q, %q) = %q, want %q", tc.name, tc.dir, got, tc.want)
		}
	}
}
