package capture

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"harness/schemas"
)

// maxDiffBytes caps the files a text diff is made for, and the diff itself.
const maxDiffBytes = 256 << 10

// Workspace is a fresh copy of a template directory for one case.
type Workspace struct {
	Template string
	Path     string
	// source is the directory the copy was made from.
	source string
	// baseDir and base are the baseline the changes are counted from:
	// the source (when nothing ran in the copy before the agent) or a
	// snapshot of the copy taken after its setup command.
	baseDir  string
	base     *tree
	snapshot string
}

// Baseline records the copy as it is now, so that Changes lists what
// happened since: the agent's work, not the setup's. Without a setup
// command the copy is its source, whose listing (given, when the run has
// it already) is the baseline; after one, the copy is snapshotted into a
// private directory beside it (tmpDir) that no agent can reach.
func (w *Workspace) Baseline() error { return w.baseline(nil, "", false) }

func (w *Workspace) baseline(sourceTree *tree, tmpDir string, changed bool) error {
	if !changed {
		w.baseDir = w.source
		if sourceTree != nil {
			w.base = sourceTree
			return nil
		}
		t, err := listTree(w.source, nil)
		if err != nil {
			return fmt.Errorf("workspace baseline %s: %w", w.source, err)
		}
		w.base = t
		return nil
	}
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

// NewWorkspace copies template into a new temporary directory under tmpDir
// ("" = the system default). Regular files, directories and symlinks are
// copied; modes are kept.
func NewWorkspace(template, tmpDir, name string) (*Workspace, error) {
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

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel == "." {
				return os.Chmod(dst, info.Mode().Perm()|0o700)
			}
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, devices: skipped
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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

// dropBaseline removes the baseline snapshot once the changes are taken:
// the copy alone is kept (or graded later).
func (w *Workspace) dropBaseline() {
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
