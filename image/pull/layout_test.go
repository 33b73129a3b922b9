package pull

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"harness/testkit/registrytest"
)

// A saved store loads into an empty one, as a directory and as a tar
// archive: the same references, the same digests, every blob whole.
func TestSaveLoadMovesImagesByReference(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ref1, d1 := reg.Push(t, "tasks/one:v1", synthetic(t, "one"))
	ref2, d2 := reg.Push(t, "tasks/two:v2", synthetic(t, "two"))
	c := newClient(t, reg)
	for _, r := range []string{ref1, ref2} {
		if _, err := c.Pull(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{filepath.Join(t.TempDir(), "saved"), filepath.Join(t.TempDir(), "saved.tar")} {
		saved, err := c.Store.Save(target, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Two images of four blobs each (manifest, config, two layers),
		// none shared: both layers hold the image's tag.
		if len(saved.Records) != 2 || saved.Blobs != 8 {
			t.Fatalf("%s: saved %d images, %d blobs; want 2 and 8", target, len(saved.Records), saved.Blobs)
		}
		if !IsTar(target) {
			// Any OCI tool reads it: go-containerregistry's layout.
			idx, err := layout.ImageIndexFromPath(target)
			if err != nil {
				t.Fatal(err)
			}
			m, err := idx.IndexManifest()
			if err != nil || len(m.Manifests) != 2 || m.Manifests[0].Annotations[annotationName] != ref1 || m.Manifests[0].Annotations[annotationTag] != "v1" {
				t.Fatalf("index %+v, %v", m, err)
			}
		}
		empty := &Store{Dir: t.TempDir()}
		loaded, err := empty.Load(target)
		if err != nil {
			t.Fatal(err)
		}
		if len(loaded.Records) != 2 || loaded.Blobs != 8 {
			t.Fatalf("%s: loaded %d images, %d blobs; want 2 and 8", target, len(loaded.Records), loaded.Blobs)
		}
		for r, d := range map[string]string{ref1: d1, ref2: d2} {
			if got := empty.Lookup(r); got == nil || got.Digest != d || got.Layers != 2 || got.Platform != "linux/amd64" {
				t.Fatalf("%s: after load, %s is %+v, want %s", target, r, got, d)
			}
		}
		// Loading again adds no blob.
		if again, err := empty.Load(target); err != nil || again.Blobs != 0 {
			t.Fatalf("%s: loaded again: %d blobs, %v", target, again.Blobs, err)
		}
	}
	// One image by name.
	one, err := c.Store.Save(filepath.Join(t.TempDir(), "one"), []string{ref2})
	if err != nil || len(one.Records) != 1 || one.Records[0].Digest != d2 || one.Blobs != 4 {
		t.Fatalf("save %s alone: %+v, %v", ref2, one, err)
	}
	if _, err := c.Store.Save(filepath.Join(t.TempDir(), "x"), []string{reg.Host + "/tasks/none:v1"}); err == nil || !strings.Contains(err.Error(), "tasks/none:v1: not in the store") {
		t.Fatalf("saving an image the store lacks: %v", err)
	}
}

// A layout whose blob was altered, or whose entry has no reference, is
// refused, naming what is wrong, and nothing is recorded.
func TestLoadRefusesBadLayouts(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ref, digest := reg.Push(t, "tasks/one:v1", synthetic(t, "one"))
	c := newClient(t, reg)
	if _, err := c.Pull(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "saved")
	if _, err := c.Store.Save(dir, nil); err != nil {
		t.Fatal(err)
	}
	m, _ := c.Store.Manifest(digest)
	layer := filepath.Join(dir, "blobs", "sha256", m.Layers[1].Digest.Hex)
	os.Remove(layer) // a hard link to the store's blob: never write through it
	if err := os.WriteFile(layer, []byte("not the layer"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Store{Dir: t.TempDir()}
	if _, err := s.Load(dir); err == nil || !strings.Contains(err.Error(), "content has digest") {
		t.Fatalf("an altered layer: %v", err)
	}
	if recs, _ := s.Records(); len(recs) != 0 {
		t.Fatalf("recorded %+v from a bad layout", recs)
	}

	dir2 := filepath.Join(t.TempDir(), "saved")
	if _, err := c.Store.Save(dir2, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir2, "index.json"))
	var idx map[string]any
	json.Unmarshal(b, &idx)
	delete(idx["manifests"].([]any)[0].(map[string]any), "annotations")
	b, _ = json.Marshal(idx)
	os.WriteFile(filepath.Join(dir2, "index.json"), b, 0o644)
	if _, err := s.Load(dir2); err == nil || !strings.Contains(err.Error(), "manifests[0] ("+digest+"): no full image reference") {
		t.Fatalf("an entry without a reference: %v", err)
	}
}
