package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// sizedTar writes a root filesystem tar whose one big file has kb KB of
// content unique to name.
func sizedTar(t *testing.T, name string, kb int) string {
	t.Helper()
	body := strings.Repeat(fmt.Sprintf("%-31s\n", name), kb*1024/32)
	entries := append(append([]entry{}, baseEntries...), entry{name: "app/" + name + ".bin", body: body})
	file := filepath.Join(t.TempDir(), name+".tar")
	if err := os.WriteFile(file, makeTar(t, entries), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// unpackedBytes is what the cache's unpacked images hold, by its own
// accounting.
func unpackedBytes(t *testing.T, s *Store) int64 {
	t.Helper()
	es, err := s.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range es {
		n += e.Size
	}
	return n
}

// A run of more images than its budget holds stays within it: each image
// is prepared packed, unpacked as a trial acquires it and held only until
// that trial releases it; the budget then removes the least recently used
// no one holds.
func TestPreparedImagesStayWithinTheBudgetAcrossARun(t *testing.T) {
	s := newStore(t)
	var refs []string
	for _, n := range []string{"a", "b", "c"} {
		refs = append(refs, sizedTar(t, n, 512))
	}
	// Measure one image (in a store of its own), then allow one and a
	// half.
	probe := &Store{Dir: filepath.Join(t.TempDir(), "probe")}
	one, err := probe.Resolve(context.Background(), refs[0])
	if err != nil {
		t.Fatal(err)
	}
	s.MaxBytes = one.Size * 3 / 2
	var over []OverBudget
	s.OnOverBudget = func(o OverBudget) { over = append(over, o) }

	var imgs []*Image
	for _, ref := range refs {
		img, err := s.Prepare(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if !img.Packed() || img.Rootfs != "" || img.Kind != "tar" || img.ID == "" {
			t.Fatalf("prepared %s: %+v, want it packed with its ID", ref, img)
		}
		imgs = append(imgs, img)
	}
	if n := unpackedBytes(t, s); n != 0 {
		t.Fatalf("preparing unpacked %d bytes, want none before the first trial", n)
	}
	// One trial at a time, each image twice over.
	for round := 0; round < 2; round++ {
		for i, img := range imgs {
			got, release, err := s.Acquire(context.Background(), img)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Exists("/app/"+[]string{"a", "b", "c"}[i]+".bin") || got.Packed() {
				t.Fatalf("acquired %s lacks its files: %+v", img.Ref, got)
			}
			if n := unpackedBytes(t, s); n > s.MaxBytes+got.Size {
				t.Fatalf("round %d, trial of %s: the cache holds %d bytes, over the budget %d and the one held (%d)", round, img.Ref, n, s.MaxBytes, got.Size)
			}
			release()
			if n := unpackedBytes(t, s); n > s.MaxBytes {
				t.Fatalf("round %d, after the trial of %s: the cache holds %d bytes, over its budget %d", round, img.Ref, n, s.MaxBytes)
			}
		}
	}
	if len(over) != 0 {
		t.Fatalf("one image held at a time said it was over budget: %+v", over)
	}
	// The last used is the one kept.
	es, _ := s.Entries()
	if len(es) != 1 || es[0].Ref != refs[2] {
		t.Fatalf("entries %+v, want the last image alone", es)
	}
}

// Images held by trials in flight are never removed, even past the
// budget; that is said once, naming the budget and what is held.
func TestHeldImagesPastTheBudgetAreKeptAndSaidOnce(t *testing.T) {
	s := newStore(t)
	var imgs []*Image
	for _, n := range []string{"x", "y", "z"} {
		img, err := s.Prepare(context.Background(), sizedTar(t, n, 256))
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	s.MaxBytes = 1 // nothing fits
	var over []OverBudget
	s.OnOverBudget = func(o OverBudget) { over = append(over, o) }
	var held []*Image
	var releases []func()
	for _, img := range imgs {
		got, release, err := s.Acquire(context.Background(), img)
		if err != nil {
			t.Fatal(err)
		}
		held, releases = append(held, got), append(releases, release)
	}
	for _, h := range held {
		if _, err := os.Stat(h.Rootfs); err != nil {
			t.Fatalf("a held image was removed: %v", err)
		}
	}
	if len(over) != 1 || over[0].Budget != 1 || len(over[0].Held) == 0 || over[0].Total <= 1 {
		t.Fatalf("told %+v, want once, with the budget and what is held", over)
	}
	if !strings.Contains(over[0].String(), held[0].Ref) || !strings.Contains(over[0].String(), "1 B") {
		t.Fatalf("warning %q names neither what is held nor the budget", over[0])
	}
	// Released, each goes.
	for _, r := range releases {
		r()
	}
	if n := unpackedBytes(t, s); n != 0 {
		t.Fatalf("all released: the cache holds %d bytes, want none", n)
	}
	if len(over) != 1 {
		t.Fatalf("said %d times, want once", len(over))
	}
}

// Two trials of one image, in one store or in two (two runs sharing the
// cache), unpack it once: a lock per entry.
func TestConcurrentTrialsUnpackAnImageOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	ref := sizedTar(t, "shared", 1024)
	stores := []*Store{{Dir: dir}, {Dir: dir}}
	var imgs []*Image
	var fills atomic.Int32
	for _, s := range stores {
		img, err := s.Prepare(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		// Count the unpacks.
		unpack := img.unpack
		img.unpack = func(img *Image, rootfs string) error {
			fills.Add(1)
			return unpack(img, rootfs)
		}
		imgs = append(imgs, img)
	}
	const n = 6
	var wg sync.WaitGroup
	got := make([]*Image, n)
	rel := make([]func(), n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], rel[i], errs[i] = stores[i%2].Acquire(context.Background(), imgs[i%2])
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i].Made {
			made++
		}
		if got[i].Rootfs != got[0].Rootfs {
			t.Fatalf("trial %d got %s, trial 0 %s", i, got[i].Rootfs, got[0].Rootfs)
		}
		defer rel[i]()
	}
	if made != 1 || fills.Load() != 1 {
		t.Fatalf("%d trials unpacked the image (%d made it), want 1", fills.Load(), made)
	}
}

// A packed tar is unpacked as it was when the run prepared it, or not at
// all: a trial never runs in a tar changed since.
func TestAcquireRefusesATarChangedSincePrepared(t *testing.T) {
	s := newStore(t)
	ref := sizedTar(t, "before", 16)
	img, err := s.Prepare(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	other := sizedTar(t, "after", 16)
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ref, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(context.Background(), img); err == nil || !strings.Contains(err.Error(), "changed since the run started") {
		t.Fatalf("acquire of a changed tar: %v, want it refused", err)
	}
	if n := unpackedBytes(t, s); n != 0 {
		t.Fatalf("the refused tar left %d bytes unpacked", n)
	}
}

// BenchmarkAcquire is what holding an unpacked image costs a trial: the
// entry's lock, its hold, its use noted, and, with a budget, the cache
// looked over after the acquire and after the release, in a cache of
// 10 or 100 unpacked images.
func BenchmarkAcquire(b *testing.B) {
	for _, n := range []int{10, 100} {
		for _, budget := range []bool{false, true} {
			b.Run(fmt.Sprintf("entries=%d/budget=%v", n, budget), func(b *testing.B) {
				s := &Store{Dir: filepath.Join(b.TempDir(), "cache")}
				var img *Image
				for i := range n {
					file := filepath.Join(b.TempDir(), "rootfs.tar")
					entries := append(append([]entry{}, baseEntries...), entry{name: fmt.Sprintf("app/%d.txt", i), body: "x\n"})
					if err := os.WriteFile(file, makeTar(b, entries), 0o644); err != nil {
						b.Fatal(err)
					}
					p, err := s.Prepare(context.Background(), file)
					if err != nil {
						b.Fatal(err)
					}
					_, release, err := s.Acquire(context.Background(), p)
					if err != nil {
						b.Fatal(err)
					}
					release()
					img = p
				}
				if budget {
					s.MaxBytes = 1 << 40 // on, with room for all
				}
				b.ResetTimer()
				for range b.N {
					got, release, err := s.Acquire(context.Background(), img)
					if err != nil || got.Made {
						b.Fatalf("acquire: %v (made %v)", err, got != nil && got.Made)
					}
					release()
				}
			})
		}
	}
}
