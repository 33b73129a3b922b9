package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/image"
	"harness/schemas"
)

// A copy is a fresh directory under tmpDir named after the case, with the
// template's files, links and executable bits; Remove takes it away.
func TestNewCopiesTheTemplate(t *testing.T) {
	tmpl, tmp := t.TempDir(), t.TempDir()
	writeFiles(t, tmpl, map[string]string{"run.sh": "#!/bin/sh\n", "src/a.py": "print(1)\n"})
	os.Chmod(filepath.Join(tmpl, "run.sh"), 0o755)
	if err := os.Symlink("src/a.py", filepath.Join(tmpl, "main.py")); err != nil {
		t.Fatal(err)
	}
	ws, err := New(tmpl, tmp, "case/1 t0")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(ws.Path) != tmp || !strings.HasPrefix(filepath.Base(ws.Path), "harness-ws-case_1_t0-") {
		t.Errorf("copy at %s, want harness-ws-case_1_t0-* in %s", ws.Path, tmp)
	}
	if b, err := os.ReadFile(filepath.Join(ws.Path, "src/a.py")); err != nil || string(b) != "print(1)\n" {
		t.Errorf("src/a.py = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(ws.Path, "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its executable bit: %v, %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(ws.Path, "main.py")); err != nil || l != "src/a.py" {
		t.Errorf("main.py -> %q, %v", l, err)
	}
	if files, _, err := ws.Changes(); err != nil || len(files) != 0 {
		t.Errorf("a fresh copy has changes: %+v, %v", files, err)
	}
	if err := ws.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Path); !os.IsNotExist(err) {
		t.Errorf("the copy is still there after Remove: %v", err)
	}
	if _, err := New(filepath.Join(tmpl, "run.sh"), tmp, "x"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as template: %v", err)
	}
}

// After a setup command, the baseline is a snapshot of the copy: what the
// setup did is not the agent's change. DropBaseline removes the snapshot.
func TestBaselineSnapshotLeavesOutTheSetup(t *testing.T) {
	tmpl, tmp, snaps := t.TempDir(), t.TempDir(), t.TempDir()
	writeFiles(t, tmpl, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	ws, err := New(tmpl, tmp, "setup")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Remove()
	// The setup command's work.
	writeFiles(t, ws.Path, map[string]string{"a.txt": "set up\n", "deps.lock": "x\n"})
	if err := ws.BaselineSnapshot(snaps); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(snaps); len(ents) != 1 {
		t.Fatalf("snapshots in %s: %v, want one", snaps, ents)
	}
	// The agent's.
	writeFiles(t, ws.Path, map[string]string{"b.txt": "changed\n"})
	files, _, err := ws.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "b.txt" || files[0].Status != "modified" {
		t.Errorf("changes: %+v, want b.txt modified alone", files)
	}
	ws.DropBaseline()
	if ents, _ := os.ReadDir(snaps); len(ents) != 0 {
		t.Errorf("the snapshot is still there: %v", ents)
	}
}

// One listing of the source serves every copy of it.
func TestBaselineListedServesEveryCopy(t *testing.T) {
	tmpl := t.TempDir()
	writeFiles(t, tmpl, map[string]string{"a.txt": "a\n"})
	source, err := List(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var copies []*Workspace
	for _, name := range []string{"one", "two"} {
		ws, err := New(tmpl, t.TempDir(), name)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Remove()
		ws.BaselineListed(source)
		copies = append(copies, ws)
	}
	writeFiles(t, copies[0].Path, map[string]string{"a.txt": "one\n"})
	writeFiles(t, copies[1].Path, map[string]string{"new.txt": "two\n"})
	for i, want := range []string{"a.txt modified", "new.txt added"} {
		files, _, err := copies[i].Changes()
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 1 || files[0].Path+" "+files[0].Status != want {
			t.Errorf("copy %d: %+v, want %s", i, files, want)
		}
	}
	if _, err := List(filepath.Join(tmpl, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("List of a missing directory: %v", err)
	}
}

// A layer's changes: the working directory's files with diffs against the
// image (the work tree's and .git's apart), the rest by path, and the
// paths skip names left out.
func TestLayerChanges(t *testing.T) {
	rootfs, dir := t.TempDir(), t.TempDir()
	writeFiles(t, rootfs, map[string]string{"app/main.py": "print(1)\n", "etc/hosts": "127.0.0.1 localhost\n"})
	upper := filepath.Join(dir, "upper")
	writeFiles(t, upper, map[string]string{
		"app/main.py":     "print(2)\n",
		"app/new.txt":     "new\n",
		"app/.git/config": "[core]\n",
		"etc/hosts":       "10.0.0.1 evil\n",
		"tests/test.sh":   "exit 0\n",
	})
	l := &image.Layer{Image: &image.Image{Rootfs: rootfs}, Dir: dir}
	skip := func(p string) bool { return p == "/tests" || strings.HasPrefix(p, "/tests/") }
	files, git, outside, err := LayerChanges(l, "/app", skip)
	if err != nil {
		t.Fatal(err)
	}
	got := changesByPath(files)
	if c := got["main.py"]; c.Status != "modified" || !strings.Contains(c.Diff, "-print(1)\n+print(2)\n") {
		t.Errorf("main.py: %+v", c)
	}
	if c := got["new.txt"]; c.Status != "added" || !strings.Contains(c.Diff, "+new\n") {
		t.Errorf("new.txt: %+v", c)
	}
	if len(files) != 2 {
		t.Errorf("file changes: %+v", files)
	}
	if len(git) != 1 || git[0].Path != ".git/config" || git[0].Status != "added" {
		t.Errorf("git changes: %+v", git)
	}
	if len(outside) != 1 || outside[0] != (schemas.PathChange{Path: "/etc/hosts", Status: "modified"}) {
		t.Errorf("outside changes: %+v, want /etc/hosts modified alone", outside)
	}
}

// A record whose change cannot be replayed exactly fails the rebuild,
// naming the file.
func TestRebuildRefusesWhatWasNotKept(t *testing.T) {
	tmpl := t.TempDir()
	writeFiles(t, tmpl, map[string]string{"a.txt": "a\n"})
	for _, c := range []schemas.FileChange{
		{Path: "a.txt", Status: "modified", Diff: "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n[diff truncated]\n"},
		{Path: "big.bin", Status: "added", Binary: true, Size: 2 << 20},
	} {
		err := Rebuild(tmpl, &schemas.Workspace{FileChanges: []schemas.FileChange{c}}, t.TempDir())
		if err == nil || !strings.HasPrefix(err.Error(), c.Path+": ") {
			t.Errorf("rebuild with %s %s: %v, want an error naming it", c.Status, c.Path, err)
		}
	}
}
