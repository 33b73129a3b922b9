package graders

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"harness/schemas"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// wantChanged checks that a result is the grader error of a changed file,
// naming it and both hashes.
func wantChanged(t *testing.T, r schemas.GraderResult, file, before, after string) {
	t.Helper()
	if r.Error == nil || r.Error.Class != schemas.ErrGraderError || r.Pass {
		t.Fatalf("result %+v, want a grader_error", r)
	}
	for _, s := range []string{"grader file " + file + " changed during the run", before, after} {
		if !strings.Contains(r.Error.Message, s) {
			t.Errorf("message %q lacks %q", r.Error.Message, s)
		}
	}
}

func TestExecutableChangedDuringRunIsGraderError(t *testing.T) {
	dir := t.TempDir()
	passing := "#!/bin/sh\necho '{\"pass\": false, \"score\": 0}'\n"
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte(passing), 0o755)
	g := load(t, "check.sh", Options{Dir: dir})
	files := Fingerprints(g)
	want := []schemas.GraderFile{{Grader: "exec:check.sh", Path: "check.sh", SHA256: sha(passing)}}
	if !slices.Equal(files, want) {
		t.Fatalf("Fingerprints = %+v, want %+v", files, want)
	}
	wantOK(t, grade(t, g, record("x", "")), false, 0)
	// Rewritten to always pass: the call is an error, never a verdict.
	forged := "#!/bin/sh\necho '{\"pass\": true, \"score\": 1}'\n"
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte(forged), 0o755)
	wantChanged(t, grade(t, g, record("x", "")), "check.sh", sha(passing), sha(forged))
	// Put back as it was, it runs again.
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte(passing), 0o755)
	wantOK(t, grade(t, g, record("x", "")), false, 0)
	// Removed: an error too.
	os.Remove(filepath.Join(dir, "check.sh"))
	r := grade(t, g, record("x", ""))
	if r.Error == nil || !strings.Contains(r.Error.Message, "check.sh changed during the run") || !strings.Contains(r.Error.Message, "unreadable") {
		t.Errorf("removed grader: %+v", r.Error)
	}
}

func TestConfigFilesArePinned(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("prompt.md", "Is {{response}} right?", 0o644)
	write("grade.py", "print('{\"pass\": true}')\n", 0o644)
	write("check.sh", "#!/bin/sh\necho '{\"pass\": true}'\n", 0o755)
	os.Mkdir(filepath.Join(dir, "hidden"), 0o755)
	write("hidden/a_test.go", "package a\n", 0o644)
	cfg := `graders:
  - {type: llm-judge, promptFile: prompt.md, model: m, baseURL: "http://127.0.0.1:1/v1", apiKeyEnv: K}
  - {type: script, command: [python3, grade.py, --flag]}
  - check.sh
  - {type: tests, command: [go, test, -json, ./...], report: go-test-json, files: hidden}
`
	write("all.yaml", cfg, 0o644)
	g := load(t, "all.yaml", Options{Dir: dir, Getenv: envFunc(map[string]string{"K": "k"})})
	var paths []string
	for _, f := range Fingerprints(g) {
		if f.Grader != g.Name() || len(f.SHA256) != 64 {
			t.Errorf("entry %+v", f)
		}
		paths = append(paths, f.Path)
	}
	// The config, the prompt file, the script's own file (not python3),
	// the executable and the verifier directory; nothing twice.
	want := []string{"all.yaml", "prompt.md", "grade.py", "check.sh", "hidden"}
	if !slices.Equal(paths, want) {
		t.Fatalf("pinned %v, want %v", paths, want)
	}
	for _, c := range []struct{ file, name string }{
		{"prompt.md", "prompt.md"}, {"hidden/a_test.go", "hidden"}, {"all.yaml", "all.yaml"},
	} {
		old, _ := os.ReadFile(filepath.Join(dir, c.file))
		write(c.file, string(old)+"\n// changed\n", 0o644)
		r := grade(t, g, record("x", ""))
		if r.Error == nil || !strings.Contains(r.Error.Message, "grader file "+c.name+" changed during the run") {
			t.Errorf("after changing %s: %+v", c.file, r.Error)
		}
		write(c.file, string(old), 0o644)
	}
}

func TestFromConfigPinsToo(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\necho '{\"pass\": true}'\n"), 0o755)
	g, err := FromConfig(map[string]any{"path": "check.sh"}, "suite.yaml", dir, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if f := Fingerprints(g); len(f) != 1 || f[0].Path != "check.sh" {
		t.Fatalf("Fingerprints = %+v", f)
	}
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\necho '{\"pass\": false}'\n"), 0o755)
	if r := grade(t, g, record("x", "")); r.Error == nil || r.Error.Class != schemas.ErrGraderError {
		t.Errorf("changed file: %+v", r)
	}
}

func TestInlineGraderPinsNothing(t *testing.T) {
	g, err := FromConfig(map[string]any{"assert": []any{map[string]any{"type": "contains", "value": "x"}}}, "suite.yaml", t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := Fingerprints(g); f != nil {
		t.Errorf("Fingerprints = %+v, want none", f)
	}
}

// unpinned is the grader a pinned one wraps (g itself when not pinned).
func unpinned(g Grader) Grader {
	if p, ok := g.(*pinned); ok {
		return p.Grader
	}
	return g
}

// A JS or TS grader module rewritten during the run: the call is a grader
// error naming the file, never a verdict.
func TestJSModuleChangedDuringRunIsGraderError(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []struct{ name, failing, forged string }{
		{"rft.js", "function grade(input) { return 0; }", "function grade(input) { return 1; }"},
		{"check.ts", "export default function grade(input: any) { return { pass: false, score: 0 } }\n", "export default function grade(input: any) { return { pass: true, score: 1 } }\n"},
	} {
		path := filepath.Join(dir, m.name)
		if err := os.WriteFile(path, []byte(m.failing), 0o644); err != nil {
			t.Fatal(err)
		}
		g := load(t, path, Options{})
		wantOK(t, grade(t, g, record("x", "")), false, 0)
		if err := os.WriteFile(path, []byte(m.forged), 0o644); err != nil {
			t.Fatal(err)
		}
		wantChanged(t, grade(t, g, record("x", "")), path, sha(m.failing), sha(m.forged))
	}
}
