package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"harness/harbor"
	"harness/image"
	"harness/results"
	"harness/schemas"
)

// taskFlags are the flags of the commands that run Harbor task
// directories in images.
type taskFlags struct {
	cacheDir   string
	keep       bool
	forceBuild bool
}

func (f *taskFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.cacheDir, "cache-dir", "", "where task images are unpacked, once each (default $XDG_CACHE_HOME/harness/images)")
	fs.BoolVar(&f.keep, "keep-layers", false, "leave each trial's image layer (its changes) on disk")
	fs.BoolVar(&f.forceBuild, "force-build", false, "build each task's environment/Dockerfile even when its task.toml names a prebuilt docker_image")
}

// store opens the image cache.
func (f *taskFlags) store(log io.Writer) (*image.Store, error) {
	dir := f.cacheDir
	if dir == "" {
		d, err := image.DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	return &image.Store{Dir: dir, Log: log}, nil
}

// isTaskDir says whether path is a Harbor task directory or a dataset of
// them (a directory holding task directories).
func isTaskDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir() && harbor.IsDataset(path)
}

// notTaskDir is the error for a directory given where a task directory,
// a dataset or a file is expected: it says what the directory lacks. nil
// when path is not a directory or is a task directory or dataset.
func notTaskDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() || harbor.IsDataset(path) {
		return nil
	}
	return inputError(harbor.NotATaskError(path))
}

// loadTasks reads a task or dataset directory and says, once for the
// run, which task.toml fields its tasks set that are not honoured.
func loadTasks(e *env, dir string, quiet bool) ([]*harbor.Task, error) {
	tasks, err := harbor.LoadDataset(dir)
	if err != nil {
		return nil, inputError(err)
	}
	if s := harbor.UnhonouredSummary(tasks); s != "" && !quiet {
		e.sayOnce("warning: task.toml fields not honoured (docs/tasks.md says why): " + s + "\n")
	}
	return tasks, nil
}

// sayOnce writes note to stderr unless this invocation wrote it already.
func (e *env) sayOnce(note string) {
	if e.said[note] {
		return
	}
	if e.said == nil {
		e.said = map[string]bool{}
	}
	e.said[note] = true
	fmt.Fprint(e.stderr, note)
}

// resolveTaskImages builds or unpacks each task's image once, before any
// trial runs, as Harbor chooses it: the prebuilt image (docker_image)
// unless forceBuild, else the task's environment/ built; a prebuilt image
// that cannot be had is built instead when the task can be. A task whose
// image cannot be made is an input error.
func resolveTaskImages(ctx context.Context, e *env, store *image.Store, tasks []*harbor.Task, forceBuild, quiet bool) (map[string]*image.Image, error) {
	imgs := map[string]*image.Image{}
	say := func(format string, args ...any) {
		if !quiet {
			fmt.Fprintf(e.stderr, format, args...)
		}
	}
	for _, t := range tasks {
		ref, fallback := t.ImageChoice(forceBuild)
		if forceBuild && t.Build == "" {
			say("image for %s: %s (--force-build: the task has no environment/Dockerfile to build)\n", t.Name, ref)
		} else {
			say("image for %s: %s\n", t.Name, ref)
		}
		img, err := resolveTaskImage(ctx, store, t, ref)
		if err != nil && fallback != "" && ctx.Err() == nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			say("image for %s: %s; building %s instead\n", t.Name, msg, fallback)
			img, err = resolveTaskImage(ctx, store, t, fallback)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, withCode(exitInterrupted, ctx.Err())
			}
			return nil, inputError(fmt.Errorf("task %s: %w", t.Name, err))
		}
		imgs[t.Name] = img
	}
	return imgs, nil
}

// resolveTaskImage resolves one image of a task within its build timeout.
func resolveTaskImage(ctx context.Context, store *image.Store, t *harbor.Task, ref string) (*image.Image, error) {
	bctx, cancel := context.WithTimeout(ctx, t.Config.BuildTimeout)
	defer cancel()
	return store.Resolve(bctx, ref)
}

// validateTaskRefs runs each task of a Harbor task directory or dataset
// with the oracle (solution/solve.sh: it must score 1) and with an agent
// that does nothing (it must score 0), as Harbor's CI does, and writes
// one validation result per run.
func validateTaskRefs(ctx context.Context, e *env, dir string, tf taskFlags, output string, force, quiet bool) error {
	tasks, err := loadTasks(e, dir, quiet)
	if err != nil {
		return err
	}
	store, err := tf.store(nil)
	if err != nil {
		return err
	}
	imgs, err := resolveTaskImages(ctx, e, store, tasks, tf.forceBuild, quiet)
	if err != nil {
		return err
	}
	out, err := reviewOutput(e, output, force)
	if err != nil {
		return err
	}
	w, err := results.NewWriter(output, out)
	if err != nil {
		out.Abort()
		return err
	}
	if !quiet {
		fmt.Fprintf(e.stderr, "Validating %d tasks with the oracle and a no-op agent...\n", len(tasks))
	}
	var misjudged, graderErrors []string
	checked := 0
	for _, t := range tasks {
		for _, agent := range []string{harbor.Oracle, harbor.Nop} {
			if ctx.Err() != nil {
				break
			}
			res, err := harbor.RunReference(ctx, t, imgs[t.Name], agent, harbor.TrialOptions{Keep: tf.keep})
			if err != nil {
				w.Close()
				out.Abort()
				return fmt.Errorf("task %s, %s: %w", t.Name, agent, err)
			}
			checked++
			v := schemas.ValidationResult{ID: t.Name, Passes: res.Verdict.Pass, GraderResult: res.Verdict, Correct: res.OK}
			if agent == harbor.Oracle {
				v.Kind, v.Want, v.Reference = schemas.RefPositive, "pass", "solution/solve.sh"
			} else {
				v.Kind, v.Want = schemas.RefNegative, "fail"
			}
			label := t.Name + " (" + agent + ")"
			note := fmt.Sprintf(": score %g, want %g", res.Verdict.Score, res.Want)
			if res.Verdict.Error != nil {
				msg, _, _ := strings.Cut(res.Verdict.Error.Message, "\n")
				note = fmt.Sprintf(": grader error (%s): %s", res.Verdict.Error.Class, msg)
				graderErrors = append(graderErrors, label)
			} else if !res.OK {
				misjudged = append(misjudged, label)
			}
			if res.Layer != "" {
				note += "; layer kept in " + res.Layer
			}
			if !quiet {
				mark := "✓"
				if !res.OK {
					mark = "✗"
				}
				fmt.Fprintf(e.stderr, "  %s %s%s\n", mark, label, note)
			}
			if err := w.Write(v); err != nil {
				w.Close()
				out.Abort()
				return err
			}
		}
	}
	if err := w.Close(); err != nil {
		out.Abort()
		return err
	}
	if err := out.Commit(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return withCode(exitInterrupted, fmt.Errorf("interrupted after %d of %d runs", checked, 2*len(tasks)))
	}
	if !quiet {
		fmt.Fprintf(e.stderr, "\nResults: %d correct, %d misjudged, %d grader errors\n", checked-len(misjudged)-len(graderErrors), len(misjudged), len(graderErrors))
	}
	if len(misjudged) > 0 {
		return withCode(exitGateFailed, fmt.Errorf("%d of %d reference runs scored wrong: %s", len(misjudged), checked, strings.Join(misjudged, ", ")))
	}
	if len(graderErrors) > 0 {
		return withCode(exitInfraErrors, fmt.Errorf("the verifier failed on %d of %d reference runs: %s", len(graderErrors), checked, strings.Join(graderErrors, ", ")))
	}
	return nil
}
