package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"harness/image/pull"
	"harness/results"
)

// Store resolves image references and keeps their unpacked root
// filesystems.
type Store struct {
	// Dir is the cache: one directory per image (rootfs/ and image.json).
	Dir string
	// Podman is the podman binary ("" = podman on PATH); it builds
	// contexts and exports local images. Buildah is used when podman is
	// missing.
	Podman string
	// Log receives build output ("" = discarded).
	Log io.Writer
	// CacheFirst takes a local image reference resolved before from the
	// cache without asking podman (the shards of a distributed run, which
	// must run the image resolved before they were submitted). Otherwise
	// podman is asked first, as a tag can move, and the cache's record
	// of the reference serves when podman is missing or lacks the image.
	CacheFirst bool
	// Registry pulls images from their registries (nil = no pulls); its
	// Store is set to the cache's own (Pulls).
	Registry *pull.Client
	// Policy says when to pull ("" = PullIfMissing).
	Policy Policy
	// MaxBytes is the budget of the unpacked images (0 = none): past it,
	// the least recently used that no run or trial holds are removed.
	MaxBytes int64
	// OnOverBudget, when set, is told (once) when the images held alone
	// exceed MaxBytes; without it the warning goes to Log.
	OnOverBudget func(OverBudget)

	held   holds
	trimMu sync.Mutex
	warned bool
}

// DefaultCacheDir is $XDG_CACHE_HOME/harness/images (~/.cache/...).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	return filepath.Join(dir, "harness", "images"), nil
}

// Kind says what a reference names, without building or unpacking
// anything: "dir" (a root filesystem), "tar", "oci" (an OCI image layout),
// "build" (a directory with a Dockerfile or Containerfile, or such a file)
// or "local" (an image in podman/buildah storage).
func Kind(ref string) string {
	fi, err := os.Stat(ref)
	switch {
	case err != nil:
		return "local"
	case fi.IsDir():
		if dockerfile(ref) != "" {
			return "build"
		}
		if _, err := os.Stat(filepath.Join(ref, "oci-layout")); err == nil {
			return "oci"
		}
		return "dir"
	case isDockerfileName(filepath.Base(ref)):
		return "build"
	}
	return "tar"
}

func isDockerfileName(name string) bool {
	return name == "Dockerfile" || name == "Containerfile" || strings.HasSuffix(name, ".Dockerfile") || strings.HasSuffix(name, ".dockerfile")
}

// dockerfile returns the Dockerfile (or Containerfile) of a build context,
// or "".
func dockerfile(dir string) string {
	for _, n := range []string{"Dockerfile", "Containerfile"} {
		if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return filepath.Join(dir, n)
		}
	}
	return ""
}

// Resolve returns the image ref names, unpacking (and for a build context
// building) it into the cache the first time. The store holds it until
// Release: no budget removes it meanwhile.
func (s *Store) Resolve(ctx context.Context, ref string) (*Image, error) {
	return s.named(ctx, ref, false)
}

// Prepare makes sure the image ref names can be had, as Resolve does, but
// leaves packed an image whose root filesystem can be made again from
// what is on disk (an image pulled into the store, an OCI layout, a root
// filesystem tar): its Rootfs is "" and Packed says so until Acquire
// unpacks it for a trial. A pulled image's blobs are held until Release:
// no prune removes them meanwhile. Built images and podman's are unpacked
// and held, as Resolve does: they cannot be made again from the store.
func (s *Store) Prepare(ctx context.Context, ref string) (*Image, error) {
	return s.named(ctx, ref, true)
}

// named is Resolve, or with lazy Prepare.
func (s *Store) named(ctx context.Context, ref string, lazy bool) (*Image, error) {
	img, err := s.resolve(ctx, ref, lazy)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	switch img.Kind {
	case "build":
		img.Source = SourceBuilt
	case "pull":
		img.Source = SourcePulled
	default:
		img.Source = SourceLocal
	}
	if img.Digest == "" {
		img.Digest = img.ID
	}
	return img, nil
}

func (s *Store) resolve(ctx context.Context, ref string, lazy bool) (*Image, error) {
	switch Kind(ref) {
	case "dir":
		abs, err := filepath.Abs(ref)
		if err != nil {
			return nil, err
		}
		ok := false
		for _, d := range []string{"bin", "usr", "etc"} {
			if _, err := os.Lstat(filepath.Join(abs, d)); err == nil {
				ok = true
			}
		}
		if !ok {
			return nil, errors.New("a directory that is neither a root filesystem (no bin, usr or etc) nor a build context (no Dockerfile or Containerfile)")
		}
		return &Image{Ref: ref, Kind: "dir", Rootfs: abs}, nil
	case "tar":
		sum, err := hashFile(ref)
		if err != nil {
			return nil, err
		}
		fill := func(img *Image, rootfs string) error {
			img.Ref, img.Kind, img.ID = ref, "tar", "sha256:"+sum
			// Unpacked as a trial starts: the file must still be the
			// one the run started with.
			now, err := hashFile(ref)
			if err != nil {
				return err
			}
			if now != sum {
				return fmt.Errorf("%s changed since the run started", ref)
			}
			return unpackTar(ref, rootfs)
		}
		if lazy {
			return s.packed(&Image{Ref: ref, Kind: "tar", ID: "sha256:" + sum}, "tar-"+sum, fill), nil
		}
		return s.cached(ctx, "tar-"+sum, ref, "tar", fill)
	case "oci":
		m, digest, err := ociManifestDigest(ref)
		if err != nil {
			return nil, err
		}
		fill := func(img *Image, rootfs string) error {
			img.Ref, img.Kind, img.ID = ref, "oci", digest
			// The manifest the run started with, by its digest.
			cfg, err := unpackDigest(ref, digest, rootfs)
			img.Config = cfg
			return err
		}
		if lazy {
			cfg, err := manifestConfig(ref, m)
			if err != nil {
				return nil, err
			}
			return s.packed(&Image{Ref: ref, Kind: "oci", ID: digest, Config: cfg}, "oci-"+cacheName(digest), fill), nil
		}
		return s.cached(ctx, "oci-"+cacheName(digest), ref, "oci", fill)
	case "build":
		return s.build(ctx, ref)
	}
	return s.local(ctx, ref, "local", lazy)
}

func cacheName(digest string) string {
	_, h, _ := strings.Cut(digest, ":")
	if len(h) > 32 {
		h = h[:32]
	}
	return h
}

// cached returns the cache entry key, making it with fill first when it is
// missing, held until Release. fill unpacks into a temporary directory
// that is renamed into place, so a half-made entry is never used, and
// one process at a time makes an entry, so concurrent runs make it once.
func (s *Store) cached(ctx context.Context, key, ref, kind string, fill func(img *Image, rootfs string) error) (*Image, error) {
	img, h, err := s.obtain(ctx, key, func(img *Image, rootfs string) error {
		// The entry's record names the reference that made it, for
		// harness images.
		img.Ref, img.Kind = ref, kind
		return fill(img, rootfs)
	})
	if err != nil {
		return nil, err
	}
	s.keep(filepath.Join(s.Dir, key), h)
	if img.Made {
		s.trim()
	}
	// One entry serves every reference to the same content (an image
	// tagged twice, a tar copied): the image is named as this run named it.
	img.Ref, img.Kind, img.key = ref, kind, key
	return img, nil
}

// packed returns img, its cache entry key not made: Acquire makes it with
// fill.
func (s *Store) packed(img *Image, key string, fill func(img *Image, rootfs string) error) *Image {
	img.key, img.unpack = key, fill
	if _, err := os.Stat(filepath.Join(s.Dir, key, "rootfs")); err == nil {
		img.InCache = true
	}
	return img
}

// Acquire returns img unpacked (its cache entry made the first time) and
// held for one trial until release is called: no budget removes it
// meanwhile. Two trials of one image, in this process or another, unpack
// it once. An image that is not packed (Prepare) is returned as it is,
// with a release that does nothing. After release the budget applies:
// the least recently used entries no one holds go.
func (s *Store) Acquire(ctx context.Context, img *Image) (got *Image, release func(), err error) {
	if img == nil || !img.Packed() {
		return img, func() {}, nil
	}
	p := *img
	e, h, err := s.obtain(ctx, p.key, func(e *Image, rootfs string) error {
		e.Ref, e.Kind, e.ID, e.Digest = p.Ref, p.Kind, p.ID, p.Digest
		return p.unpack(e, rootfs)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: unpack: %w", p.Ref, err)
	}
	if e.Made {
		s.trim()
	}
	out := p
	out.Rootfs, out.Size, out.Made = e.Rootfs, e.Size, e.Made
	if len(out.Config.Env) == 0 && out.Config.WorkingDir == "" && out.Config.User == "" {
		out.Config = e.Config
	}
	out.unpack = nil
	var once sync.Once
	return &out, func() {
		once.Do(func() {
			h.Close()
			s.trim()
		})
	}, nil
}

// obtain returns the cache entry key, making it with fill first when it
// is missing, and a shared lock on its hold file that keeps it from any
// budget until closed. The entry's lock (a file beside it) is held
// meanwhile: one process, one goroutine, makes or removes an entry at a
// time.
func (s *Store) obtain(ctx context.Context, key string, fill func(img *Image, rootfs string) error) (*Image, *os.File, error) {
	if s.Dir == "" {
		return nil, nil, errors.New("no image cache directory")
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, nil, err
	}
	unlock, err := s.lock(ctx, filepath.Join(stateDir, key+".lock"))
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	final := filepath.Join(s.Dir, key)
	if img, err := readMeta(final); err == nil {
		if _, err := os.Stat(img.Rootfs); err == nil {
			h, err := holdFile(final)
			if err != nil {
				return nil, nil, err
			}
			touch(final)
			return img, h, nil
		}
	}
	// Whatever is left of an entry that lost its tree goes.
	if _, err := os.Lstat(final); err == nil {
		removeTree(final)
	}
	tmp, err := os.MkdirTemp(s.Dir, ".tmp-"+key+"-")
	if err != nil {
		return nil, nil, err
	}
	defer removeTree(tmp)
	img := &Image{}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := fill(img, rootfs); err != nil {
		return nil, nil, err
	}
	// Docker makes a WORKDIR that no instruction wrote into; an exported
	// root filesystem may lack it.
	if wd := img.Workdir(); wd != "/" {
		_ = os.MkdirAll(filepath.Join(rootfs, resolveIn(rootfs, wd)), 0o755)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, nil, err
	}
	img.Size = treeSize(rootfs)
	if err := writeMeta(tmp, img); err != nil {
		return nil, nil, err
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another process made it first (where locks do not work).
		if img, err2 := readMeta(final); err2 == nil {
			h, err := holdFile(final)
			if err != nil {
				return nil, nil, err
			}
			touch(final)
			return img, h, nil
		}
		return nil, nil, err
	}
	h, err := holdFile(final)
	if err != nil {
		return nil, nil, err
	}
	touch(final)
	made, err := readMeta(final)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	made.Made = true
	return made, h, nil
}

// removeTree removes dir even where it holds read-only directories.
func removeTree(dir string) {
	if err := os.RemoveAll(dir); err == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// ContextHash is the content hash of a build context: every file's path,
// mode and content, and every symlink's target, in path order.
func ContextHash(dir string) (string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			fmt.Fprintf(h, "%s\x00", t)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// tool returns the podman (or buildah) binary and its name.
func (s *Store) tool() (string, string, error) {
	if s.Podman != "" {
		return s.Podman, filepath.Base(s.Podman), nil
	}
	for _, t := range []string{"podman", "buildah"} {
		if p, err := exec.LookPath(t); err == nil {
			return p, t, nil
		}
	}
	return "", "", errors.New("neither podman nor buildah is installed (Debian, Ubuntu: apt-get install podman)")
}

// build builds a context with podman build --isolation chroot (or buildah
// bud), once per content hash, and unpacks the result.
func (s *Store) build(ctx context.Context, ref string) (*Image, error) {
	dir, file := ref, dockerfile(ref)
	if fi, err := os.Stat(ref); err == nil && !fi.IsDir() {
		dir, file = filepath.Dir(ref), ref
	}
	sum, err := ContextHash(dir)
	if err != nil {
		return nil, fmt.Errorf("hash build context: %w", err)
	}
	if fb := filepath.Base(file); fb != "Dockerfile" {
		h := sha256.Sum256([]byte(sum + "\x00" + fb))
		sum = hex.EncodeToString(h[:])[:32]
	}
	alias := filepath.Join(s.Dir, "build-"+sum+".ref")
	if b, err := os.ReadFile(alias); err == nil {
		if img := s.holdKey(ctx, strings.TrimSpace(string(b))); img != nil {
			img.Ref, img.Kind = ref, "build"
			return img, nil
		}
	}
	bin, name, err := s.tool()
	if err != nil {
		return nil, err
	}
	// One build of a context at a time: its tag is removed once the image
	// is in the cache, so a concurrent run must not find it half-way.
	unlock, err := s.lock(ctx, "build-"+sum+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if b, err := os.ReadFile(alias); err == nil {
		if img := s.holdKey(ctx, strings.TrimSpace(string(b))); img != nil {
			img.Ref, img.Kind = ref, "build"
			return img, nil
		}
	}
	// The tag is this build's alone, and the build keeps no layer cache
	// of its own steps: two runs with different caches may build the same
	// context (or contexts sharing their first steps) at once, and one's
	// rmi must not take an image or a cached step the other is using.
	tag := fmt.Sprintf("localhost/harness-build:%s-%d-%d", sum[:16], os.Getpid(), time.Now().UnixNano())
	var args []string
	if name == "buildah" {
		args = []string{"bud", "--isolation", "chroot", "--layers=false", "-t", tag, "-f", file, dir}
	} else {
		args = []string{"build", "--isolation", "chroot", "--layers=false", "-t", tag, "-f", file, dir}
	}
	if err := s.runTool(ctx, bin, args...); err != nil {
		return nil, fmt.Errorf("build %s: %w", file, err)
	}
	img, err := s.local(ctx, tag, "build", false)
	// The image is in the cache now (or failed to get there): podman's
	// copy goes, with the layers of its build steps, so that builds leave
	// nothing in podman's storage beyond harness's own cache.
	if rerr := s.runTool(context.WithoutCancel(ctx), bin, "rmi", tag); rerr != nil && s.Log != nil {
		fmt.Fprintf(s.Log, "warning: remove the built image %s: %v\n", tag, rerr)
	}
	if err != nil {
		return nil, err
	}
	// The context's hash names the unpacked image, so an unchanged
	// context is not even handed to the builder next time.
	if err := os.WriteFile(alias, []byte(filepath.Base(filepath.Dir(img.Rootfs))+"\n"), 0o644); err != nil {
		return nil, err
	}
	img.Ref, img.Kind = ref, "build"
	return img, nil
}

// tryLock takes an exclusive lock on a file of the cache if no one holds
// it, saying whether it did. A file system without locks is run without.
func (s *Store) tryLock(name string) (func(), bool) {
	f, err := os.OpenFile(filepath.Join(s.Dir, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK || err == unix.EINTR {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// stateDir is the cache's directory of bookkeeping: each entry's lock
// (KEY.lock: who makes or removes it), the need of a pulled image a run
// has prepared (KEY.need: no prune removes its blobs) and the notes of who
// ran in it (KEY.users), kept while its unpacked tree comes and goes.
const stateDir = "state"

// lock takes an exclusive lock on a file of the cache, waiting (while
// ctx allows) for another run that holds it. A file system without locks
// is run without.
func (s *Store) lock(ctx context.Context, name string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(filepath.Join(s.Dir, name)), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || (err != unix.EWOULDBLOCK && err != unix.EINTR) {
			// Locked, or locks do not work here.
			return func() { f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runQuiet runs a tool for its exit status alone.
func runQuiet(ctx context.Context, bin string, args ...string) error {
	return exec.CommandContext(ctx, bin, args...).Run()
}

// runTool runs podman or buildah, its output to the log; a failure carries
// the output's last lines.
func (s *Store) runTool(ctx context.Context, bin string, args ...string) error {
	var tail bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	w := io.Writer(&tail)
	if s.Log != nil {
		w = io.MultiWriter(&tail, s.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(tail.String())
		if lines := strings.Split(out, "\n"); len(lines) > 15 {
			out = strings.Join(lines[len(lines)-15:], "\n")
		}
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), args[0], err, out)
	}
	return nil
}

// local exports an image from podman/buildah storage as an OCI layout
// (podman save, or buildah push to oci:) and unpacks it, once per image
// ID.
func (s *Store) local(ctx context.Context, ref, kind string, lazy bool) (*Image, error) {
	if kind == "local" && s.Registry != nil && pull.Pullable(ref) {
		if s.Policy == PullAlways && !s.CacheFirst {
			return s.pullNow(ctx, ref, lazy)
		}
		// Pulled before: the store's copy (a shard's, too).
		if img, err := s.fromPulls(ctx, ref, lazy); img != nil || err != nil {
			return img, err
		}
	}
	if s.CacheFirst {
		if img := s.fromRefIndex(ref, kind); img != nil {
			return img, nil
		}
	}
	bin, name, err := s.tool()
	if err != nil {
		if img := s.fromRefIndex(ref, kind); img != nil {
			return img, nil
		}
		if kind == "local" && s.pullsOn(ref) {
			return s.pullNow(ctx, ref, lazy)
		}
		return nil, fmt.Errorf("not a file or directory, and no local image store: %w", err)
	}
	out, err := exec.CommandContext(ctx, bin, "image", "inspect", "--format", "{{.Id}}", ref).Output()
	if err != nil {
		if name == "buildah" {
			out, err = exec.CommandContext(ctx, bin, "inspect", "--type", "image", "--format", "{{.FromImageID}}", ref).Output()
		}
		if err != nil {
			if img := s.fromRefIndex(ref, kind); img != nil {
				return img, nil
			}
			if kind == "local" && s.pullsOn(ref) {
				return s.pullNow(ctx, ref, lazy)
			}
			if kind == "local" && s.Registry != nil && pull.Pullable(ref) {
				return nil, fmt.Errorf("not a file or directory, nor an image in the image store or %s's local storage, and pulls are off", name)
			}
			return nil, fmt.Errorf("not a file or directory, nor an image in %s's local storage (pull or build it first)", name)
		}
	}
	id := strings.TrimSpace(string(out))
	if id == "" {
		return nil, fmt.Errorf("%s image inspect: no image ID", name)
	}
	key := "local-" + cacheName("sha256:"+id)
	img, err := s.cached(ctx, key, ref, kind, func(img *Image, rootfs string) error {
		img.Ref, img.Kind, img.ID = ref, kind, "sha256:"+id
		layout, err := os.MkdirTemp(s.Dir, ".oci-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(layout)
		if name == "buildah" {
			err = s.runTool(ctx, bin, "push", ref, "oci:"+layout)
		} else {
			os.Remove(layout)
			err = s.runTool(ctx, bin, "save", "--uncompressed", "--format", "oci-dir", "-o", layout, ref)
		}
		if err != nil {
			return err
		}
		cfg, err := unpackOCI(layout, rootfs)
		img.Config = cfg
		return err
	})
	if err != nil {
		return nil, err
	}
	// The reference's record, so a machine without podman (a cluster
	// node sharing the cache) finds the image by the same name.
	if err := writeRefIndex(s.refIndex(ref), ref, key); err != nil {
		return nil, fmt.Errorf("record %s in the image cache: %w", ref, err)
	}
	return img, nil
}

// refIndex is the file that records which cache entry a local image
// reference was last resolved to.
func (s *Store) refIndex(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return filepath.Join(s.Dir, "ref-"+hex.EncodeToString(sum[:])[:32]+".ref")
}

// fromRefIndex returns the cache entry ref was last resolved to, or nil.
func (s *Store) fromRefIndex(ref, kind string) *Image {
	if s.Dir == "" {
		return nil
	}
	b, err := os.ReadFile(s.refIndex(ref))
	if err != nil {
		return nil
	}
	// The record holds the reference and the entry's name, one a line.
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != ref || !strings.HasPrefix(lines[1], "local-") || strings.ContainsAny(lines[1], "/\\") {
		return nil
	}
	img := s.holdKey(context.Background(), lines[1])
	if img == nil {
		return nil
	}
	img.Ref, img.Kind = ref, kind
	return img
}

// holdKey returns the cache entry key, held until Release, or nil when it
// is not there (or key names no entry).
func (s *Store) holdKey(ctx context.Context, key string) *Image {
	if key == "" || strings.ContainsAny(key, "/\\") || !hasEntryPrefix(key) {
		return nil
	}
	unlock, err := s.lock(ctx, filepath.Join(stateDir, key+".lock"))
	if err != nil {
		return nil
	}
	defer unlock()
	dir := filepath.Join(s.Dir, key)
	img, err := readMeta(dir)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(img.Rootfs); err != nil {
		return nil
	}
	h, err := holdFile(dir)
	if err != nil {
		return nil
	}
	s.keep(dir, h)
	touch(dir)
	img.key = key
	return img
}

// writeRefIndex records that ref names the cache entry key, through a
// temporary file renamed into place (concurrent runs agree).
func writeRefIndex(file, ref, key string) error {
	return results.ReplaceFile(file, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, ref+"\n"+key+"\n")
		return err
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}
