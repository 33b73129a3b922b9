package taskset

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"harness/harbor"
	"harness/image"
	"harness/image/pull"
	"harness/schemas"
	"harness/testkit/registrytest"
)

// Tasks naming registry images (and no Dockerfile) get them pulled before
// anything is resolved, each image once; the record's digest is the
// registry's.
func TestResolveImagesPullsFromRegistries(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	img := registrytest.Synthetic(t, v1.Config{WorkingDir: "/app"}, map[string]string{"/etc/passwd": "root:x:0:0::/root:/bin/sh\n", "/app/in.txt": "x\n"})
	ref, digest := reg.Push(t, "tasks/shared:v1", img)
	set := &Set{Dir: t.TempDir(), Tasks: []*harbor.Task{task("one", ref, ""), task("two", ref, "")}}
	store := &image.Store{Dir: t.TempDir(), Podman: "/nonexistent/podman", Registry: &pull.Client{Transport: reg.Transport, Keychain: authn.NewMultiKeychain()}}
	var fetched []Fetched
	imgs, err := set.ResolveImages(context.Background(), store, ResolveOptions{OnFetch: func(f Fetched) { fetched = append(fetched, f) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(fetched) != 1 || !fetched[0].Pulled || strings.Join(fetched[0].Tasks, ",") != "one,two" || fetched[0].Layers != 1 {
		t.Fatalf("fetched %+v, want the one image pulled once for both tasks", fetched)
	}
	for _, n := range []string{"one", "two"} {
		if got := imgs[n]; got == nil || got.Digest != digest || got.Source != image.SourcePulled {
			t.Fatalf("task %s: image %+v, want pulled %s", n, got, digest)
		}
	}
	// The cache says which task sets ran in the image, each once.
	other := &Set{Dir: t.TempDir(), Tasks: []*harbor.Task{task("three", ref, "")}}
	if _, err := other.ResolveImages(context.Background(), store, ResolveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := set.ResolveImages(context.Background(), store, ResolveOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{set.Dir, other.Dir}
	sort.Strings(want)
	// Noted before any trial unpacked it, for the pulled image.
	if got := store.Users(image.PulledKey(digest)); !reflect.DeepEqual(got, want) {
		t.Fatalf("the pulled image is used by %v, want %v", got, want)
	}
	// Nothing is unpacked until a trial acquires it; then its entry says
	// the same.
	if entries, err := store.Entries(); err != nil || len(entries) != 0 {
		t.Fatalf("entries before any trial: %+v, %v; want none", entries, err)
	}
	got, release, err := store.Acquire(context.Background(), imgs["one"])
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if !got.Exists("/app/in.txt") {
		t.Fatalf("acquired image %+v lacks its files", got)
	}
	entries, err := store.Entries()
	if err != nil || len(entries) != 1 || !reflect.DeepEqual(entries[0].UsedBy, want) {
		t.Fatalf("entries %+v, %v; want one used by %v", entries, err, want)
	}
}

// A missing tag fails the run before anything is resolved, naming every
// task it leaves without an image and the reference.
func TestMissingImageFailsNamingTaskAndReference(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	img := registrytest.Synthetic(t, v1.Config{}, map[string]string{"/etc/passwd": "root:x:0:0::/root:/bin/sh\n"})
	good, _ := reg.Push(t, "tasks/good:v1", img)
	missing := reg.Host + "/tasks/gone:v1"
	set := &Set{Tasks: []*harbor.Task{task("fine", good, ""), task("lost", missing, "")}}
	store := &image.Store{Dir: t.TempDir(), Podman: "/nonexistent/podman", Registry: &pull.Client{Transport: reg.Transport, Keychain: authn.NewMultiKeychain()}}
	var resolved []ImageChoice
	_, err := set.ResolveImages(context.Background(), store, ResolveOptions{OnImage: func(c ImageChoice) { resolved = append(resolved, c) }})
	if err == nil || !strings.Contains(err.Error(), "task lost: image "+missing+": not found in registry "+reg.Host) {
		t.Fatalf("error %v, want one naming task lost and %s", err, missing)
	}
	if len(resolved) != 0 {
		t.Fatalf("images were resolved before the failure was known: %+v", resolved)
	}
}

// With Missing set (a shard reading the store it was given), a task whose
// image the store lacks is told there and left out, and the others are
// resolved; its cases find an error, not a nil image.
func TestMissingImagesToldAndLeftOut(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	img := registrytest.Synthetic(t, v1.Config{}, map[string]string{"/etc/passwd": "root:x:0:0::/root:/bin/sh\n"})
	good, _ := reg.Push(t, "tasks/good:v1", img)
	other, _ := reg.Push(t, "tasks/other:v1", img)
	set := &Set{Tasks: []*harbor.Task{task("fine", good, ""), task("lost", other, "")}}
	dir := t.TempDir()
	client := &pull.Client{Transport: reg.Transport, Keychain: authn.NewMultiKeychain()}
	// The store has the first image only, and pulls nothing more.
	if _, err := (&image.Store{Dir: dir, Podman: "/nonexistent/podman", Registry: client}).Fetch(context.Background(), good, nil); err != nil {
		t.Fatal(err)
	}
	store := &image.Store{Dir: dir, Podman: "/nonexistent/podman", Registry: client, Policy: image.PullNever, CacheFirst: true}
	missing := map[string]error{}
	imgs, err := set.ResolveImages(context.Background(), store, ResolveOptions{Missing: func(task string, err error) { missing[task] = err }})
	if err != nil {
		t.Fatal(err)
	}
	if imgs["fine"] == nil || imgs["lost"] != nil {
		t.Fatalf("images %v, want fine's alone", imgs)
	}
	if len(missing) != 1 || missing["lost"] == nil || !strings.Contains(missing["lost"].Error(), "task lost: image "+other) {
		t.Fatalf("missing %v, want task lost naming %s", missing, other)
	}
	if store.Pulls().Lookup(other) != nil {
		t.Fatal("the missing image was pulled")
	}
	find := set.ImageFor(imgs)
	if _, _, err := find(&schemas.PromptCase{ID: "lost"}); err == nil {
		t.Fatal("the case of a task without its image found no error")
	}
	if got, _, err := find(&schemas.PromptCase{ID: "fine"}); err != nil || got == nil {
		t.Fatalf("case fine: %v, %v", got, err)
	}
}
