package view

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

// artifactsFixture writes a results file of two trials, the first with
// artifacts (a text file, a directory, a binary file, a link that points
// out of the artifacts and a file the record does not list), the second
// whose record names a directory outside them, and a secret beside the
// results file.
func artifactsFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	r1 := synthRecord("task", 1, true, 2, 200)
	r1.Artifacts = &schemas.Artifacts{Dir: "somewhere/else/out.artifacts/task-t1", Paths: []string{"report.txt", "logs", "bin.dat", "link.txt", "up"}}
	r2 := synthRecord("task", 2, true, 2, 200)
	r2.Artifacts = &schemas.Artifacts{Dir: "..", Paths: []string{"secret.txt"}}
	writeRecords(t, filepath.Join(dir, "out.jsonl"), r1, r2)
	a := filepath.Join(dir, "out.artifacts", "task-t1")
	for name, body := range map[string]string{
		"report.txt":       "done\nünïcode\n",
		"logs/run.log":     "trial-log\n",
		"bin.dat":          "\x00\x01\x02binary",
		"unlisted.txt":     "not an artifact of the record\n",
		"../../secret.txt": "TOP-SECRET\n",
	} {
		p := filepath.Join(a, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(a, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(a, "up")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// get fetches a path of the test server: status, content type,
// disposition and body.
func get(t *testing.T, base, p string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(base + p)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// /api/artifact serves the files of a trial's artifacts, under its
// output's artifacts directory only: text inline as text/plain, other
// bytes as a download, and never a path outside (.., absolute, a link
// out, a path the record does not list, a record that names another
// directory).
func TestServerArtifacts(t *testing.T) {
	dir := artifactsFixture(t)
	ts := serve(t, newIndex(t, dir), ServerOptions{})
	q := func(trial, p string) string {
		return "/api/artifact?" + url.Values{"src": {"out.jsonl"}, "id": {"task"}, "trial": {trial}, "path": {p}}.Encode()
	}
	for _, tc := range []struct {
		trial, path string
		code        int
		ctype, disp string
		body        string
	}{
		{"1", "report.txt", 200, "text/plain; charset=utf-8", "inline", "done\nünïcode\n"},
		{"1", "logs/run.log", 200, "text/plain; charset=utf-8", "inline", "trial-log\n"},
		{"1", "bin.dat", 200, "application/octet-stream", "attachment", "\x00\x01\x02binary"},
		{"1", "../../secret.txt", 400, "", "", ""},
		{"1", "logs/../../../secret.txt", 400, "", "", ""},
		{"1", "/etc/passwd", 400, "", "", ""},
		{"1", filepath.Join(dir, "secret.txt"), 400, "", "", ""},
		{"1", "", 400, "", "", ""},
		{"1", "logs\\..\\..\\secret.txt", 400, "", "", ""},
		{"1", "link.txt", 403, "", "", ""},
		{"1", "up/secret.txt", 403, "", "", ""},
		{"1", "unlisted.txt", 404, "", "", ""},
		{"1", "logs", 404, "", "", ""},
		{"2", "secret.txt", 404, "", "", ""},
		{"3", "report.txt", 404, "", "", ""},
	} {
		code, h, body := get(t, ts.URL, q(tc.trial, tc.path))
		if code != tc.code {
			t.Errorf("trial %s, %q: status %d, want %d (%s)", tc.trial, tc.path, code, tc.code, strings.TrimSpace(body))
			continue
		}
		if strings.Contains(body, "TOP-SECRET") {
			t.Errorf("trial %s, %q: the secret leaked: %q", tc.trial, tc.path, body)
		}
		if code != 200 {
			continue
		}
		if h.Get("Content-Type") != tc.ctype || !strings.HasPrefix(h.Get("Content-Disposition"), tc.disp) || body != tc.body {
			t.Errorf("%q: %s, %s, %q; want %s, %s, %q", tc.path, h.Get("Content-Type"), h.Get("Content-Disposition"), body, tc.ctype, tc.disp, tc.body)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%q: CSP %q, nosniff %q", tc.path, csp, h.Get("X-Content-Type-Options"))
		}
	}
	// The trial lists the files it serves, links left out.
	var d struct {
		ArtifactFiles []string `json:"artifactFiles"`
	}
	if code := getJSON(t, ts, "/api/trial?src=out.jsonl&id=task&trial=1", &d); code != 200 || strings.Join(d.ArtifactFiles, "|") != "bin.dat|logs/run.log|report.txt" {
		t.Errorf("artifact files: %d %q", code, d.ArtifactFiles)
	}
	d.ArtifactFiles = nil
	if code := getJSON(t, ts, "/api/trial?src=out.jsonl&id=task&trial=2", &d); code != 200 || len(d.ArtifactFiles) != 0 {
		t.Errorf("trial 2's artifact files: %d %q", code, d.ArtifactFiles)
	}
}

func TestIsText(t *testing.T) {
	for s, want := range map[string]bool{"plain\n": true, "ü": true, "\xc3": true, "a\x00b": false, "\xff\xfe": false, "": true} {
		if isText([]byte(s)) != want {
			t.Errorf("isText(%q) = %v", s, !want)
		}
	}
}
