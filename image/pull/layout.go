package pull

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of a saved image's entry in index.json: the full
// reference (as containerd and other tools read it) and the tag alone
// (as the OCI image layout specification has it).
const (
	annotationName = "io.containerd.image.name"
	annotationTag  = "org.opencontainers.image.ref.name"
)

// Saved is what Save wrote or Load read.
type Saved struct {
	// Records are the images, by reference.
	Records []*Record
	// Blobs is the number of blobs, Bytes their size.
	Blobs int
	Bytes int64
}

// IsTar says whether a save or load target names a tar archive rather
// than a directory: its name ends in .tar.
func IsTar(target string) bool {
	return strings.HasSuffix(target, ".tar")
}

// Save writes the images the store holds (those named by names, a full
// reference or as pulled; all when names is empty) as an OCI image
// layout: a directory, or a tar archive of one when target ends in .tar.
// A directory must not exist or be empty. Each image's entry in
// index.json carries its full reference.
func (s *Store) Save(target string, names []string) (Saved, error) {
	var out Saved
	recs, err := s.pick(names)
	if err != nil {
		return out, err
	}
	w, err := newLayoutWriter(target)
	if err != nil {
		return out, err
	}
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	written := map[string]bool{}
	for _, rec := range recs {
		m, err := s.Manifest(rec.Digest)
		if err != nil {
			w.abort()
			return out, fmt.Errorf("image %s: %w", rec.Name, err)
		}
		raw, err := s.blobBytes(rec.Digest)
		if err != nil {
			w.abort()
			return out, fmt.Errorf("image %s: %w", rec.Name, err)
		}
		mt := m.MediaType
		if mt == "" {
			mt = types.OCIManifestSchema1
		}
		desc := v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Annotations: map[string]string{annotationName: rec.Name}}
		desc.Digest, _ = v1.NewHash(rec.Digest)
		if r, err := name.ParseReference(rec.Name); err == nil {
			if t, ok := r.(name.Tag); ok {
				desc.Annotations[annotationTag] = t.TagStr()
			}
		}
		if p, err := v1.ParsePlatform(rec.Platform); err == nil && rec.Platform != "" {
			desc.Platform = p
		}
		idx.Manifests = append(idx.Manifests, desc)
		blobs := []v1.Descriptor{{Digest: desc.Digest, Size: desc.Size}, m.Config}
		blobs = append(blobs, m.Layers...)
		for _, b := range blobs {
			d := b.Digest.String()
			if written[d] {
				continue
			}
			written[d] = true
			p, err := s.BlobPath(d)
			if err != nil {
				w.abort()
				return out, err
			}
			n, err := w.copyFile("blobs/sha256/"+b.Digest.Hex, p)
			if err != nil {
				w.abort()
				return out, fmt.Errorf("image %s: blob %s: %w", rec.Name, d, err)
			}
			out.Blobs++
			out.Bytes += n
		}
		out.Records = append(out.Records, rec)
	}
	ib, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		w.abort()
		return out, err
	}
	if err := w.writeFile("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`+"\n")); err != nil {
		w.abort()
		return out, err
	}
	if err := w.writeFile("index.json", append(ib, '\n')); err != nil {
		w.abort()
		return out, err
	}
	return out, w.close()
}

// pick is the stored images names asks for (all when empty), each whole.
func (s *Store) pick(names []string) ([]*Record, error) {
	all, err := s.Records()
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		var out []*Record
		for _, r := range all {
			if s.Complete(r.Digest) {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return nil, errors.New("the store holds no pulled images")
		}
		return out, nil
	}
	var out []*Record
	for _, n := range names {
		rec := s.Lookup(n)
		if rec == nil {
			return nil, fmt.Errorf("image %s: not in the store", n)
		}
		out = append(out, rec)
	}
	return out, nil
}

func (s *Store) blobBytes(digest string) ([]byte, error) {
	p, err := s.BlobPath(digest)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Load adds the images of an OCI image layout (a directory, or a tar
// archive of one when source ends in .tar) to the store: every blob,
// checked against its digest, and each image of index.json by the full
// reference its entry carries. An entry without one, or naming an index
// rather than an image, is an error naming it; nothing is recorded then.
func (s *Store) Load(source string) (Saved, error) {
	var out Saved
	if err := s.init(); err != nil {
		return out, err
	}
	var index []byte
	if IsTar(source) {
		b, n, bytes, err := s.loadTar(source)
		if err != nil {
			return out, err
		}
		index, out.Blobs, out.Bytes = b, n, bytes
	} else {
		b, err := os.ReadFile(filepath.Join(source, "index.json"))
		if err != nil {
			return out, fmt.Errorf("%s: not an OCI image layout: %w", source, err)
		}
		index = b
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(index))
	if err != nil {
		return out, fmt.Errorf("%s: index.json: %w", source, err)
	}
	var recs []*Record
	for i, d := range idx.Manifests {
		full := d.Annotations[annotationName]
		if full == "" {
			full = d.Annotations[annotationTag]
		}
		r, err := name.ParseReference(full, name.StrictValidation)
		if full == "" || err != nil || !strings.Contains(full, "/") {
			return out, fmt.Errorf("%s: index.json: manifests[%d] (%s): no full image reference in its annotations (%s)", source, i, d.Digest, annotationName)
		}
		if d.MediaType.IsIndex() {
			return out, fmt.Errorf("%s: index.json: manifests[%d] (%s): a multi-platform index; save one platform's image", source, i, full)
		}
		digest := d.Digest.String()
		if !IsTar(source) {
			if err := s.importDir(source, digest, &out); err != nil {
				return out, fmt.Errorf("%s: image %s: %w", source, full, err)
			}
		}
		m, err := s.Manifest(digest)
		if err != nil || !s.Complete(digest) {
			return out, fmt.Errorf("%s: image %s: the layout lacks its manifest or a blob it names", source, full)
		}
		rec := &Record{Ref: full, Name: r.Name(), Digest: digest, Size: manifestSize(m), Layers: len(m.Layers), Pulled: time.Now().UTC()}
		if d.Platform != nil {
			rec.Platform = d.Platform.String()
		}
		recs = append(recs, rec)
	}
	for _, rec := range recs {
		if err := s.Put(rec); err != nil {
			return out, err
		}
	}
	out.Records = recs
	return out, nil
}

// importDir copies the manifest of digest and the blobs it names from the
// layout directory dir into the store.
func (s *Store) importDir(dir, digest string, out *Saved) error {
	open := func(d string) error {
		if s.Has(d) {
			return nil
		}
		alg, h, _ := strings.Cut(d, ":")
		f, err := os.Open(filepath.Join(dir, "blobs", alg, h))
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := s.putBlobFrom(d, f)
		out.Blobs++
		out.Bytes += n
		return err
	}
	if err := open(digest); err != nil {
		return err
	}
	m, err := s.Manifest(digest)
	if err != nil {
		return err
	}
	if err := open(m.Config.Digest.String()); err != nil {
		return err
	}
	for _, l := range m.Layers {
		if err := open(l.Digest.String()); err != nil {
			return err
		}
	}
	return nil
}

// loadTar stores every blob of a layout's tar archive and returns its
// index.json.
func (s *Store) loadTar(file string) (index []byte, blobs int, size int64, err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", file, err)
		}
		p := path.Clean(strings.TrimPrefix(h.Name, "./"))
		switch {
		case p == "index.json":
			if index, err = io.ReadAll(io.LimitReader(tr, 64<<20)); err != nil {
				return nil, 0, 0, fmt.Errorf("%s: index.json: %w", file, err)
			}
		case strings.HasPrefix(p, "blobs/sha256/") && h.Typeflag == tar.TypeReg:
			d := "sha256:" + strings.TrimPrefix(p, "blobs/sha256/")
			if _, err := s.BlobPath(d); err != nil {
				return nil, 0, 0, fmt.Errorf("%s: %s: %w", file, h.Name, err)
			}
			if s.Has(d) {
				continue
			}
			n, err := s.putBlobFrom(d, tr)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("%s: %s: %w", file, h.Name, err)
			}
			blobs++
			size += n
		}
	}
	if index == nil {
		return nil, 0, 0, fmt.Errorf("%s: not an OCI image layout: no index.json", file)
	}
	return index, blobs, size, nil
}

// putBlobFrom stores what r holds as the blob of digest, checking that it
// is, through a temporary file renamed into place.
func (s *Store) putBlobFrom(digest string, r io.Reader) (int64, error) {
	p, err := s.BlobPath(digest)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return n, fmt.Errorf("blob %s: content has digest %s", digest, got)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return n, err
	}
	return n, os.Rename(tmp.Name(), p)
}

// layoutWriter writes a layout's files into a directory or a tar archive.
type layoutWriter struct {
	dir string
	// tar archive
	file *os.File
	tw   *tar.Writer
	made bool
}

func newLayoutWriter(target string) (*layoutWriter, error) {
	if IsTar(target) {
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, err
		}
		return &layoutWriter{file: f, tw: tar.NewWriter(f)}, nil
	}
	des, err := os.ReadDir(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(target, 0o755); err != nil {
			return nil, err
		}
		return &layoutWriter{dir: target, made: true}, nil
	case err != nil:
		return nil, err
	case len(des) > 0:
		return nil, fmt.Errorf("%s: not empty", target)
	}
	return &layoutWriter{dir: target}, nil
}

func (w *layoutWriter) writeFile(name string, b []byte) error {
	if w.tw != nil {
		if err := w.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := w.tw.Write(b)
		return err
	}
	return writeFileAtomic(filepath.Join(w.dir, filepath.FromSlash(name)), b)
}

func (w *layoutWriter) copyFile(name, src string) (int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if w.tw != nil {
		if err := w.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
			return 0, err
		}
		return io.Copy(w.tw, f)
	}
	dst := filepath.Join(w.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	// A hard link where the file system allows it: a saved store on the
	// same disk costs nothing.
	if err := os.Link(src, dst); err == nil {
		return fi.Size(), nil
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, f)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (w *layoutWriter) close() error {
	if w.tw == nil {
		return nil
	}
	err := w.tw.Close()
	if cerr := w.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(w.file.Name())
	}
	return err
}

// abort removes what a failed save wrote.
func (w *layoutWriter) abort() {
	if w.tw != nil {
		w.file.Close()
		os.Remove(w.file.Name())
		return
	}
	if w.made {
		os.RemoveAll(w.dir)
	}
}
