package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"harness/agentskills"
	"harness/capture"
	"harness/harbor"
	"harness/image"
	"harness/results"
	"harness/sandbox/limits"
	"harness/schemas"
	"harness/taskset"
)

// ImageFinder finds a case's image (and its Harbor task, if any).
type ImageFinder = func(*schemas.PromptCase) (*image.Image, *harbor.Task, error)

// ScaleError words taskset's error for a timeout scale that is not
// positive as the flag's.
func ScaleError(err error) error {
	if errors.Is(err, taskset.ErrTimeoutScale) {
		return Usagef("--task-timeout-scale must be positive")
	}
	return err
}

// TaskSkillsHome is where the agent reads its user-level skills, relative
// to its HOME, when some task of set has a skills_dir; when the agent's
// layout is not known, it says once that the skills are not copied.
func TaskSkillsHome(e *Env, set *taskset.Set, agent []string, quiet bool) string {
	var tasks []string
	for _, t := range set.Tasks {
		if t.Config.SkillsDir != "" {
			tasks = append(tasks, t.Name)
		}
	}
	if len(tasks) == 0 {
		return ""
	}
	if l, ok := agentskills.For(agent); ok {
		return l.Dir
	}
	if !quiet && len(agent) > 0 {
		which := fmt.Sprintf("%d tasks", len(tasks))
		if len(tasks) == 1 {
			which = "task " + tasks[0]
		}
		e.SayOnce(fmt.Sprintf("warning: the skills of %s (skills_dir) are not copied: where %s reads its skills is not known here (it is for Claude Code, Gemini CLI and Codex)\n", which, filepath.Base(agent[0])))
	}
	return ""
}

// LackingFor is find with the cases whose image lacking says is missing
// failing with that error.
func LackingFor(find ImageFinder, lacking func(*schemas.PromptCase) error) ImageFinder {
	return func(c *schemas.PromptCase) (*image.Image, *harbor.Task, error) {
		if err := lacking(c); err != nil {
			return nil, nil, err
		}
		return find(c)
	}
}

// CaseImages prepares the run's image def (--image) and the images cases
// name, each once (to unpack as their trials start), notes that user (the
// prompts file) runs in them, and returns what finds a case's: the one it
// names, else def. An image that cannot be had fails the run, or, when
// missing is set, is told to it and left out.
func CaseImages(ctx context.Context, store *image.Store, def string, refs []string, user string, missing func(ref string, err error)) (ImageFinder, error) {
	imgs := map[string]*image.Image{}
	for _, ref := range append([]string{def}, refs...) {
		if ref == "" {
			continue
		}
		bctx, cancel := context.WithTimeout(ctx, harbor.DefaultBuildTimeout)
		img, err := store.Prepare(bctx, ref)
		cancel()
		if err != nil && missing != nil && ctx.Err() == nil {
			missing(ref, err)
			continue
		}
		if err != nil {
			return nil, Input(err)
		}
		store.UsedBy(img, user)
		imgs[ref] = img
	}
	return func(c *schemas.PromptCase) (*image.Image, *harbor.Task, error) {
		ref := cmp.Or(c.Image, def)
		if ref == "" {
			return nil, nil, fmt.Errorf("case %s names no image, and there is no --image", c.ID)
		}
		if imgs[ref] == nil {
			return nil, nil, fmt.Errorf("case %s: image %s was not resolved", c.ID, ref)
		}
		return imgs[ref], nil, nil
	}, nil
}

// WarnImageCaps says once, before any agent starts, which of the run's caps
// cannot be enforced here as asked (as --sandbox bwrap does): a first group
// is made the way every agent's will be, and removed.
func WarnImageCaps(e *Env, ic *capture.ImageConfig, quiet bool) error {
	if ic.Caps == nil {
		return nil
	}
	g, warnings, err := limits.New(*ic.Caps, limits.Options{CgroupParent: ic.CgroupParent, DiskDirs: []string{os.TempDir()}})
	if err != nil {
		return Usagef("image caps: %v", err)
	}
	g.Close()
	if !quiet {
		for _, w := range warnings {
			fmt.Fprintf(e.Stderr, "warning: %s\n", w)
		}
	}
	return nil
}

// ErrorClasses are the error classes a record can have.
func ErrorClasses() []string {
	return []string{schemas.ErrAgentStart, schemas.ErrWorkspaceSetup, schemas.ErrAgentCrash, schemas.ErrTimeout,
		schemas.ErrProtocol, schemas.ErrAuthRequired, schemas.ErrAgentError, schemas.ErrGraderError, schemas.ErrGraderTimeout,
		schemas.ErrGraderInvalid, schemas.ErrResourceLimit, schemas.ErrReplayMiss, schemas.ErrProviderError, schemas.ErrUserError}
}

// CheckClasses refuses an error class, given to flag, that does not exist.
func CheckClasses(flag string, classes []string) error {
	known := ErrorClasses()
	for _, c := range classes {
		if !slices.Contains(known, strings.TrimSpace(c)) {
			return Usagef("%s %q: unknown error class (known: %s)", flag, c, strings.Join(known, ", "))
		}
	}
	return nil
}

// CheckOwnersOrClasses refuses a name, given to flag, that is neither an
// owner of failures (agent, infra, grader, config) nor an error class.
func CheckOwnersOrClasses(flag string, names []string) error {
	known := append(slices.Clone(schemas.Owners), ErrorClasses()...)
	for _, c := range names {
		if !slices.Contains(known, strings.TrimSpace(c)) {
			return Usagef("%s %q: neither an owner nor an error class (known: %s)", flag, c, strings.Join(known, ", "))
		}
	}
	return nil
}

// TaskSuite writes the suite that "harness run DIR" runs for a Harbor task
// directory or dataset: its cases are the tasks (their agent timeouts
// multiplied by scale), run with --tasks DIR. It goes into the image
// cache (cacheDir, "" = the default), under task-suites/, named by the
// directory, so --resume finds it.
func TaskSuite(dir string, scale float64, cacheDir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	set, err := taskset.Load(abs)
	if err != nil {
		return "", Input(err)
	}
	p, err := set.WriteSuite(cacheDir, scale)
	return p, ScaleError(err)
}

// WriteTaskCases writes the cases of the tasks of set, by name, to file.
func WriteTaskCases(set *taskset.Set, file string, scale float64) error {
	var b bytes.Buffer
	if err := set.WriteCases(&b, scale); err != nil {
		return ScaleError(err)
	}
	return results.ReplaceFile(file, 0o644, func(w io.Writer) error { _, err := w.Write(b.Bytes()); return err })
}

// TempTaskCases writes the cases of the tasks of set to a temporary file
// and returns its path.
func TempTaskCases(set *taskset.Set, scale float64) (string, error) {
	tmp, err := os.CreateTemp("", "harness-tasks-*.jsonl")
	if err != nil {
		return "", err
	}
	err = set.WriteCases(tmp, scale)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", ScaleError(err)
	}
	return tmp.Name(), nil
}
