package view

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"harness/results"
	"harness/schemas"
)

// maxArtifactFiles bounds the files of a trial's artifacts listed.
const maxArtifactFiles = 1000

// artifactsCSP is the Content-Security-Policy of an artifact's bytes: a
// file a trial left is never a page of the viewer's.
const artifactsCSP = "default-src 'none'; sandbox"

// trialArtifacts is where a trial's artifacts are: the artifacts
// directory of its output (results.ArtifactsDir) and, in it, the trial's
// own directory, the last element of the record's artifacts.dir (the
// record may be read from elsewhere than where it was written). ok is
// false when the record has no artifacts, or names no directory of one
// element.
func trialArtifacts(src *Source, a *schemas.Artifacts) (root, name string, ok bool) {
	if a == nil || a.Dir == "" {
		return "", "", false
	}
	name = filepath.Base(filepath.FromSlash(a.Dir))
	if name == "." || name == ".." || name == string(filepath.Separator) || !filepath.IsLocal(name) {
		return "", "", false
	}
	return results.ArtifactsDir(src.path), name, true
}

// artifactPath checks a path asked for under a trial's artifacts: local
// (not absolute, no ".." element, no empty one), with slashes, and one of
// the record's artifacts or inside one.
func artifactPath(p string, a *schemas.Artifacts) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") || path.IsAbs(p) || !filepath.IsLocal(filepath.FromSlash(p)) || path.Clean(p) != p {
		return "", fmt.Errorf("%w: path=%q: want a relative path inside the trial's artifacts", errBadRequest, p)
	}
	for _, q := range a.Paths {
		if p == q || strings.HasPrefix(p, q+"/") {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: path=%q is not one of the trial's artifacts", errNotFound, p)
}

// artifactFiles lists the regular files of a trial's artifacts (slash
// paths relative to its directory, at most maxArtifactFiles), without
// following links: what the trial page links to.
func artifactFiles(src *Source, a *schemas.Artifacts) []string {
	root, name, ok := trialArtifacts(src, a)
	if !ok {
		return nil
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil
	}
	defer r.Close()
	var out []string
	fs.WalkDir(r.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(out) >= maxArtifactFiles {
			return fs.SkipDir
		}
		if d.Type().IsRegular() {
			rel := strings.TrimPrefix(p, name+"/")
			if _, err := artifactPath(rel, a); err == nil {
				out = append(out, rel)
			}
		}
		return nil
	})
	return out
}

// apiArtifact serves one file of a trial's artifacts (?src=&id=&trial=
// and path=, relative to the trial's artifacts directory). Only the
// record's artifacts are served, read through an os.Root of the run's
// artifacts directory, so neither ".." nor a link leads out of it. Text
// (valid UTF-8 without NUL bytes) is shown as text/plain; anything else is
// a download.
func (s *Server) apiArtifact(w http.ResponseWriter, r *http.Request) {
	s.ix.mu.RLock()
	src, row, err := s.row(r, "")
	s.ix.mu.RUnlock()
	if err != nil {
		httpError(w, err)
		return
	}
	rec, err := s.record(row)
	if err != nil {
		httpError(w, err)
		return
	}
	a := rec.Record.Artifacts
	root, name, ok := trialArtifacts(src, a)
	if !ok {
		httpError(w, fmt.Errorf("%w: trial %d of case %q has no artifacts", errNotFound, row.Trial, row.ID))
		return
	}
	rel, err := artifactPath(r.URL.Query().Get("path"), a)
	if err != nil {
		httpError(w, err)
		return
	}
	f, err := openArtifact(root, name, rel)
	if err != nil {
		httpError(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		httpError(w, err)
		return
	}
	if !fi.Mode().IsRegular() {
		httpError(w, fmt.Errorf("%w: artifact %s is not a file", errNotFound, rel))
		return
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		httpError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", artifactsCSP)
	if isText(head[:n]) {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(rel)}))
	} else {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(rel)}))
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// openArtifact opens name/rel under root without leaving root: through
// an os.Root, which refuses ".." and links that point out of it.
func openArtifact(root, name, rel string) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no artifacts directory %s", errNotFound, filepath.Base(root))
		}
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(filepath.Join(name, filepath.FromSlash(rel)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: artifact %s", errNotFound, rel)
		}
		// A link out of the directory, or anything else os.Root refuses.
		return nil, fmt.Errorf("%w: artifact %s: %v", errForbidden, rel, err)
	}
	return f, nil
}

// isText says whether the start of a file is text: valid UTF-8 (but for a
// rune cut at the end) without NUL bytes.
func isText(b []byte) bool {
	if strings.ContainsRune(string(b), 0) {
		return false
	}
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		b = b[size:]
	}
	return true
}
