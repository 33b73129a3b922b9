package image

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"harness/image/pull"
	"harness/testkit/registrytest"
)

func pullStore(t *testing.T, reg *registrytest.Registry) *Store {
	return &Store{Dir: t.TempDir(), Podman: "/nonexistent/podman", Registry: &pull.Client{Transport: reg.Transport, Keychain: authn.NewMultiKeychain()}}
}

func pushed(t *testing.T, reg *registrytest.Registry, tag string, kb int) (string, string) {
	data := strings.Repeat(fmt.Sprintf("%s %d\n", tag, time.Now().UnixNano()), kb*1024/20)
	img := registrytest.Synthetic(t, v1.Config{WorkingDir: "/app", Env: []string{"TAG=" + tag}},
		map[string]string{"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "/app/" + tag + ".txt": data})
	return reg.Push(t, "img/"+tag+":v1", img)
}

func TestResolvePullsAnImageTheStoreLacks(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ref, digest := pushed(t, reg, "one", 4)
	s := pullStore(t, reg)
	img, err := s.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.Source != SourcePulled || img.Digest != digest || img.Kind != "pull" {
		t.Fatalf("image %+v, want pulled with digest %s", img, digest)
	}
	if img.Workdir() != "/app" || !img.Exists("/app/one.txt") {
		t.Fatalf("unpacked image lacks its files or WORKDIR: %+v", img)
	}
	// Pulls off: the store's copy serves.
	s.Policy = PullNever
	again, err := s.Resolve(context.Background(), ref)
	if err != nil || again.Digest != digest {
		t.Fatalf("with pulls off, the stored image: %v %+v", err, again)
	}
	// An image never pulled, with pulls off: refused, said why.
	s2 := &Store{Dir: t.TempDir(), Podman: "/nonexistent/podman", Registry: s.Registry, Policy: PullNever}
	if _, err := s2.Resolve(context.Background(), ref); err == nil {
		t.Fatal("pulls off and an empty store: resolved")
	}
}

func TestPolicyAlwaysFollowsAMovedTag(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ref, first := pushed(t, reg, "moving", 2)
	s := pullStore(t, reg)
	if img, err := s.Resolve(context.Background(), ref); err != nil || img.Digest != first {
		t.Fatalf("first: %v", err)
	}
	_, second := pushed(t, reg, "moving", 2)
	if img, err := s.Resolve(context.Background(), ref); err != nil || img.Digest != first {
		t.Fatalf("pull-if-missing after the tag moved: %v, digest %s, want the stored %s", err, img.Digest, first)
	}
	s.Policy = PullAlways
	if img, err := s.Resolve(context.Background(), ref); err != nil || img.Digest != second {
		t.Fatalf("always after the tag moved: %v, want %s", err, second)
	}
}

func TestBudgetRemovesLeastRecentlyUsedNotInUse(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	var refs []string
	for _, n := range []string{"a", "b", "c", "d"} {
		ref, _ := pushed(t, reg, n, 256)
		refs = append(refs, ref)
	}
	s := pullStore(t, reg)
	// Measure one image, then allow two and a half.
	if _, err := s.Resolve(context.Background(), refs[0]); err != nil {
		t.Fatal(err)
	}
	es, _ := s.Entries()
	one := es[0].Size
	s.MaxBytes = one*5/2 + 1
	held, err := s.Resolve(context.Background(), refs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs[1:] {
		// Another store (another run) resolves and lets go of each.
		other := &Store{Dir: s.Dir, Podman: s.Podman, Registry: s.Registry, MaxBytes: s.MaxBytes}
		if _, err := other.Resolve(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		other.Release()
		es, _ := s.Entries()
		var total int64
		for _, e := range es {
			total += e.Size
		}
		if total > s.MaxBytes {
			t.Fatalf("after %s the cache holds %d bytes, over its budget of %d", ref, total, s.MaxBytes)
		}
	}
	// The image this store holds was never removed, though least used.
	if _, err := os.Stat(held.Rootfs); err != nil {
		t.Fatalf("an image in use was removed: %v", err)
	}
	es, _ = s.Entries()
	if len(es) != 2 {
		t.Fatalf("entries %+v, want the held one and the last", es)
	}
}

func TestPruneFreesWhatItSays(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	refA, _ := pushed(t, reg, "pa", 64)
	refB, _ := pushed(t, reg, "pb", 64)
	s := pullStore(t, reg)
	for _, r := range []string{refA, refB} {
		if _, err := s.Resolve(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	s.Release()
	before := treeSize(s.Dir)
	dry, err := s.Prune(PruneOptions{All: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if treeSize(s.Dir) != before || len(dry.Entries) != 2 || len(dry.Refs) != 2 {
		t.Fatalf("dry run: %+v, size %d -> %d", dry, before, treeSize(s.Dir))
	}
	// Nothing is older than an hour.
	if p, _ := s.Prune(PruneOptions{OlderThan: time.Hour}); len(p.Entries)+len(p.Refs)+p.Blobs != 0 {
		t.Fatalf("--older-than 1h removed %+v", p)
	}
	p, err := s.Prune(PruneOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	after := treeSize(s.Dir)
	freed := before - after
	// What it says it freed is what went, give or take the directories.
	if p.Bytes != dry.Bytes || freed < p.Bytes || freed > p.Bytes+256*1024 {
		t.Fatalf("prune says %d bytes freed, %d went (dry run said %d)", p.Bytes, freed, dry.Bytes)
	}
	if es, _ := s.Entries(); len(es) != 0 {
		t.Fatalf("entries left: %+v", es)
	}
	if s.Pulls().Lookup(refA) != nil {
		t.Fatal("a pruned reference is still stored")
	}
	blobs, _ := s.Pulls().Blobs()
	if len(blobs) != 0 {
		t.Fatalf("blobs left: %v", blobs)
	}
}

// A run that has prepared a pulled image holds its blobs: a prune, even
// --all, leaves them, so the run's trials can still unpack it.
func TestPruneLeavesThePulledImagesARunNeeds(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ref, digest := pushed(t, reg, "needed", 64)
	run := pullStore(t, reg)
	img, err := run.Prepare(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !img.Packed() || img.Digest != digest {
		t.Fatalf("prepared %+v, want it packed, digest %s", img, digest)
	}
	other := &Store{Dir: run.Dir}
	p, err := other.Prune(PruneOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Refs) != 0 || p.Blobs != 0 {
		t.Fatalf("prune --all removed %+v from under a run", p)
	}
	got, release, err := run.Acquire(context.Background(), img)
	if err != nil {
		t.Fatalf("the run's trial after the prune: %v", err)
	}
	if !got.Exists("/app/needed.txt") {
		t.Fatalf("unpacked image lacks its files: %+v", got)
	}
	release()
	// Once the run lets go, it goes.
	run.Release()
	if p, err := other.Prune(PruneOptions{All: true}); err != nil || len(p.Refs) != 1 || len(p.Entries) != 1 {
		t.Fatalf("prune --all after the run: %+v, %v; want the reference and its unpacked image", p, err)
	}
}
