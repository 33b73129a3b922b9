package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"harness/image/pull"
)

// Policy says when an image reference that is neither a file nor a build
// context is pulled from its registry.
type Policy string

const (
	// PullIfMissing pulls an image the store and podman's local storage
	// lack (the default).
	PullIfMissing Policy = "pull-if-missing"
	// PullAlways resolves the reference in its registry every run (a tag
	// that moved is pulled again; blobs already stored are not).
	PullAlways Policy = "always"
	// PullNever never pulls: the image must be in the store or in
	// podman's local storage.
	PullNever Policy = "never"
)

// ParsePolicy reads a pull policy.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return PullIfMissing, nil
	case PullIfMissing, PullAlways, PullNever:
		return p, nil
	}
	return "", fmt.Errorf("pull policy %q: want pull-if-missing, always or never", s)
}

// Pulls is the store of blobs pulled from registries, inside the cache.
func (s *Store) Pulls() *pull.Store {
	return &pull.Store{Dir: filepath.Join(s.Dir, "registry")}
}

// pullsOn says whether the store may pull ref: pulls are on, and ref
// names a registry (podman's localhost/ names are its local images').
func (s *Store) pullsOn(ref string) bool {
	return s.Registry != nil && s.Policy != PullNever && pull.Pullable(ref)
}

// fromPulls returns ref's image from the pulled blobs (unpacked once),
// or nil when the store has not pulled it.
func (s *Store) fromPulls(ref string) (*Image, error) {
	rec := s.Pulls().Lookup(ref)
	if rec == nil {
		return nil, nil
	}
	return s.unpackPulled(ref, rec)
}

// unpackPulled unpacks a pulled image into the cache, once per manifest
// digest.
func (s *Store) unpackPulled(ref string, rec *pull.Record) (*Image, error) {
	ps := s.Pulls()
	img, err := s.cached("pull-"+cacheName(rec.Digest), ref, "pull", func(img *Image, rootfs string) error {
		img.ID, img.Digest = rec.Digest, rec.Digest
		cfg, err := unpackDigest(ps.Dir, rec.Digest, rootfs)
		img.Config = cfg
		return err
	})
	if err != nil {
		return nil, err
	}
	img.Digest = rec.Digest
	return img, nil
}

// pullNow pulls ref from its registry and unpacks it.
func (s *Store) pullNow(ctx context.Context, ref string) (*Image, error) {
	c := *s.Registry
	c.Store = s.Pulls()
	rec, err := c.Pull(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.unpackPulled(ref, rec)
}

// Fetch makes sure the store has ref's blobs, pulling it as the policy
// says, without unpacking it: what a run does for every image before its
// first agent starts. It reports whether it pulled. A reference that is
// a file or directory, or that podman's local storage has, is left to
// Resolve. onProgress, when set, is told of each layer.
func (s *Store) Fetch(ctx context.Context, ref string, onProgress func(pull.Progress)) (bool, error) {
	if Kind(ref) != "local" || !s.pullsOn(ref) {
		return false, nil
	}
	if s.Policy != PullAlways {
		if s.Pulls().Lookup(ref) != nil || s.podmanHas(ctx, ref) {
			return false, nil
		}
	}
	c := *s.Registry
	c.Store = s.Pulls()
	if onProgress != nil {
		c.OnProgress = onProgress
	}
	if _, err := c.Pull(ctx, ref); err != nil {
		return false, fmt.Errorf("image %s: %w", ref, err)
	}
	return true, nil
}

// podmanHas says whether podman (or buildah) has ref in its local
// storage.
func (s *Store) podmanHas(ctx context.Context, ref string) bool {
	bin, name, err := s.tool()
	if err != nil {
		return false
	}
	if name == "buildah" {
		return runQuiet(ctx, bin, "inspect", "--type", "image", ref) == nil
	}
	return runQuiet(ctx, bin, "image", "exists", ref) == nil
}

// Entry is one unpacked image of the cache.
type Entry struct {
	// Key is its directory's name in the cache.
	Key string
	// Ref is the reference it was made for, Kind its kind.
	Ref, Kind string
	// Digest identifies its content.
	Digest string
	// Size is the bytes of its root filesystem.
	Size int64
	// LastUsed is when a run last resolved it.
	LastUsed time.Time
	// InUse says a run holds it now.
	InUse bool
	// UsedBy are the task sets that have run in it (their directories),
	// as UsedBy noted them.
	UsedBy []string
}

// usersFile lists, one a line, the task sets that used an entry.
const usersFile = "users"

// UsedBy notes that the task set in dir ran in img, for Entries. An image
// that is not an entry of the cache (a directory used in place) is left
// alone; a note that cannot be written is dropped (it only informs).
func (s *Store) UsedBy(img *Image, dir string) {
	if img == nil || dir == "" || img.Rootfs == "" {
		return
	}
	entry := filepath.Dir(img.Rootfs)
	if filepath.Dir(entry) != filepath.Clean(s.Dir) {
		return
	}
	file := filepath.Join(entry, usersFile)
	b, _ := os.ReadFile(file)
	for _, l := range strings.Split(string(b), "\n") {
		if l == dir {
			return
		}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(dir + "\n")
}

// usedBy reads the task sets noted for the entry in dir.
func usedBy(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, usersFile))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// entryPrefixes are the cache's unpacked images' directory names.
var entryPrefixes = []string{"tar-", "oci-", "local-", "pull-"}

// Entries lists the cache's unpacked images, least recently used first.
func (s *Store) Entries() ([]Entry, error) {
	des, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		if !de.IsDir() || !hasEntryPrefix(de.Name()) {
			continue
		}
		dir := filepath.Join(s.Dir, de.Name())
		img, err := readMeta(dir)
		if err != nil {
			continue
		}
		e := Entry{Key: de.Name(), Ref: img.Ref, Kind: img.Kind, Digest: img.Digest, Size: img.Size, LastUsed: lastUsed(dir)}
		if e.Digest == "" {
			e.Digest = img.ID
		}
		if e.Size == 0 {
			e.Size = treeSize(img.Rootfs)
		}
		e.InUse = s.inUse(dir)
		e.UsedBy = usedBy(dir)
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

func hasEntryPrefix(n string) bool {
	for _, p := range entryPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// lastUsed is when the entry in dir was last resolved.
func lastUsed(dir string) time.Time {
	if fi, err := os.Stat(filepath.Join(dir, "used")); err == nil {
		return fi.ModTime()
	}
	if fi, err := os.Stat(filepath.Join(dir, "image.json")); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// treeSize is the bytes of the files under dir (hard links counted once).
func treeSize(dir string) int64 {
	var n int64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		if st.Nlink > 1 && d.Type().IsRegular() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		n += st.Blocks * 512
		return nil
	})
	return n
}

// holds are the entries this store holds for its run: a shared lock on
// each entry's hold file, so no other run's budget removes them.
type holds struct {
	mu    sync.Mutex
	files map[string]*os.File
}

// hold takes a shared lock on the entry in dir, kept until Release.
func (s *Store) hold(dir string) {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if s.held.files == nil {
		s.held.files = map[string]*os.File{}
	}
	if s.held.files[dir] != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "hold"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_SH) != nil {
		f.Close()
		return
	}
	s.held.files[dir] = f
}

// Release lets go of the images this store resolved: the budget may
// remove them now.
func (s *Store) Release() {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	for k, f := range s.held.files {
		f.Close()
		delete(s.held.files, k)
	}
}

// release lets go of one entry this store holds.
func (s *Store) release(dir string) {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if f := s.held.files[dir]; f != nil {
		f.Close()
		delete(s.held.files, dir)
	}
}

// inUse says whether a run (this one or another) holds the entry in dir.
func (s *Store) inUse(dir string) bool {
	s.held.mu.Lock()
	mine := s.held.files[dir] != nil
	s.held.mu.Unlock()
	if mine {
		return true
	}
	f, err := os.Open(filepath.Join(dir, "hold"))
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// used marks the entry in dir used now, and holds it.
func (s *Store) used(dir string) {
	now := time.Now()
	p := filepath.Join(dir, "used")
	if err := os.Chtimes(p, now, now); err != nil {
		if f, err := os.Create(p); err == nil {
			f.Close()
		}
	}
	s.hold(dir)
}

// remove removes an unpacked image unless a run holds it, saying whether
// it did. The entry is renamed out of the way first, so a run never finds
// it half-removed.
func (s *Store) remove(key string) bool {
	dir := filepath.Join(s.Dir, key)
	if s.inUse(dir) {
		return false
	}
	trash, err := os.MkdirTemp(s.Dir, ".trash-")
	if err != nil {
		return false
	}
	if err := os.Rename(dir, filepath.Join(trash, key)); err != nil {
		removeTree(trash)
		return false
	}
	removeTree(trash)
	return true
}

// trim removes the least recently used unpacked images not in use until
// the cache's are within MaxBytes. It returns what it removed.
func (s *Store) trim() []Entry {
	if s.MaxBytes <= 0 {
		return nil
	}
	entries, err := s.Entries()
	if err != nil {
		return nil
	}
	var total int64
	for _, e := range entries {
		total += e.Size
	}
	var removed []Entry
	for _, e := range entries {
		if total <= s.MaxBytes {
			break
		}
		if !e.InUse && s.remove(e.Key) {
			total -= e.Size
			removed = append(removed, e)
		}
	}
	if total > s.MaxBytes && s.Log != nil {
		fmt.Fprintf(s.Log, "warning: the image cache holds %s of images in use, over its budget of %s\n", Bytes(total), Bytes(s.MaxBytes))
	}
	return removed
}

// PruneOptions say what Prune removes.
type PruneOptions struct {
	// OlderThan removes what was not used for this long (0 = everything
	// not in use, with All).
	OlderThan time.Duration
	// All removes every unpacked image not in use and every pulled image.
	All bool
	// DryRun says what would go without removing it.
	DryRun bool
	// Now is the time OlderThan counts from (zero = now).
	Now time.Time
}

// Pruned is what Prune removed (or, dry, would remove).
type Pruned struct {
	// Entries are the unpacked images.
	Entries []Entry
	// Refs are the pulled references forgotten.
	Refs []string
	// Blobs is the number of pulled blobs removed, BlobBytes their size.
	Blobs     int
	BlobBytes int64
	// Bytes is everything freed.
	Bytes int64
}

// Prune removes unpacked images not in use that were last used before
// OlderThan (or all of them), and pulled references (with the blobs no
// other reference needs) likewise.
func (s *Store) Prune(o PruneOptions) (Pruned, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	cutoff := now.Add(-o.OlderThan)
	var p Pruned
	entries, err := s.Entries()
	if err != nil {
		return p, err
	}
	for _, e := range entries {
		if e.InUse || !o.All && !e.LastUsed.Before(cutoff) {
			continue
		}
		if !o.DryRun && !s.remove(e.Key) {
			continue
		}
		p.Entries = append(p.Entries, e)
		p.Bytes += e.Size
	}
	ps := s.Pulls()
	recs, err := ps.Records()
	if err != nil {
		return p, err
	}
	var keep []string
	for _, r := range recs {
		if o.All || r.Pulled.Before(cutoff) && !s.pulledInUse(r.Digest) {
			p.Refs = append(p.Refs, r.Name)
			if !o.DryRun {
				if err := ps.Forget(r.Name); err != nil {
					return p, err
				}
			}
			continue
		}
		keep = append(keep, r.Digest)
	}
	needed := ps.Referenced(keep...)
	blobs, err := ps.Blobs()
	if err != nil {
		return p, err
	}
	for d, n := range blobs {
		if needed[d] {
			continue
		}
		if !o.DryRun {
			if err := ps.RemoveBlob(d); err != nil {
				return p, err
			}
		}
		p.Blobs++
		p.BlobBytes += n
		p.Bytes += n
	}
	return p, nil
}

// pulledInUse says whether a run holds the unpacked image of a pulled
// manifest.
func (s *Store) pulledInUse(digest string) bool {
	return s.inUse(filepath.Join(s.Dir, "pull-"+cacheName(digest)))
}

// Bytes words a size for people: 1.5 GB, 320 MB, 12 KB.
func Bytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
