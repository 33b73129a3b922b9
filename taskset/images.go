package taskset

import (
	"context"
	"errors"
	"fmt"
	"io"

	"harness/harbor"
	"harness/image"
	"harness/schemas"
)

// ImageChoice is the image a task is about to be given.
type ImageChoice struct {
	// Task is the task's name.
	Task string
	// Ref is the image about to be resolved.
	Ref string
	// Unbuildable says a build was asked for but the task has no
	// environment to build: Ref is its prebuilt image.
	Unbuildable bool
	// Failed, when set, is why the image tried first could not be had:
	// Ref is then the build tried instead.
	Failed error
}

// ResolveOptions say how the tasks' images are chosen.
type ResolveOptions struct {
	// ForceBuild builds each task's environment even when task.toml
	// names a prebuilt image.
	ForceBuild bool
	// OnImage, when set, is told of each image before it is resolved.
	OnImage func(ImageChoice)
}

// ResolveImages builds or unpacks each task's image once, as Harbor
// chooses it: the prebuilt image (docker_image) unless o.ForceBuild, else
// the task's environment built; a prebuilt image that cannot be had is
// built instead when the task can be. Each image is resolved within its
// task's build timeout. The images are keyed by task name. The error names
// the task whose image could not be made; when ctx ends, ctx.Err() is set.
func (s *Set) ResolveImages(ctx context.Context, store *image.Store, o ResolveOptions) (map[string]*image.Image, error) {
	tell := func(c ImageChoice) {
		if o.OnImage != nil {
			o.OnImage(c)
		}
	}
	imgs := map[string]*image.Image{}
	for _, t := range s.Tasks {
		ref, fallback := t.ImageChoice(o.ForceBuild)
		tell(ImageChoice{Task: t.Name, Ref: ref, Unbuildable: o.ForceBuild && t.Build == ""})
		img, err := resolve(ctx, store, t, ref)
		if err != nil && fallback != "" && ctx.Err() == nil {
			tell(ImageChoice{Task: t.Name, Ref: fallback, Failed: err})
			img, err = resolve(ctx, store, t, fallback)
		}
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		imgs[t.Name] = img
	}
	return imgs, nil
}

// resolve resolves one image of a task within its build timeout.
func resolve(ctx context.Context, store *image.Store, t *harbor.Task, ref string) (*image.Image, error) {
	bctx, cancel := context.WithTimeout(ctx, t.Config.BuildTimeout)
	defer cancel()
	return store.Resolve(bctx, ref)
}

// ImageFor returns what capture.ImageConfig.For is: the image (from imgs,
// keyed by task name) and the task of a case named after one of the set's
// tasks.
func (s *Set) ImageFor(imgs map[string]*image.Image) func(*schemas.PromptCase) (*image.Image, *harbor.Task, error) {
	byName := make(map[string]*harbor.Task, len(s.Tasks))
	for _, t := range s.Tasks {
		byName[t.Name] = t
	}
	return func(c *schemas.PromptCase) (*image.Image, *harbor.Task, error) {
		t := byName[c.ID]
		if t == nil {
			return nil, nil, fmt.Errorf("case %s: no such task", c.ID)
		}
		return imgs[c.ID], t, nil
	}
}

// WarnOverlay writes to w, as warnings, when commands in images will run
// on fuse-overlayfs because the kernel refuses its overlayfs here, and why:
// a layer over img is mounted as a trial's will be. Nothing when w or img
// is nil.
func WarnOverlay(ctx context.Context, w io.Writer, img *image.Image) {
	if w == nil || img == nil {
		return
	}
	var refused *image.OverlayRefused
	switch err := image.CheckOverlay(ctx, img, "", nil); {
	case errors.As(err, &refused):
		fmt.Fprintf(w, "warning: commands in images run on fuse-overlayfs, which is slower: %v\n", err)
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(w, "warning: %v\n", err)
	}
}
