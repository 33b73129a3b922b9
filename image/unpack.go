package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
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

	"github.com/klauspost/compress/zstd"
)

// decompress returns r uncompressed: gzip and zstd are recognised by their
// magic bytes, anything else is read as it is.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return z, func() { z.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	}
	return br, func() {}, nil
}

// extractor applies tar layers to a root directory.
type extractor struct {
	root   *os.Root
	dir    string
	asRoot bool
	// dirs holds the directories' modes and times, applied at the end
	// (a read-only directory must stay writable while it is filled).
	dirs map[string]dirMeta
}

type dirMeta struct {
	mode  fs.FileMode
	mtime time.Time
}

func newExtractor(dir string) (*extractor, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &extractor{root: root, dir: dir, asRoot: os.Geteuid() == 0, dirs: map[string]dirMeta{}}, nil
}

// finish applies the directories' modes and times and closes the root.
func (x *extractor) finish() error {
	defer x.root.Close()
	for name, m := range x.dirs {
		if err := x.root.Chmod(name, m.mode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		_ = x.root.Chtimes(name, m.mtime, m.mtime)
	}
	return nil
}

// apply extracts one tar stream (compressed or not). With whiteouts set it
// is an image layer: ".wh.NAME" entries delete NAME from the layers below
// and ".wh..wh..opq" empties its directory of what they put there.
func (x *extractor) apply(r io.Reader, whiteouts bool) error {
	plain, done, err := decompress(r)
	if err != nil {
		return err
	}
	defer done()
	tr := tar.NewReader(plain)
	thisLayer := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if name == "" {
			if hdr.Typeflag == tar.TypeDir {
				x.dirs["."] = dirMeta{mode: hdr.FileInfo().Mode(), mtime: hdr.ModTime}
			}
			continue
		}
		base := path.Base(name)
		if whiteouts && strings.HasPrefix(base, ".wh.") {
			parent := path.Dir(name)
			if base == ".wh..wh..opq" {
				if err := x.opaque(parent, thisLayer); err != nil {
					return fmt.Errorf("%s: %w", hdr.Name, err)
				}
				continue
			}
			victim := path.Join(parent, strings.TrimPrefix(base, ".wh."))
			if err := x.root.RemoveAll(victim); err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			delete(x.dirs, victim)
			continue
		}
		thisLayer[name] = true
		if err := x.entry(name, hdr, tr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
}

// opaque removes what lower layers put in dir, keeping what this layer
// already added.
func (x *extractor) opaque(dir string, thisLayer map[string]bool) error {
	f, err := x.root.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !thisLayer[p] {
			if err := x.root.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *extractor) entry(name string, hdr *tar.Header, r io.Reader) error {
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	mode := hdr.FileInfo().Mode()
	// Whatever is there (a file a lower layer left, a directory where a
	// file now goes) is replaced, but a directory stays a directory.
	if hdr.Typeflag != tar.TypeDir {
		if fi, err := x.root.Lstat(name); err == nil {
			if fi.IsDir() {
				if err := x.root.RemoveAll(name); err != nil {
					return err
				}
			} else if err := x.root.Remove(name); err != nil {
				return err
			}
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if fi, err := x.root.Lstat(name); err == nil && !fi.IsDir() {
			if err := x.root.Remove(name); err != nil {
				return err
			}
		}
		if err := x.root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		x.dirs[name] = dirMeta{mode: mode.Perm() | mode&(fs.ModeSetgid|fs.ModeSticky), mtime: hdr.ModTime}
		if x.asRoot {
			return x.root.Lchown(name, hdr.Uid, hdr.Gid)
		}
		return nil
	case tar.TypeReg:
		f, err := x.root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if x.asRoot {
			if err := x.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
				return err
			}
		}
		// After chown, which clears setuid bits.
		if err := x.root.Chmod(name, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
		return x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	case tar.TypeSymlink:
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		if x.asRoot {
			return x.root.Lchown(name, hdr.Uid, hdr.Gid)
		}
		return nil
	case tar.TypeLink:
		target := strings.TrimPrefix(path.Clean("/"+hdr.Linkname), "/")
		return x.root.Link(target, name)
	default:
		// Devices, fifos: /dev is mounted fresh for every command.
		return nil
	}
}

// ociIndex, ociManifest and ociConfig are the parts of an OCI image
// layout that unpacking reads.
type ociIndex struct {
	Manifests []ociDescriptor `json:"manifests"`
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform,omitempty"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociConfig struct {
	Config struct {
		Env        []string `json:"Env"`
		WorkingDir string   `json:"WorkingDir"`
		User       string   `json:"User"`
	} `json:"config"`
}

// blobPath is where an OCI layout keeps the blob of digest.
func blobPath(layout, digest string) (string, error) {
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok || alg == "" || hex == "" || strings.ContainsAny(digest, "/\\") {
		return "", fmt.Errorf("bad digest %q", digest)
	}
	return filepath.Join(layout, "blobs", alg, hex), nil
}

func readJSON(file string, v any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// ociManifestDigest picks the image manifest of an OCI layout (the first,
// or the one for linux/amd64 of an index).
func ociManifestDigest(layout string) (ociManifest, string, error) {
	var idx ociIndex
	if err := readJSON(filepath.Join(layout, "index.json"), &idx); err != nil {
		return ociManifest{}, "", err
	}
	descs := idx.Manifests
	for depth := 0; depth < 4; depth++ {
		if len(descs) == 0 {
			return ociManifest{}, "", fmt.Errorf("%s: no image manifest", layout)
		}
		pick := descs[0]
		for _, d := range descs {
			if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" {
				pick = d
				break
			}
		}
		p, err := blobPath(layout, pick.Digest)
		if err != nil {
			return ociManifest{}, "", err
		}
		var m ociManifest
		if err := readJSON(p, &m); err != nil {
			return ociManifest{}, "", err
		}
		if len(m.Manifests) == 0 {
			return m, pick.Digest, nil
		}
		descs = m.Manifests
	}
	return ociManifest{}, "", fmt.Errorf("%s: manifest lists nested too deep", layout)
}

// unpackOCI applies the layers of an OCI image layout to dir and returns
// the image's configuration.
func unpackOCI(layout, dir string) (Config, error) {
	m, _, err := ociManifestDigest(layout)
	if err != nil {
		return Config{}, err
	}
	return unpackManifest(layout, m, dir)
}

// unpackDigest applies the layers of the image manifest of digest in an
// OCI image layout to dir and returns the image's configuration.
func unpackDigest(layout, digest, dir string) (Config, error) {
	p, err := blobPath(layout, digest)
	if err != nil {
		return Config{}, err
	}
	var m ociManifest
	if err := readJSON(p, &m); err != nil {
		return Config{}, err
	}
	return unpackManifest(layout, m, dir)
}

// digestConfig reads the configuration of the image manifest of digest in
// an OCI image layout, unpacking nothing.
func digestConfig(layout, digest string) (Config, error) {
	p, err := blobPath(layout, digest)
	if err != nil {
		return Config{}, err
	}
	var m ociManifest
	if err := readJSON(p, &m); err != nil {
		return Config{}, err
	}
	return manifestConfig(layout, m)
}

// manifestConfig reads the configuration m names from layout's blobs.
func manifestConfig(layout string, m ociManifest) (Config, error) {
	var cfg ociConfig
	cp, err := blobPath(layout, m.Config.Digest)
	if err != nil {
		return Config{}, err
	}
	if err := readJSON(cp, &cfg); err != nil {
		return Config{}, err
	}
	return Config{Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User}, nil
}

// unpackManifest applies the layers m names, from layout's blobs, to dir.
func unpackManifest(layout string, m ociManifest, dir string) (Config, error) {
	cfg, err := manifestConfig(layout, m)
	if err != nil {
		return Config{}, err
	}
	x, err := newExtractor(dir)
	if err != nil {
		return Config{}, err
	}
	for _, l := range m.Layers {
		p, err := blobPath(layout, l.Digest)
		if err != nil {
			x.root.Close()
			return Config{}, err
		}
		f, err := os.Open(p)
		if err != nil {
			x.root.Close()
			return Config{}, err
		}
		err = x.apply(f, true)
		f.Close()
		if err != nil {
			x.root.Close()
			return Config{}, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	if err := x.finish(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// unpackTar extracts a root filesystem tar (docker export, podman export,
// mmdebstrap; compressed or not) into dir.
func unpackTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	x, err := newExtractor(dir)
	if err != nil {
		return err
	}
	if err := x.apply(f, false); err != nil {
		x.root.Close()
		return err
	}
	return x.finish()
}
