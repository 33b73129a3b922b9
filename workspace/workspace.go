// Package workspace makes and reads the directories agents work in: a
// case's fresh copy of a template, the changes the agent made to it (the
// work tree's files, what changed inside a repository's .git, and, in an
// image layer, the paths outside the working directory), and a record's
// workspace rebuilt from the changes it holds.
//
// The changes are found in Go, never by running a program on the tree the
// agent left (see Changes); a record's changes are applied inside the
// destination only, whatever paths a forged record names (see
// ApplyChanges).
package workspace

import (
	"fmt"
	"os"
	"path/filepath"

	"harness/internal/treecopy"
	"harness/schemas"
)

// maxDiffBytes caps the files a text diff is made for, and the diff itself.
const maxDiffBytes = 256 << 10

// Workspace is a fresh copy of a template directory for one case.
type Workspace struct {
	// Template is the directory the record names as the copy's template.
	Template string
	// Path is the copy.
	Path string
	// source is the directory the copy was made from.
	source string
	// baseDir and base are the baseline the changes are counted from:
	// the source (when nothing ran in the copy before the agent) or a
	// snapshot of the copy taken after its setup command.
	baseDir  string
	base     *tree
	snapshot string
}

// Baseline records what the copy was before the agent, so that Changes
// lists what happened since: the agent's work, not a setup command's.
// Without a setup command the copy is its source, whose listing is the
// baseline: Baseline lists the source now, BaselineListed takes a listing
// the run made already. After a setup command, BaselineSnapshot keeps a
// private copy of the copy.
func (w *Workspace) Baseline() error {
	t, err := List(w.source)
	if err != nil {
		return err
	}
	w.BaselineListed(t)
	return nil
}

// BaselineListed takes the listing of the copy's source, made once for
// every copy of it (List), as the baseline: nothing ran in the copy
// before the agent.
func (w *Workspace) BaselineListed(source *Listing) {
	w.baseDir, w.base = w.source, source.tree
}

// BaselineSnapshot records the copy as it is now, after a setup command
// ran in it, by copying it into a private directory under tmpDir ("" =
// the system default) that no agent can reach.
func (w *Workspace) BaselineSnapshot(tmpDir string) error {
	snap, err := os.MkdirTemp(tmpDir, "harness-base-")
	if err != nil {
		return fmt.Errorf("workspace baseline: %w", err)
	}
	if err := copyTree(w.Path, snap); err != nil {
		os.RemoveAll(snap)
		return fmt.Errorf("workspace baseline: %w", err)
	}
	t, err := listTree(snap, nil)
	if err != nil {
		os.RemoveAll(snap)
		return fmt.Errorf("workspace baseline: %w", err)
	}
	w.snapshot, w.baseDir, w.base = snap, snap, t
	return nil
}

// Listing is a directory listed as a baseline: its files and links with
// their modes and content hashes, and the .gitignore rules it holds.
type Listing struct {
	tree *tree
}

// List lists dir as the baseline of the copies made from it.
func List(dir string) (*Listing, error) {
	t, err := listTree(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("workspace baseline %s: %w", dir, err)
	}
	return &Listing{tree: t}, nil
}

// New copies template into a new temporary directory under tmpDir ("" =
// the system default), named after name. Regular files, directories and
// symlinks are copied; modes are kept.
func New(template, tmpDir, name string) (*Workspace, error) {
	info, err := os.Stat(template)
	if err != nil {
		return nil, fmt.Errorf("workspace template: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("workspace template %s is not a directory", template)
	}
	dir, err := os.MkdirTemp(tmpDir, "harness-ws-"+sanitize(name)+"-")
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if err := copyTree(template, dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("copy workspace %s: %w", template, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		dir = real
	}
	return &Workspace{Template: template, Path: dir, source: template}, nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// copyTree copies a template (or a copy) into the empty directory dst:
// directories, files and symbolic links, with their permission bits (the
// top directory's too), directories writable by their owner; sockets and
// devices are left out.
func copyTree(src, dst string) error {
	return treecopy.Copy(src, dst, treecopy.Options{RootMode: true})
}

// Changes lists what was added, modified, deleted or renamed in the
// workspace since its baseline, with unified diffs for text files: files
// are the work tree's changes, git those inside a repository's .git.
func (w *Workspace) Changes() (files, git []schemas.FileChange, err error) {
	if w.base == nil {
		if err := w.Baseline(); err != nil {
			return nil, nil, err
		}
	}
	all, err := diffTrees(w.baseDir, w.base, w.Path)
	if err != nil {
		return nil, nil, err
	}
	files, git = splitGit(all)
	return files, git, nil
}

// DropBaseline removes the baseline snapshot once the changes are taken:
// the copy alone is kept (or graded later).
func (w *Workspace) DropBaseline() {
	if w.snapshot != "" {
		os.RemoveAll(w.snapshot)
		w.snapshot = ""
	}
}

// Remove deletes the workspace copy, and its baseline snapshot if it has
// one.
func (w *Workspace) Remove() error {
	if w.snapshot != "" {
		os.RemoveAll(w.snapshot)
	}
	return os.RemoveAll(w.Path)
}
