package judgecache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestKeyIsUnambiguous(t *testing.T) {
	if Key([]byte("ab"), []byte("c")) == Key([]byte("a"), []byte("bc")) {
		t.Fatal("parts that concatenate alike give the same key")
	}
	if a, b := Key([]byte("x")), Key([]byte("x")); a != b {
		t.Fatal("key is not stable")
	}
}

func TestDir(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	d, err := Dir(env(map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}))
	if err != nil || d != "/x/harness/judge" {
		t.Errorf("XDG: %q %v", d, err)
	}
	d, err = Dir(env(map[string]string{"XDG_CACHE_HOME": "relative", "HOME": "/h"}))
	if err != nil || d != "/h/.cache/harness/judge" {
		t.Errorf("HOME: %q %v", d, err)
	}
	if _, err := Dir(env(nil)); err == nil {
		t.Error("no XDG_CACHE_HOME and no HOME: want an error")
	}
}

func TestPutGet(t *testing.T) {
	c := New(t.TempDir(), 0, func(err error) { t.Errorf("warn: %v", err) })
	k := Key([]byte("request"))
	if _, ok := c.Get(k); ok {
		t.Fatal("hit in an empty cache")
	}
	c.Put(k, []byte(`{"answer":"<yes> & no"}`))
	b, ok := c.Get(k)
	if !ok || string(b) != `{"answer":"<yes> & no"}` {
		t.Fatalf("got %q %v", b, ok)
	}
	if h, m := c.Stats(); h != 1 || m != 1 {
		t.Errorf("stats %d hits %d misses", h, m)
	}
	info, err := os.Stat(c.path(k))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("entry mode %v %v", info.Mode(), err)
	}
}

// A corrupted, truncated or foreign entry is a miss, and Put replaces it.
func TestCorruptedEntryIsAMiss(t *testing.T) {
	c := New(t.TempDir(), 0, nil)
	k := Key([]byte("request"))
	c.Put(k, []byte(`{"a":1}`))
	good, _ := os.ReadFile(c.path(k))
	for name, content := range map[string]string{
		"truncated":   string(good[:len(good)/2]),
		"garbage":     "\x00\x01not json",
		"other key":   strings.Replace(string(good), k, Key([]byte("other")), 1),
		"old version": strings.Replace(string(good), `"v":1`, `"v":0`, 1),
		"empty":       "",
	} {
		if err := os.WriteFile(c.path(k), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, ok := c.Get(k); ok {
			t.Errorf("%s entry: hit %q", name, b)
		}
	}
	c.Put(k, []byte(`{"a":2}`))
	if b, ok := c.Get(k); !ok || string(b) != `{"a":2}` {
		t.Errorf("after Put: %q %v", b, ok)
	}
}

// Over its cap the cache drops the least recently used entries; a hit
// makes an entry recent.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`"` + strings.Repeat("x", 1000) + `"`)
	fill := New(dir, 0, nil)
	keys := make([]string, 12)
	old := time.Now().Add(-time.Hour)
	for i := range keys {
		keys[i] = Key([]byte(fmt.Sprint(i)))
		fill.Put(keys[i], body)
		// Entries get distinct ages, oldest first.
		at := old.Add(time.Duration(i) * time.Minute)
		os.Chtimes(fill.path(keys[i]), at, at)
	}
	c := New(dir, 10_000, nil)
	// Entry 0 is the oldest, but read now: it stays.
	if _, ok := c.Get(keys[0]); !ok {
		t.Fatal("entry 0 already gone")
	}
	c.Put(Key([]byte("new")), body)
	var total int64
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	if total > 10_000 {
		t.Errorf("cache holds %d bytes, over its cap", total)
	}
	if _, ok := c.Get(keys[0]); !ok {
		t.Error("the recently read entry was evicted")
	}
	if _, ok := c.Get(keys[1]); ok {
		t.Error("the least recently used entry was kept")
	}
	if _, ok := c.Get(Key([]byte("new"))); !ok {
		t.Error("the newest entry was evicted")
	}
}

// Writers and readers of the same keys at once never see a torn entry.
func TestConcurrentWriters(t *testing.T) {
	c := New(t.TempDir(), 0, func(err error) { t.Errorf("warn: %v", err) })
	k := Key([]byte("shared"))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := []byte(fmt.Sprintf(`{"writer":%d,"pad":"%s"}`, i, strings.Repeat("p", 4096)))
			for range 50 {
				c.Put(k, body)
				if b, ok := c.Get(k); ok && !strings.HasPrefix(string(b), `{"writer":`) {
					t.Errorf("torn entry %q", b[:20])
				}
			}
		}()
	}
	wg.Wait()
	ents, _ := os.ReadDir(filepath.Dir(c.path(k)))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// A directory that cannot be written turns caching off with one warning.
func TestUnwritableDirWarnsOnce(t *testing.T) {
	parent := t.TempDir()
	blocker := filepath.Join(parent, "file")
	os.WriteFile(blocker, nil, 0o600)
	var warnings []error
	c := New(filepath.Join(blocker, "cache"), 0, func(err error) { warnings = append(warnings, err) })
	c.Put(Key([]byte("a")), []byte(`1`))
	c.Put(Key([]byte("b")), []byte(`2`))
	if len(warnings) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(warnings), warnings)
	}
	if _, ok := c.Get(Key([]byte("a"))); ok {
		t.Error("hit in an unwritable cache")
	}
}
