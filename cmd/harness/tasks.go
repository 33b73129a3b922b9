package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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

// warnOverlay says once, before any trial starts, when the commands of
// image runs get fuse-overlayfs because the kernel refuses its overlayfs
// here, and why: a layer over img is mounted as theirs will be.
func warnOverlay(ctx context.Context, e *env, img *image.Image, quiet bool) {
	if quiet || img == nil {
		return
	}
	var refused *image.OverlayRefused
	switch err := image.CheckOverlay(ctx, img, "", nil); {
	case errors.As(err, &refused):
		fmt.Fprintf(e.stderr, "warning: commands in images run on fuse-overlayfs, which is slower: %v\n", err)
	case err != nil && ctx.Err() == nil:
		fmt.Fprintf(e.stderr, "warning: %v\n", err)
	}
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
	if len(tasks) > 0 {
		warnOverlay(ctx, e, imgs[tasks[0].Name], quiet)
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
			var stopped string
			switch {
			case err != nil && ctx.Err() == nil:
				w.Close()
				out.Abort()
				return fmt.Errorf("task %s, %s: %w", t.Name, agent, err)
			case err != nil:
				res, stopped = &harbor.ReferenceResult{Task: t.Name, Agent: agent}, "the run was stopped"
			default:
				stopped = refStopped(ctx, res.Verdict.Error, refStopWait)
			}
			if stopped != "" {
				// Not a verdict: the run was stopped under the verifier.
				res.Verdict = schemas.GraderResult{Grader: harbor.GraderName, Error: &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted: " + stopped}}
				res.OK = false
			} else {
				checked++
			}
			v := schemas.ValidationResult{ID: t.Name, Passes: res.Verdict.Pass, GraderResult: res.Verdict, Correct: res.OK}
			if agent == harbor.Oracle {
				v.Kind, v.Want, v.Reference = schemas.RefPositive, "pass", "solution/solve.sh"
				if r := res.Solve; r != nil {
					v.Solve = &schemas.SolveRun{ExitCode: r.ExitCode, TimedOut: r.TimedOut, DurationMs: r.Duration.Milliseconds(), Output: r.Output}
				}
			} else {
				v.Kind, v.Want = schemas.RefNegative, "fail"
			}
			label := t.Name + " (" + agent + ")"
			note := fmt.Sprintf(": score %g, want %g", res.Verdict.Score, res.Want)
			if stopped != "" {
				note = ": " + res.Verdict.Error.Message
			} else if res.Verdict.Error != nil {
				msg, _, _ := strings.Cut(res.Verdict.Error.Message, "\n")
				note = fmt.Sprintf(": grader error (%s): %s", res.Verdict.Error.Class, msg)
				graderErrors = append(graderErrors, label)
			} else if !res.OK {
				misjudged = append(misjudged, label)
			}
			var solveTail string
			if r := res.Solve; r != nil && !res.OK && (r.TimedOut || r.ExitCode != 0) {
				// Why the oracle failed: solve.sh did.
				if r.TimedOut {
					note += fmt.Sprintf("; solve.sh did not finish within %s", t.Config.AgentTimeout)
				} else {
					note += fmt.Sprintf("; solve.sh exited %d after %s", r.ExitCode, r.Duration.Round(time.Millisecond))
				}
				solveTail = indentTail(r.Output, 10, "      ")
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
				if solveTail != "" {
					fmt.Fprintf(e.stderr, "    solve.sh's output ends:\n%s", solveTail)
				}
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

// refStopWait is how long a reference run whose verifier died of a stop
// signal waits for the stop that such a signal announces (as capture's
// StopWait).
const refStopWait = 2 * time.Second

// refStopped applies capture's stop rule to a reference run: a verifier
// error once harness is stopping (its context cancelled by SIGTERM or
// SIGINT), or a verifier that died of SIGTERM, SIGINT or SIGHUP followed
// by harness's own stop within wait, is no verdict. It says why, or ""
// when the error is the verifier's own.
func refStopped(ctx context.Context, verr *schemas.ErrorInfo, wait time.Duration) string {
	if verr == nil {
		return ""
	}
	sig, died := verr.DiedOfStop()
	if died && ctx.Err() == nil {
		// The signal may be the stop itself, reaching the verifier first.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() == nil {
		return ""
	}
	if died {
		return fmt.Sprintf("the verifier died of %s as the run was stopped", sig)
	}
	line, _, _ := strings.Cut(verr.Message, "\n")
	return "the run was stopping when the verifier failed (" + line + ")"
}

// indentTail is the last n lines of s, each indented, or "" when s is
// blank.
func indentTail(s string, n int, indent string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && strings.TrimSpace(lines[0]) == "" {
		return ""
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(indent + l + "\n")
	}
	return b.String()
}
