package taskset

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"harness/harbor"
	"harness/image"
	"harness/schemas"
)

// rootfs makes a directory that is a root filesystem as image.Store sees
// one.
func rootfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func task(name, prebuilt, build string) *harbor.Task {
	return &harbor.Task{Name: name, Prebuilt: prebuilt, Build: build, Config: harbor.Config{BuildTimeout: time.Minute}}
}

// Each task gets its prebuilt image unless a build is forced; one that
// cannot be had falls back to the build, and the caller is told of each.
func TestResolveImages(t *testing.T) {
	pre, build, empty := rootfs(t), rootfs(t), t.TempDir()
	set := &Set{Tasks: []*harbor.Task{
		task("prebuilt", pre, ""),
		task("fallback", empty, build),
		task("built", "", build),
	}}
	store := &image.Store{Dir: t.TempDir()}
	var told []ImageChoice
	imgs, err := set.ResolveImages(context.Background(), store, ResolveOptions{OnImage: func(c ImageChoice) { told = append(told, c) }})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"prebuilt": pre, "fallback": build, "built": build} {
		if img := imgs[name]; img == nil || img.Rootfs != want {
			t.Errorf("%s: image %+v, want %s", name, img, want)
		}
	}
	if len(told) != 4 {
		t.Fatalf("told %+v", told)
	}
	if c := told[2]; c.Task != "fallback" || c.Ref != build || c.Failed == nil || !strings.Contains(c.Failed.Error(), "image "+empty+": a directory that is neither") {
		t.Errorf("the fallback: %+v", c)
	}
	told[2].Failed = nil
	want := []ImageChoice{{Task: "prebuilt", Ref: pre}, {Task: "fallback", Ref: empty}, {Task: "fallback", Ref: build}, {Task: "built", Ref: build}}
	if !reflect.DeepEqual(told, want) {
		t.Errorf("told %+v, want %+v", told, want)
	}

	// Forced builds: the task without an environment keeps its image.
	told = nil
	if _, err := set.ResolveImages(context.Background(), store, ResolveOptions{ForceBuild: true, OnImage: func(c ImageChoice) { told = append(told, c) }}); err != nil {
		t.Fatal(err)
	}
	want = []ImageChoice{{Task: "prebuilt", Ref: pre, Unbuildable: true}, {Task: "fallback", Ref: build}, {Task: "built", Ref: build}}
	if !reflect.DeepEqual(told, want) {
		t.Errorf("forced: told %+v, want %+v", told, want)
	}
}

// A task whose image cannot be made is an error naming it, and the tasks
// after it are not resolved.
func TestResolveImagesFails(t *testing.T) {
	empty := t.TempDir()
	set := &Set{Tasks: []*harbor.Task{task("broken", empty, ""), task("next", rootfs(t), "")}}
	n := 0
	_, err := set.ResolveImages(context.Background(), &image.Store{Dir: t.TempDir()}, ResolveOptions{OnImage: func(ImageChoice) { n++ }})
	if err == nil || !strings.HasPrefix(err.Error(), "task broken: image "+empty+": ") || n != 1 {
		t.Errorf("error %v after %d images", err, n)
	}
}

// A case finds its task and the task's image by the task's name.
func TestImageFor(t *testing.T) {
	a, b := task("a", "x", ""), task("b", "y", "")
	set := &Set{Tasks: []*harbor.Task{a, b}}
	imgs := map[string]*image.Image{"a": {Ref: "x"}, "b": {Ref: "y"}}
	for_ := set.ImageFor(imgs)
	img, got, err := for_(&schemas.PromptCase{ID: "b"})
	if err != nil || got != b || img != imgs["b"] {
		t.Errorf("case b: %v %v %v", img, got, err)
	}
	if _, _, err := for_(&schemas.PromptCase{ID: "c"}); err == nil || err.Error() != "case c: no such task" {
		t.Errorf("case c: %v", err)
	}
}
