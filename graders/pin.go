package graders

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"harness/schemas"
)

// A grader runs what the user wrote: every file a grader runs or reads
// (an executable, a JavaScript module, a config file, a judge's prompt
// file, a script's program and argument files, a verifier and its
// directory) is fingerprinted when Load builds it, and checked again
// before each grading call. A file that changed since is a grader error
// naming it and both hashes, never a verdict.

// pinSet collects the files a grader being loaded depends on.
type pinSet struct {
	dir   string // paths under it are shown relative to it
	files []*pinnedFile
	seen  map[string]bool
}

// pinnedFile is one file (or directory tree) and its fingerprint.
type pinnedFile struct {
	path    string // absolute
	display string // as shown in messages and provenance
	sum     string // hex sha256 when loaded

	mu    sync.Mutex
	stats map[string]fileStat // last seen state of each file, by path
	sums  map[string]string   // and its hash then
}

// fileStat is what changes whenever a file's content does: the change
// time cannot be set back from user space.
type fileStat struct {
	size, ino   uint64
	mtime, ctim int64
	mode        fs.FileMode
}

func statOf(fi fs.FileInfo) fileStat {
	s := fileStat{size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
		s.ctim = st.Ctim.Nano()
	}
	return s
}

// add fingerprints path (a file, or a directory tree); failures are
// Load errors.
func (s *pinSet) add(path string) error {
	if s == nil {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if s.seen[abs] {
		return nil
	}
	display := abs
	if s.dir != "" {
		if rel, err := filepath.Rel(s.dir, abs); err == nil && !strings.HasPrefix(rel, "..") {
			display = rel
		}
	}
	f := &pinnedFile{path: abs, display: display, stats: map[string]fileStat{}, sums: map[string]string{}}
	sum, err := f.hash()
	if err != nil {
		return fmt.Errorf("grader file %s: %w", path, err)
	}
	f.sum = sum
	s.seen[abs] = true
	s.files = append(s.files, f)
	return nil
}

// addArgv fingerprints a command's own files, argv as written: its
// program when given as a path, and every argument naming a regular file
// in dir. Programs found on PATH (sh, python3, node) are the system's, not
// the grader's.
func (s *pinSet) addArgv(argv []string, dir string) error {
	if s == nil || len(argv) == 0 {
		return nil
	}
	if strings.Contains(argv[0], "/") {
		p := argv[0]
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := s.add(p); err != nil {
			return err
		}
	}
	for _, a := range argv[1:] {
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			if err := s.add(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// hash is the file's sha256, or for a directory the sha256 of its
// regular files' relative paths and hashes, in lexical order. Files whose
// state has not changed since the last call are not read again.
func (f *pinnedFile) hash() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return f.fileHash(f.path, st)
	}
	tree := sha256.New()
	err = filepath.WalkDir(f.path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := f.fileHash(p, fi)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.path, p)
		fmt.Fprintf(tree, "%s\x00%s\n", rel, sum)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(tree.Sum(nil)), nil
}

// fileHash hashes one regular file, unless its state is the one last
// hashed; f.mu is held.
func (f *pinnedFile) fileHash(path string, fi fs.FileInfo) (string, error) {
	st := statOf(fi)
	if prev, ok := f.stats[path]; ok && prev == st {
		return f.sums[path], nil
	}
	r, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	f.stats[path], f.sums[path] = st, sum
	return sum, nil
}

// check reports how the file changed since it was loaded, or nil.
func (f *pinnedFile) check() error {
	sum, err := f.hash()
	switch {
	case err != nil:
		return fmt.Errorf("grader file %s changed during the run: sha256 %s when the run started, now unreadable (%v); the grader did not run", f.display, f.sum, err)
	case sum != f.sum:
		return fmt.Errorf("grader file %s changed during the run: sha256 %s when the run started, %s now; the grader did not run", f.display, f.sum, sum)
	}
	return nil
}

// pinned is a grader whose files are checked before each grading call.
type pinned struct {
	Grader
	files []*pinnedFile
}

// Grade implements Grader: a changed file is a grader error.
func (p *pinned) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	for _, f := range p.files {
		if err := f.check(); err != nil {
			return finish(failure(schemas.ErrGraderError, "%v", err), p.Name(), start)
		}
	}
	return p.Grader.Grade(ctx, in)
}

// pin wraps g so that its files are checked before every call; a grader
// that depends on no file comes back as it is.
func pin(g Grader, set *pinSet) Grader {
	if len(set.files) == 0 {
		return g
	}
	return &pinned{Grader: g, files: set.files}
}

// Fingerprints lists the files grader g runs or reads, with their sha256
// when it was loaded, for a record's provenance.
func Fingerprints(g Grader) []schemas.GraderFile {
	p, ok := g.(*pinned)
	if !ok {
		return nil
	}
	out := make([]schemas.GraderFile, len(p.files))
	for i, f := range p.files {
		out[i] = schemas.GraderFile{Grader: g.Name(), Path: f.display, SHA256: f.sum}
	}
	return out
}

// PinnedPaths returns the absolute paths of every file and directory tree
// g was fingerprinted with (nil for an unpinned grader): what a run keeps
// out of an agent's reach.
func PinnedPaths(g Grader) []string {
	p, ok := g.(*pinned)
	if !ok {
		return nil
	}
	out := make([]string, len(p.files))
	for i, f := range p.files {
		out[i] = f.path
	}
	return out
}
