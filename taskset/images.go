package taskset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"harness/harbor"
	"harness/image"
	"harness/image/pull"
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
	// Concurrency bounds the images fetched from registries at once
	// (0 = 4).
	Concurrency int
	// OnFetch, when set, is told of each image fetched (or found
	// stored) before any is resolved; OnLayer of each layer fetched.
	OnFetch func(Fetched)
	OnLayer func(pull.Progress)
	// Missing, when set, is told of each task whose image cannot be had,
	// which ResolveImages then leaves out of its images instead of
	// failing: its trials fail on their own (a shard that finds the
	// store it was given lacking).
	Missing func(task string, err error)
}

// Fetched is one image a run made sure of before any agent started.
type Fetched struct {
	// Ref is the image, Tasks the tasks that use it.
	Ref   string
	Tasks []string
	// Pulled says it was pulled now (else it was stored or local).
	Pulled bool
	// Layers, Fetched and Total are its layers, the bytes fetched and
	// the bytes of its layers.
	Layers         int
	Fetched, Total int64
	// Err is why it could not be had.
	Err error
}

// Fetch makes sure of every task's prebuilt image before anything is
// built or run: each reference the store lacks is pulled, up to
// o.Concurrency at once. It returns the failures by reference.
func (s *Set) Fetch(ctx context.Context, store *image.Store, o ResolveOptions) map[string]error {
	var refs []string
	tasks := map[string][]string{}
	for _, t := range s.Tasks {
		ref, _ := t.ImageChoice(o.ForceBuild)
		if ref == "" || image.Kind(ref) != "local" {
			continue
		}
		if tasks[ref] == nil {
			refs = append(refs, ref)
		}
		tasks[ref] = append(tasks[ref], t.Name)
	}
	failed := map[string]error{}
	if len(refs) == 0 || store.Registry == nil {
		return failed
	}
	n := o.Concurrency
	if n <= 0 {
		n = 4
	}
	var mu sync.Mutex
	last := map[string]pull.Progress{}
	progress := func(p pull.Progress) {
		mu.Lock()
		last[p.Ref] = p
		mu.Unlock()
		if o.OnLayer != nil {
			o.OnLayer(p)
		}
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pulled, err := store.Fetch(ctx, ref, progress)
			mu.Lock()
			p := last[ref]
			if err != nil {
				failed[ref] = err
			}
			mu.Unlock()
			if o.OnFetch != nil {
				o.OnFetch(Fetched{Ref: ref, Tasks: tasks[ref], Pulled: pulled, Layers: p.Layers, Fetched: p.Fetched, Total: p.Total, Err: err})
			}
		}()
	}
	wg.Wait()
	return failed
}

// ResolveImages makes sure of each task's image once, as Harbor chooses
// it: the prebuilt image (docker_image) unless o.ForceBuild, else the
// task's environment built; a prebuilt image that cannot be had is built
// instead when the task can be. Each image is prepared within its task's
// build timeout (image.Store.Prepare): built, or pulled, but an image that
// can be unpacked again from what is stored is left packed, for each
// trial to unpack with Store.Acquire when it starts. The images are keyed by task name. The error names
// the task whose image could not be made; when ctx ends, ctx.Err() is set.
func (s *Set) ResolveImages(ctx context.Context, store *image.Store, o ResolveOptions) (map[string]*image.Image, error) {
	tell := func(c ImageChoice) {
		if o.OnImage != nil {
			o.OnImage(c)
		}
	}
	// Every image from a registry first: a missing one fails the run
	// before anything is built, naming every task it leaves without.
	failed := s.Fetch(ctx, store, o)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var errs []error
	for _, t := range s.Tasks {
		ref, fallback := t.ImageChoice(o.ForceBuild)
		if err := failed[ref]; err != nil && fallback == "" && o.Missing == nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.Name, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	imgs := map[string]*image.Image{}
	for _, t := range s.Tasks {
		ref, fallback := t.ImageChoice(o.ForceBuild)
		tell(ImageChoice{Task: t.Name, Ref: ref, Unbuildable: o.ForceBuild && t.Build == ""})
		var img *image.Image
		err := failed[ref]
		if err == nil {
			img, err = resolve(ctx, store, t, ref)
		}
		if err != nil && fallback != "" && ctx.Err() == nil {
			tell(ImageChoice{Task: t.Name, Ref: fallback, Failed: err})
			img, err = resolve(ctx, store, t, fallback)
		}
		if err != nil && o.Missing != nil && ctx.Err() == nil {
			o.Missing(t.Name, fmt.Errorf("task %s: %w", t.Name, err))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		if err := t.CheckUsers(img); err != nil {
			return nil, err
		}
		imgs[t.Name] = img
	}
	if dir, err := filepath.Abs(s.Dir); err == nil && s.Dir != "" {
		for _, img := range imgs {
			store.UsedBy(img, dir)
		}
	}
	return imgs, nil
}

// resolve resolves one image of a task within its build timeout.
func resolve(ctx context.Context, store *image.Store, t *harbor.Task, ref string) (*image.Image, error) {
	bctx, cancel := context.WithTimeout(ctx, t.Config.BuildTimeout)
	defer cancel()
	return store.Prepare(bctx, ref)
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
		img := imgs[c.ID]
		if img == nil {
			return nil, nil, fmt.Errorf("task %s: no image", c.ID)
		}
		return img, t, nil
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
