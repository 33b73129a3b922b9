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

// fromPulls returns ref's image from the pulled blobs (unpacked once;
// with lazy, packed), or nil when the store has not pulled it.
func (s *Store) fromPulls(ctx context.Context, ref string, lazy bool) (*Image, error) {
	rec := s.Pulls().Lookup(ref)
	if rec == nil {
		return nil, nil
	}
	return s.unpackPulled(ctx, ref, rec, lazy)
}

// unpackPulled unpacks a pulled image into the cache, once per manifest
// digest; with lazy it leaves it packed for Acquire, its blobs held until
// Release.
func (s *Store) unpackPulled(ctx context.Context, ref string, rec *pull.Record, lazy bool) (*Image, error) {
	ps := s.Pulls()
	key := PulledKey(rec.Digest)
	fill := func(img *Image, rootfs string) error {
		img.ID, img.Digest = rec.Digest, rec.Digest
		cfg, err := unpackDigest(ps.Dir, rec.Digest, rootfs)
		img.Config = cfg
		return err
	}
	if lazy {
		cfg, err := digestConfig(ps.Dir, rec.Digest)
		if err != nil {
			return nil, err
		}
		s.need(key)
		return s.packed(&Image{Ref: ref, Kind: "pull", ID: rec.Digest, Digest: rec.Digest, Config: cfg}, key, fill), nil
	}
	img, err := s.cached(ctx, key, ref, "pull", fill)
	if err != nil {
		return nil, err
	}
	img.Digest = rec.Digest
	return img, nil
}

// pullNow pulls ref from its registry and unpacks it (with lazy, leaves
// it packed).
func (s *Store) pullNow(ctx context.Context, ref string, lazy bool) (*Image, error) {
	c := *s.Registry
	c.Store = s.Pulls()
	rec, err := c.Pull(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.unpackPulled(ctx, ref, rec, lazy)
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
	// InUse says a run or a trial holds it now.
	InUse bool
	// UsedBy are the task sets (their directories) and prompts files
	// that have run in it, as UsedBy noted them.
	UsedBy []string
}

// UsedBy notes that user (a task set's directory, a prompts file) runs in
// img, for Entries and Users. The note is kept beside the image's cache
// entry, so it outlives the unpacked tree: a packed image's is noted too.
// An image that is not the cache's (a directory used in place) is left
// alone; a note that cannot be written is dropped (it only informs).
func (s *Store) UsedBy(img *Image, user string) {
	if img == nil || user == "" || img.key == "" || s.Dir == "" {
		return
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, stateDir), 0o755); err != nil {
		return
	}
	file := filepath.Join(s.Dir, stateDir, img.key+".users")
	for _, u := range readUsers(file) {
		if u == user {
			return
		}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(user + "\n")
}

// Users are the users noted (UsedBy) for the image whose cache entry is
// key, sorted.
func (s *Store) Users(key string) []string {
	// Before notes were kept beside the entry, they were kept in it.
	seen := map[string]bool{}
	var out []string
	for _, f := range []string{filepath.Join(s.Dir, stateDir, key+".users"), filepath.Join(s.Dir, key, "users")} {
		for _, u := range readUsers(f) {
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	sort.Strings(out)
	return out
}

// PulledKey is the cache entry a pulled image (by manifest digest) is
// unpacked into: Users takes it.
func PulledKey(digest string) string { return "pull-" + cacheName(digest) }

// readUsers reads a users file, one a line.
func readUsers(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// entryPrefixes are the cache's unpacked images' directory names.
var entryPrefixes = []string{"tar-", "oci-", "local-", "pull-"}

// Entries lists the cache's unpacked images, least recently used first.
func (s *Store) Entries() ([]Entry, error) {
	return s.entries(true)
}

// entries lists the unpacked images, least recently used first; without
// full, InUse and UsedBy are left unset (what a budget's first look
// needs is the sizes).
func (s *Store) entries(full bool) ([]Entry, error) {
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
		if full {
			e.InUse = s.inUse(dir)
			e.UsedBy = s.Users(de.Name())
		}
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

// holds are what this store holds for its run until Release: a shared
// lock on the hold file of each entry it resolved (no budget removes it)
// and on the need file of each pulled image it prepared (no prune removes
// its blobs), by file.
type holds struct {
	mu    sync.Mutex
	files map[string]*os.File
}

// holdFile takes a shared lock on the hold file of the entry in dir: while
// the file stays open, no budget or prune (of this run or another)
// removes the entry. On a file system without locks it is open, unlocked.
func holdFile(dir string) (*os.File, error) {
	return sharedLock(filepath.Join(dir, "hold"))
}

// sharedLock opens file (made if missing) with a shared lock on it.
func sharedLock(file string) (*os.File, error) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if err != unix.EINTR {
			break
		}
	}
	return f, nil
}

// keep holds f's lock until Release (one lock a file: a second is
// closed).
func (s *Store) keep(file string, f *os.File) {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if s.held.files == nil {
		s.held.files = map[string]*os.File{}
	}
	if s.held.files[file] != nil {
		f.Close()
		return
	}
	s.held.files[file] = f
}

// need holds the blobs of the pulled image whose entry is key until
// Release.
func (s *Store) need(key string) {
	if err := os.MkdirAll(filepath.Join(s.Dir, stateDir), 0o755); err != nil {
		return
	}
	file := filepath.Join(s.Dir, stateDir, key+".need")
	f, err := sharedLock(file)
	if err != nil {
		return
	}
	s.keep(file, f)
}

// Release lets go of the images this store resolved or prepared: the
// budget may remove them now, and a prune the blobs of those pulled.
func (s *Store) Release() {
	s.held.mu.Lock()
	for k, f := range s.held.files {
		f.Close()
		delete(s.held.files, k)
	}
	s.held.mu.Unlock()
	s.trim()
}

// inUse says whether a run or a trial (of this process or another) holds
// the entry in dir.
func (s *Store) inUse(dir string) bool {
	return locked(filepath.Join(dir, "hold"))
}

// locked says whether someone holds a lock on file.
func locked(file string) bool {
	f, err := os.Open(file)
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

// touch marks the entry in dir used now.
func touch(dir string) {
	now := time.Now()
	p := filepath.Join(dir, "used")
	if err := os.Chtimes(p, now, now); err != nil {
		if f, err := os.Create(p); err == nil {
			f.Close()
		}
	}
}

// remove removes an unpacked image unless a run or trial holds it, or one
// is making or holding it now, saying whether it did. The entry is
// renamed out of the way first, so a run never finds it half-removed.
func (s *Store) remove(key string) bool {
	unlock, ok := s.tryLock(filepath.Join(stateDir, key+".lock"))
	if !ok {
		return false
	}
	defer unlock()
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

// OverBudget is what the images held hold when they alone exceed the
// budget (Store.OnOverBudget).
type OverBudget struct {
	// Budget is Store.MaxBytes; Total the bytes of the unpacked images
	// left, all of them held.
	Budget, Total int64
	// Held are the unpacked images held, by runs and trials.
	Held []Entry
}

// String words it for a warning, naming no setting.
func (o OverBudget) String() string {
	var held []string
	for _, e := range o.Held {
		held = append(held, fmt.Sprintf("%s (%s)", e.Ref, Bytes(e.Size)))
	}
	return fmt.Sprintf("the images in use hold %s, over the image cache's budget of %s: %s; none is removed while in use", Bytes(o.Total), Bytes(o.Budget), strings.Join(held, ", "))
}

// trim removes the least recently used unpacked images no one holds until
// the cache's are within MaxBytes, and says once when the images held
// alone exceed it. It returns what it removed.
func (s *Store) trim() []Entry {
	if s.MaxBytes <= 0 {
		return nil
	}
	s.trimMu.Lock()
	defer s.trimMu.Unlock()
	// The sizes first: within the budget, that is all.
	entries, err := s.entries(false)
	if err != nil {
		return nil
	}
	var total int64
	for _, e := range entries {
		total += e.Size
	}
	if total <= s.MaxBytes {
		return nil
	}
	var removed []Entry
	left := entries[:0:0]
	for _, e := range entries {
		// remove checks that no one holds it.
		if total > s.MaxBytes && s.remove(e.Key) {
			total -= e.Size
			removed = append(removed, e)
			continue
		}
		left = append(left, e)
	}
	if total > s.MaxBytes && !s.warned {
		s.warned = true
		o := OverBudget{Budget: s.MaxBytes, Total: total}
		for _, e := range left {
			if s.inUse(filepath.Join(s.Dir, e.Key)) {
				e.InUse = true
				o.Held = append(o.Held, e)
			}
		}
		switch {
		case s.OnOverBudget != nil:
			s.OnOverBudget(o)
		case s.Log != nil:
			fmt.Fprintf(s.Log, "warning: %s\n", o)
		}
	}
	return removed
}

// PruneOptions say what Prune removes.
type PruneOptions struct {
	// OlderThan removes what was not used for this long (0 = everything
	// not in use, with All).
	OlderThan time.Duration
	// All removes every unpacked image not in use and every pulled image
	// no run needs.
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
		if (o.All || r.Pulled.Before(cutoff)) && !s.pulledInUse(r.Digest) {
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

// pulledInUse says whether a run or trial holds the unpacked image of a
// pulled manifest, or a run has it prepared to unpack.
func (s *Store) pulledInUse(digest string) bool {
	key := PulledKey(digest)
	return s.inUse(filepath.Join(s.Dir, key)) || locked(filepath.Join(s.Dir, stateDir, key+".need"))
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
