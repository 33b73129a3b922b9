package workspace

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
	ws, err := New(tmpl, t.TempDir(), "hostile")
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

	changes, git, err := ws.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a command the agent planted ran on the host")
	}
	got := changesByPath(append(changes, git...))
	for _, c := range append(changes, git...) {
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

// A template that is a git repository, and an agent that commits: the
// work tree's changes are fileChanges, with no path under .git; what the
// commit changed inside .git (the message, the branch's ref) and an edited
// .git/config, with its diff, are gitChanges; objects, logs and the index
// are listed in neither.
func TestChangesPartGitFromTheWorkTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	tmpl := t.TempDir()
	writeFiles(t, tmpl, map[string]string{"a.py": "print(1)\n", "old.txt": "same\n"})
	gitIn := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitIn(tmpl, "init", "-q")
	gitIn(tmpl, "add", "-A")
	gitIn(tmpl, "commit", "-q", "-m", "template")
	ws, err := New(tmpl, t.TempDir(), "git")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Remove()
	if err := ws.Baseline(); err != nil {
		t.Fatal(err)
	}
	// The agent edits a file, renames one, commits, and arms .git/config.
	writeFiles(t, ws.Path, map[string]string{"a.py": "print(2)\n"})
	os.Rename(filepath.Join(ws.Path, "old.txt"), filepath.Join(ws.Path, "new.txt"))
	gitIn(ws.Path, "add", "-A")
	gitIn(ws.Path, "commit", "-q", "-m", "the agent's commit")
	gitIn(ws.Path, "config", "core.sshCommand", "touch /tmp/pwned")

	files, git, err := ws.Changes()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range files {
		if inGitDir(c.Path) {
			t.Errorf("fileChanges lists %s (%s)", c.Path, c.Status)
		}
	}
	got := changesByPath(files)
	if got["a.py"].Status != "modified" || got["new.txt"].Status != "renamed" || len(files) != 2 {
		t.Errorf("fileChanges: %+v", files)
	}
	gg := changesByPath(git)
	for p, status := range map[string]string{".git/COMMIT_EDITMSG": "modified", ".git/refs/heads/main": "modified", ".git/config": "modified"} {
		if c, ok := gg[p]; !ok || c.Status != status {
			t.Errorf("gitChanges[%s] = %+v, want %s; gitChanges: %+v", p, c, status, git)
		}
	}
	if d := gg[".git/config"].Diff; !strings.Contains(d, "+\tsshCommand = touch /tmp/pwned") {
		t.Errorf(".git/config diff:\n%s", d)
	}
	for _, c := range git {
		if gitInternal(c.Path) {
			t.Errorf("gitChanges lists bulk git data %s", c.Path)
		}
		if c.Content != "" {
			t.Errorf("gitChanges keeps the content of %s", c.Path)
		}
	}
}

// A binary file under .git is listed without its content; a file moved
// from the work tree into .git is a deletion there and an addition here,
// never a rename across the two.
func TestSplitGit(t *testing.T) {
	tmpl := t.TempDir()
	writeFiles(t, tmpl, map[string]string{"moved.txt": "x\n", ".git/HEAD": "ref: refs/heads/main\n"})
	ws, err := New(tmpl, t.TempDir(), "split")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Remove()
	if err := ws.Baseline(); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(ws.Path, "moved.txt"), filepath.Join(ws.Path, ".git", "moved.txt"))
	writeFiles(t, ws.Path, map[string]string{".git/blob": "\x00\x01binary", "sub/.git": "gitdir: ../elsewhere\n"})
	files, git, err := ws.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "moved.txt" || files[0].Status != "deleted" {
		t.Errorf("fileChanges: %+v", files)
	}
	gg := changesByPath(git)
	if c := gg[".git/moved.txt"]; c.Status != "added" {
		t.Errorf(".git/moved.txt: %+v", c)
	}
	if c := gg[".git/blob"]; c.Status != "added" || !c.Binary || c.Content != "" || c.Size != 8 {
		t.Errorf(".git/blob: %+v", c)
	}
	if c := gg["sub/.git"]; c.Status != "added" {
		t.Errorf("sub/.git: %+v", c)
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
