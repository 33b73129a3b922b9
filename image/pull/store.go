// Package pull fetches images from registries without a daemon: a
// reference's tag is resolved to a digest, the manifest for the wanted
// platform is chosen from a multi-platform index, and the manifest, its
// configuration and its layers are stored once each by digest in a Store
// (an OCI image layout on disk, shared by every image that uses a blob and
// by every run that uses the store). Credentials come from a keychain (the
// Docker and podman auth files and their credential helpers by default);
// a 429's Retry-After is honoured, and a layer download cut short resumes
// where it stopped.
package pull

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"harness/results"
)

// Store is the blobs pulled from registries, by digest, and the
// references they were pulled by. Its directory is an OCI image layout
// (blobs/sha256/HEX), with refs/ recording what each reference resolved
// to and locks/ the locks that make concurrent pulls fetch a blob once.
type Store struct {
	// Dir is the store's directory.
	Dir string
}

// Record is what a reference resolved to when it was pulled.
type Record struct {
	// Ref is the reference as it was asked for.
	Ref string `json:"ref"`
	// Name is the reference in full (registry, repository, tag or digest).
	Name string `json:"name"`
	// Digest is the digest of the image manifest (the platform's, when
	// the reference names an index).
	Digest string `json:"digest"`
	// IndexDigest is the digest of the multi-platform index the
	// reference named, if it named one.
	IndexDigest string `json:"indexDigest,omitempty"`
	// Platform is the platform of the image (os/architecture).
	Platform string `json:"platform,omitempty"`
	// Size is the bytes of the manifest's configuration and layers, as
	// stored (compressed).
	Size int64 `json:"size"`
	// Layers is the number of layers.
	Layers int `json:"layers"`
	// Pulled is when it was last resolved from the registry.
	Pulled time.Time `json:"pulled"`
}

// BlobPath is where the blob of digest is kept.
func (s *Store) BlobPath(digest string) (string, error) {
	alg, h, ok := strings.Cut(digest, ":")
	if !ok || alg != "sha256" || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", fmt.Errorf("bad digest %q", digest)
	}
	return filepath.Join(s.Dir, "blobs", alg, h), nil
}

// Has says whether the blob of digest is stored.
func (s *Store) Has(digest string) bool {
	p, err := s.BlobPath(digest)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// openBlob opens the stored blob of digest.
func (s *Store) openBlob(digest string) (*os.File, error) {
	p, err := s.BlobPath(digest)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Manifest reads a stored image manifest.
func (s *Store) Manifest(digest string) (*v1.Manifest, error) {
	f, err := s.openBlob(digest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := v1.ParseManifest(f)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", digest, err)
	}
	return m, nil
}

// config reads the stored image configuration of digest.
func (s *Store) config(digest string) (*v1.ConfigFile, error) {
	f, err := s.openBlob(digest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return v1.ParseConfigFile(f)
}

// Complete says whether the manifest of digest and every blob it names
// are stored.
func (s *Store) Complete(digest string) bool {
	m, err := s.Manifest(digest)
	if err != nil {
		return false
	}
	if !s.Has(m.Config.Digest.String()) {
		return false
	}
	for _, l := range m.Layers {
		if !s.Has(l.Digest.String()) {
			return false
		}
	}
	return true
}

// refFile is the record of the reference named name (in full).
func (s *Store) refFile(fullName string) string {
	sum := sha256.Sum256([]byte(fullName))
	return filepath.Join(s.Dir, "refs", hex.EncodeToString(sum[:])[:32]+".json")
}

// Lookup returns what ref was last pulled as, when that image is still
// stored whole; a reference by digest is found by its digest. nil when
// the store does not have it.
func (s *Store) Lookup(ref string) *Record {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil
	}
	rec, err := s.readRecord(s.refFile(r.Name()))
	if err == nil && s.Complete(rec.Digest) {
		return rec
	}
	if d, ok := r.(name.Digest); ok && s.Complete(d.DigestStr()) {
		m, _ := s.Manifest(d.DigestStr())
		return &Record{Ref: ref, Name: r.Name(), Digest: d.DigestStr(), Size: manifestSize(m), Layers: len(m.Layers)}
	}
	return nil
}

func (s *Store) readRecord(file string) (*Record, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &rec, nil
}

// Records lists the references the store holds, by name.
func (s *Store) Records() ([]*Record, error) {
	entries, err := os.ReadDir(filepath.Join(s.Dir, "refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		rec, err := s.readRecord(filepath.Join(s.Dir, "refs", e.Name()))
		if err != nil {
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Put records what rec.Name resolved to, through a file renamed into
// place (concurrent runs agree).
func (s *Store) Put(rec *Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(s.refFile(rec.Name), append(b, '\n'))
}

// Forget removes the record of a reference (by its full name).
func (s *Store) Forget(fullName string) error {
	err := os.Remove(s.refFile(fullName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Blobs lists every stored blob's digest and size.
func (s *Store) Blobs() (map[string]int64, error) {
	dir := filepath.Join(s.Dir, "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, e := range entries {
		if len(e.Name()) != 64 {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out["sha256:"+e.Name()] = fi.Size()
	}
	return out, nil
}

// Referenced lists the digests the given manifests name: the manifests
// themselves, their configurations and layers.
func (s *Store) Referenced(manifests ...string) map[string]bool {
	out := map[string]bool{}
	for _, d := range manifests {
		out[d] = true
		m, err := s.Manifest(d)
		if err != nil {
			continue
		}
		out[m.Config.Digest.String()] = true
		for _, l := range m.Layers {
			out[l.Digest.String()] = true
		}
	}
	return out
}

// RemoveBlob removes a blob (under its lock, so a pull that is writing
// it is waited for).
func (s *Store) RemoveBlob(digest string) error {
	p, err := s.BlobPath(digest)
	if err != nil {
		return err
	}
	unlock, err := s.lock(nil, digest)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// putBlob stores b as the blob of digest, checking that it is.
func (s *Store) putBlob(digest string, b []byte) error {
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return fmt.Errorf("blob %s: content has digest %s", digest, got)
	}
	if s.Has(digest) {
		return nil
	}
	p, err := s.BlobPath(digest)
	if err != nil {
		return err
	}
	return writeFileAtomic(p, b)
}

// init makes the store's layout files.
func (s *Store) init() error {
	for _, d := range []string{"blobs/sha256", "refs", "locks"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			return err
		}
	}
	layout := filepath.Join(s.Dir, "oci-layout")
	if _, err := os.Stat(layout); err != nil {
		if err := writeFileAtomic(layout, []byte(`{"imageLayoutVersion":"1.0.0"}`+"\n")); err != nil {
			return err
		}
	}
	return nil
}

// lock takes the exclusive lock of a blob, waiting for another pull that
// holds it (while done, when not nil, stays open). A file system without
// locks is run without.
func (s *Store) lock(done <-chan struct{}, digest string) (func(), error) {
	if err := os.MkdirAll(filepath.Join(s.Dir, "locks"), 0o755); err != nil {
		return nil, err
	}
	_, h, _ := strings.Cut(digest, ":")
	f, err := os.OpenFile(filepath.Join(s.Dir, "locks", h+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || (err != unix.EWOULDBLOCK && err != unix.EINTR) {
			return func() { f.Close() }, nil
		}
		select {
		case <-done:
			f.Close()
			return nil, errors.New("stopped while waiting for another pull of the same blob")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeFileAtomic writes b to file through a temporary file renamed into
// place.
func writeFileAtomic(file string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return results.ReplaceFile(file, 0o644, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

func manifestSize(m *v1.Manifest) int64 {
	if m == nil {
		return 0
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}
