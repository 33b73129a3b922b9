package capture

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"

	"harness/internal/safefile"
	"harness/schemas"
)

// maxDiffBytes caps the files a text diff is made for, and the diff itself.
const maxDiffBytes = 256 << 10

// Workspace is a fresh copy of a template directory for one case.
type Workspace struct {
	Template string
	Path     string
	// bases are the baseline commits of the copy's repositories (relative
	// path, "" for the root); nil when the copy has no git baseline, and
	// changes are found by comparing with the template.
	bases map[string]string
}

// Baseline commits the copy as it is now (after any setup command), so that
// Changes lists what happened since: the agent's work, not the setup's. It
// does nothing when git is not installed.
func (w *Workspace) Baseline() error {
	if !gitAvailable() {
		return nil
	}
	bases, err := baseline(w.Path)
	if err != nil {
		return fmt.Errorf("workspace baseline: %w", err)
	}
	w.bases = bases
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
	return &Workspace{Template: template, Path: dir}, nil
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

// Changes compares the workspace with its template and lists what was
// added, modified or deleted, with unified diffs for text files.
func (w *Workspace) Changes() ([]schemas.FileChange, error) {
	if w.bases != nil {
		return gitChanges(w.Path, w.bases)
	}
	before, err := listFiles(w.Template)
	if err != nil {
		return nil, err
	}
	after, err := listFiles(w.Path)
	if err != nil {
		return nil, err
	}
	changes := []schemas.FileChange{}
	for rel, a := range after {
		b, existed := before[rel]
		switch {
		case !existed:
			changes = append(changes, w.change(rel, "added", nil, a))
		case !sameFile(b, a):
			changes = append(changes, w.change(rel, "modified", b, a))
		}
	}
	for rel, b := range before {
		if _, ok := after[rel]; !ok {
			changes = append(changes, w.change(rel, "deleted", b, nil))
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, nil
}

type fileInfo struct {
	path string
	size int64
	link string
	mode fs.FileMode
}

func listFiles(root string) (map[string]*fileInfo, error) {
	files := map[string]*fileInfo{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fi := &fileInfo{path: path, size: info.Size(), mode: info.Mode()}
		if d.Type()&fs.ModeSymlink != 0 {
			fi.link, _ = os.Readlink(path)
		} else if !d.Type().IsRegular() {
			return nil
		}
		files[filepath.ToSlash(rel)] = fi
		return nil
	})
	return files, err
}

func sameFile(a, b *fileInfo) bool {
	if a.link != "" || b.link != "" {
		return a.link == b.link
	}
	if a.size != b.size || a.mode.Perm() != b.mode.Perm() {
		return false
	}
	x, err1 := safefile.Read(a.path, a.size)
	y, err2 := safefile.Read(b.path, b.size)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func (w *Workspace) change(rel, status string, before, after *fileInfo) schemas.FileChange {
	c := schemas.FileChange{Path: rel, Status: status}
	if after != nil {
		c.Size = after.size
	}
	old, oldOK := readText(before)
	cur, curOK := readText(after)
	if !oldOK || !curOK {
		c.Binary = true
		return c
	}
	d := udiff.Unified("a/"+rel, "b/"+rel, old, cur)
	if len(d) > maxDiffBytes {
		d = d[:maxDiffBytes] + "\n[diff truncated]\n"
	}
	c.Diff = d
	return c
}

// readText returns a file's text; ok is false for binary or large files.
// A missing file reads as empty text.
func readText(f *fileInfo) (string, bool) {
	if f == nil {
		return "", true
	}
	if f.link != "" {
		return "symlink -> " + f.link + "\n", true
	}
	if f.size > maxDiffBytes {
		return "", false
	}
	b, err := safefile.Read(f.path, maxDiffBytes)
	if err != nil || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// Remove deletes the workspace copy.
func (w *Workspace) Remove() error { return os.RemoveAll(w.Path) }
