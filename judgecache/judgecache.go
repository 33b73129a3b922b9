// Package judgecache keeps the answers of an LLM judge on disk, so a record
// judged once is never sent to the model again: one file per answer, named
// by the SHA-256 of everything that decides it (the caller builds the key),
// written to a temporary file and renamed into place, so readers in other
// goroutines or processes see a whole entry or none. A size cap evicts the
// least recently used entries (by modification time; a hit renews it).
//
// An entry that cannot be read or does not parse is a miss: the caller asks
// the model again and the entry is replaced. The cache never makes a
// grading fail: a directory that cannot be written only turns caching off
// (the first such error goes to the warn function).
package judgecache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBytes is the default size cap of a cache directory.
const DefaultMaxBytes = 256 << 20

// formatVersion is in every key and entry; a change of the entry format
// or of what a key covers bumps it, and older entries become misses.
const formatVersion = 1

// tmpPrefix starts the names of entries being written.
const tmpPrefix = ".tmp-"

// Dir is the default cache directory: $XDG_CACHE_HOME/harness/judge, or
// $HOME/.cache/harness/judge. getenv looks up the environment.
func Dir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "harness", "judge"), nil
	}
	if h := getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".cache", "harness", "judge"), nil
	}
	return "", errors.New("judge cache: neither $XDG_CACHE_HOME nor $HOME is set to an absolute path")
}

// Key hashes the parts of a key into an entry name. Each part is length
// prefixed, so no two different lists of parts give the same key.
func Key(parts ...[]byte) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], formatVersion)
	h.Write(n[:])
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Cache is a judge cache directory. It is safe for concurrent use, also by
// several processes sharing the directory.
type Cache struct {
	dir  string
	max  int64
	warn func(error)

	warned atomic.Bool
	mu     sync.Mutex
	size   int64 // bytes of entries as last counted plus since written; -1 before counting
	hits   atomic.Int64
	misses atomic.Int64
}

// New opens the cache in dir (made on the first write). maxBytes caps its
// size (0: no cap); warn, if not nil, is told the first error that turned
// caching off or lost an entry.
func New(dir string, maxBytes int64, warn func(error)) *Cache {
	return &Cache{dir: dir, max: maxBytes, warn: warn, size: -1}
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Stats returns how many lookups hit and missed so far.
func (c *Cache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }

// entry is the content of an entry file.
type entry struct {
	V    int             `json:"v"`
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body"`
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, key[:2], key+".json")
}

func validKey(key string) bool {
	if len(key) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(key)
	return err == nil
}

// Get returns the body stored under key. A missing, unreadable or
// corrupted entry is a miss.
func (c *Cache) Get(key string) ([]byte, bool) {
	if !validKey(key) {
		c.misses.Add(1)
		return nil, false
	}
	p := c.path(key)
	b, err := os.ReadFile(p)
	if err != nil {
		c.misses.Add(1)
		return nil, false
	}
	var e entry
	if json.Unmarshal(b, &e) != nil || e.V != formatVersion || e.Key != key || len(e.Body) == 0 {
		c.misses.Add(1)
		return nil, false
	}
	now := time.Now()
	os.Chtimes(p, now, now) // recently used: evicted last; best effort
	c.hits.Add(1)
	return e.Body, true
}

// Put stores body (a JSON value) under key, replacing any entry, then
// evicts the oldest entries if the cache is over its cap.
func (c *Cache) Put(key string, body []byte) {
	if !validKey(key) {
		c.fail(fmt.Errorf("judge cache: bad key %q", key))
		return
	}
	if !json.Valid(body) {
		c.fail(errors.New("judge cache: not storing a body that is not JSON"))
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(entry{V: formatVersion, Key: key, Body: body}); err != nil {
		c.fail(fmt.Errorf("judge cache: %w", err))
		return
	}
	n, err := c.write(c.path(key), buf.Bytes())
	if err != nil {
		c.fail(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size >= 0 {
		c.size += n
	}
	if c.max > 0 && (c.size < 0 || c.size > c.max) {
		c.evict()
	}
}

// write puts data at p through a temporary file renamed into place.
func (c *Cache) write(p string, data []byte) (int64, error) {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("judge cache: %w", err)
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return 0, fmt.Errorf("judge cache: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), p)
	}
	if werr != nil {
		os.Remove(f.Name())
		return 0, fmt.Errorf("judge cache: write %s: %w", p, werr)
	}
	return int64(len(data)), nil
}

func (c *Cache) fail(err error) {
	if c.warn != nil && c.warned.CompareAndSwap(false, true) {
		c.warn(err)
	}
}

// evict counts the entries and removes the least recently used until the
// cache is at most nine tenths of its cap (so it does not rescan on every
// write). Temporary files left by a crashed writer over an hour old go
// too. c.mu is held.
func (c *Cache) evict() {
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	stale := time.Now().Add(-time.Hour)
	filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			if info.ModTime().Before(stale) {
				os.Remove(p)
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		files = append(files, file{p, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if total > c.max {
		sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
		target := c.max / 10 * 9
		for _, f := range files {
			if total <= target {
				break
			}
			if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
				total -= f.size
			}
		}
	}
	c.size = total
}
