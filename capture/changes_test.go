package capture

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func changesByPath(cs []schemas.FileChange) map[string]schemas.FileChange {
	m := map[string]schemas.FileChange{}
	for _, c := range cs {
		m[c.Path] = c
	}
	return m
}

// TestChangesIgnoreWhatTheAgentPlants: a workspace whose repository the
// agent armed (fsmonitor, diff and filter drivers, attributes, hooks,
// submodules, links to host files) still gets its changes listed right,
// and nothing the agent wrote runs.
func TestChangesIgnoreWhatTheAgentPlants(t *testing.T) {
	tmpl := t.TempDir()
	writeFiles(t, tmpl, map[string]string{
		"a.py":        "print(1)\n",
		"old.txt":     "same content\n",
		".gitignore":  "build/\n*.log\n!keep.log\n",
		"sub/lib.txt": "library\n",
	})
	if _, err := exec.LookPath("git"); err == nil {
		if out, err := exec.Command("git", "init", "-q", tmpl).CombinedOutput(); err != nil {
			t.Fatalf("git init: %s", out)
		}
		if out, err := exec.Command("git", "init", "-q", filepath.Join(tmpl, "sub")).CombinedOutput(); err != nil {
			t.Fatalf("git init: %s", out)
		}
	}
	ws, err := NewWorkspace(tmpl, t.TempDir(), "hostile")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Remove()
	if err := ws.Baseline(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("HOST-SECRET-KEY"), 0o600)
	touch := "touch " + marker
	os.MkdirAll(filepath.Join(ws.Path, ".git", "hooks"), 0o755)
	writeFiles(t, ws.Path, map[string]string{
		".git/config": "[core]\n\tfsmonitor = " + touch + "\n\tpager = " + touch + "\n[diff \"evil\"]\n\tcommand = " + touch +
			"\n\ttextconv = " + touch + "\n[filter \"evil\"]\n\tclean = " + touch + "\n\tsmudge = " + touch + "\n",
		".gitattributes": "*.py diff=evil filter=evil\n* -diff\n",
		".gitmodules":    "[submodule \"x\"]\n\tpath = x\n\turl = ext::sh -c " + touch + "\n",
		"a.py":           "print(2)\n",
		"build/out.o":    "ignored",
		"debug.log":      "ignored",
		"keep.log":       "kept",
		"sub/lib.txt":    "library\nchanged\n",
		".gitignore":     "*\n", // the agent's own rules hide nothing
	})
	os.WriteFile(filepath.Join(ws.Path, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\n"+touch+"\n"), 0o755)
	os.Rename(filepath.Join(ws.Path, "old.txt"), filepath.Join(ws.Path, "new.txt"))
	os.Symlink(secret, filepath.Join(ws.Path, "leak"))
	os.Symlink("../../../../../../.."+secret, filepath.Join(ws.Path, "leak2"))

	changes, err := ws.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a command the agent planted ran on the host")
	}
	got := changesByPath(changes)
	for _, c := range changes {
		if strings.Contains(c.Diff+c.Content, "HOST-SECRET-KEY") {
			t.Errorf("%s: the host file's bytes are on the record", c.Path)
		}
	}
	want := map[string]string{
		"a.py": "modified", ".gitattributes": "added", ".gitmodules": "added", "keep.log": "added",
		"sub/lib.txt": "modified", "new.txt": "renamed", "leak": "added", "leak2": "added", ".gitignore": "modified",
		".git/config": "", ".git/hooks/pre-commit": "added",
	}
	for p, status := range want {
		c, ok := got[p]
		if !ok {
			t.Errorf("%s: not listed; changes: %v", p, changes)
			continue
		}
		if status != "" && c.Status != status {
			t.Errorf("%s: status %s, want %s", p, c.Status, status)
		}
	}
	for _, p := range []string{"build/out.o", "debug.log"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s: ignored by the template's .gitignore, but listed", p)
		}
	}
	if d := got["a.py"].Diff; !strings.Contains(d, "-print(1)\n+print(2)\n") || !strings.HasPrefix(d, "diff --git a/a.py b/a.py\n") {
		t.Errorf("a.py diff:\n%s", d)
	}
	if c := got["new.txt"]; c.From != "old.txt" {
		t.Errorf("rename from %q", c.From)
	}
	if d := got["leak"].Diff; !strings.Contains(d, "new file mode 120000") || !strings.Contains(d, "+"+secret) {
		t.Errorf("a link is listed as its target:\n%s", d)
	}

	// The recorded changes rebuild the workspace exactly (but for .git).
	dst := t.TempDir()
	rec := &schemas.Workspace{FileChanges: changes}
	if err := Rebuild(tmpl, rec, dst); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a.py", "new.txt", "sub/lib.txt", "keep.log", ".gitattributes"} {
		a, _ := os.ReadFile(filepath.Join(ws.Path, p))
		b, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil || string(a) != string(b) {
			t.Errorf("rebuilt %s = %q (%v), want %q", p, b, err, a)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "old.txt")); err == nil {
		t.Error("rebuilt: old.txt still there after the rename")
	}
	if l, err := os.Readlink(filepath.Join(dst, "leak")); err != nil || l != secret {
		t.Errorf("rebuilt link: %q, %v", l, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("rebuilding ran a command the agent planted")
	}
}

func TestIgnoreRules(t *testing.T) {
	var r ignoreRules
	r.add("", []byte("# comment\n*.o\n/top.txt\nbuild/\ndocs/**/*.tmp\n!important.o\n"))
	r.add("sub", []byte("local.txt\n"))
	for _, c := range []struct {
		path string
		dir  bool
		want bool
	}{
		{"x.o", false, true}, {"a/b/x.o", false, true}, {"important.o", false, false},
		{"top.txt", false, true}, {"a/top.txt", false, false},
		{"build", true, true}, {"build", false, false}, {"a/build", true, true},
		{"docs/x.tmp", false, true}, {"docs/a/b/x.tmp", false, true}, {"x.tmp", false, false},
		{"sub/local.txt", false, true}, {"local.txt", false, false},
	} {
		if got := r.ignored(c.path, c.dir); got != c.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}

// A record is input, and its paths may be forged: a change whose path
// leads out of the workspace (.., absolute, or through a link in the
// template copy) is refused, and nothing is written or removed outside.
func TestApplyChangesStaysInTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	content := base64.StdEncoding.EncodeToString([]byte("forged"))
	for _, c := range []schemas.FileChange{
		{Path: "../" + filepath.Base(outside) + "/victim", Status: "modified", Binary: true, Content: content, Size: 6},
		{Path: victim, Status: "deleted"},
		{Path: "a.txt", From: "../victim", Status: "renamed", Binary: true, Content: content, Size: 6},
		{Path: "out/victim", Status: "modified", Binary: true, Content: content, Size: 6},
	} {
		dst := filepath.Join(t.TempDir(), "ws")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		// The template copy holds a link out (the template's own).
		if err := os.Symlink(outside, filepath.Join(dst, "out")); err != nil {
			t.Fatal(err)
		}
		err := ApplyChanges(&schemas.Workspace{FileChanges: []schemas.FileChange{c}}, dst)
		if err == nil {
			t.Errorf("change %q (from %q) applied", c.Path, c.From)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep" {
			t.Fatalf("change %q reached the file outside: %q", c.Path, b)
		}
	}
}
