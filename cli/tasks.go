package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/harbor"
	"harness/image"
	"harness/image/pull"
	"harness/internal/suggest"
	"harness/results"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
	"harness/taskset"
	"harness/termprogress"
)

// TaskFlags are the flags of the commands that run Harbor task
// directories in images.
type TaskFlags struct {
	CacheDir    string
	Keep        bool
	ForceBuild  bool
	ImagePolicy string
	CacheMax    string
}

// Add defines the flags on fs.
func (f *TaskFlags) Add(fs *pflag.FlagSet) {
	fs.StringVar(&f.CacheDir, "cache-dir", "", "where task images are unpacked, once each (default $XDG_CACHE_HOME/harness/images)")
	fs.BoolVar(&f.Keep, "keep-layers", false, "leave each trial's image layer (its changes) on disk")
	fs.BoolVar(&f.ForceBuild, "force-build", false, "build each task's environment/Dockerfile even when its task.toml names a prebuilt docker_image")
	fs.StringVar(&f.ImagePolicy, "image-policy", "pull-if-missing", "when to pull an image from its registry: pull-if-missing, always (resolve every tag again) or never")
	fs.StringVar(&f.CacheMax, "image-cache-max", "", "budget of the unpacked images in the cache (`size`: 20G, 500M); the least recently used that no run or trial holds are removed past it")
}

// Store opens the image cache.
func (f *TaskFlags) Store(log io.Writer) (*image.Store, error) {
	dir := f.CacheDir
	if dir == "" {
		d, err := image.DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	// The unpacked trees are mounted from other directories: their
	// paths must not depend on where a process runs.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	policy, err := image.ParsePolicy(f.ImagePolicy)
	if err != nil {
		return nil, Usagef("--image-policy: %v", err)
	}
	var max int64
	if f.CacheMax != "" {
		if max, err = limits.ParseSize(f.CacheMax); err != nil || max <= 0 {
			return nil, Usagef("--image-cache-max %q: want a size such as 20G or 500M", f.CacheMax)
		}
	}
	return &image.Store{Dir: dir, Log: log, Registry: &pull.Client{}, Policy: policy, MaxBytes: max}, nil
}

// IsTaskDir says whether path is a Harbor task directory or a dataset of
// them (a directory holding task directories).
func IsTaskDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir() && harbor.IsDataset(path)
}

// NotTaskDir is the error for a directory given where a task directory,
// a dataset or a file is expected: it says what the directory lacks. nil
// when path is not a directory or is a task directory or dataset.
func NotTaskDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() || harbor.IsDataset(path) {
		return nil
	}
	return Input(harbor.NotATaskError(path))
}

// Missing is the error for an input path that does not exist, naming it
// and what it may have been meant to be (a neighbour of a close name, as
// "tasks/regex-log" for "tasks/regex-lo"); nil when it exists. what says
// what the path was to be ("a prompts file, or a Harbor task directory or
// dataset").
func Missing(path, what string) error {
	_, err := os.Lstat(path)
	if !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	msg := fmt.Sprintf("%s: no such file or directory (want %s)", path, what)
	dir, base := filepath.Split(filepath.Clean(path))
	if dir == "" {
		dir = "."
	}
	if entries, rerr := os.ReadDir(dir); rerr == nil {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if best := suggest.Nearest(base, names); best != "" {
			msg += fmt.Sprintf("; did you mean %s?", filepath.Join(filepath.Dir(path), best))
		}
	}
	return Input(errors.New(msg))
}

// LoadTasks reads a task or dataset directory and says, once for the
// run, which task.toml fields its tasks set that are not honoured.
func LoadTasks(e *Env, dir string, quiet bool) (*taskset.Set, error) {
	set, err := taskset.Load(dir)
	if err != nil {
		return nil, Input(err)
	}
	if s := set.Unhonoured(); s != "" && !quiet {
		e.SayOnce("warning: task.toml fields not honoured (docs/tasks.md says why): " + s + "\n")
	}
	return set, nil
}

// ResolveTaskImages makes sure of each task's image once, before any
// trial runs (taskset.ResolveImages: built or pulled now, unpacked when a
// trial needs it), and says in one line how the run's images were had:
// built, unpacked, to unpack, found in the cache, used in place, and the
// tasks whose prebuilt image was not here and was built instead. A task
// whose image cannot be made is an input error.
//
// o says how the images are chosen and, with Missing, that a task whose
// image cannot be had is told there and left out instead; its progress
// hooks are this function's own.
func ResolveTaskImages(ctx context.Context, e *Env, store *image.Store, set *taskset.Set, o taskset.ResolveOptions, quiet bool) (map[string]*image.Image, error) {
	var choices []taskset.ImageChoice
	o.OnImage = func(c taskset.ImageChoice) { choices = append(choices, c) }
	if !quiet {
		defer ShowPulls(e, store, &o)()
	}
	imgs, err := set.ResolveImages(ctx, store, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil, WithCode(ExitInterrupted, ctx.Err())
		}
		return nil, PullFailure(err)
	}
	if !quiet {
		fmt.Fprintln(e.Stderr, ImagesLine(set, imgs, choices))
	}
	return imgs, nil
}

// WarnOverBudget has the store say on stderr, once, when the images that
// runs and trials hold alone exceed --image-cache-max (none of them is
// removed while held).
func WarnOverBudget(e *Env, store *image.Store, quiet bool) {
	if quiet {
		return
	}
	store.OnOverBudget = func(o image.OverBudget) {
		var held []string
		for _, h := range o.Held {
			held = append(held, fmt.Sprintf("%s (%s)", h.Ref, image.Bytes(h.Size)))
		}
		fmt.Fprintf(e.Stderr, "warning: the images in use hold %s, over --image-cache-max %s: %s; none is removed while in use\n",
			image.Bytes(o.Total), image.Bytes(o.Budget), strings.Join(held, ", "))
	}
}

// ImagesLine says in one line how the images of a set's tasks were had
// ("images of 9 tasks: 2 built (fix-shout, quiet-bench), 7 from the
// cache"), then the tasks whose prebuilt image was not here and was built
// instead, and those --force-build could not build, from the choices
// ResolveImages told.
func ImagesLine(set *taskset.Set, imgs map[string]*image.Image, choices []taskset.ImageChoice) string {
	groups := map[string][]string{}
	var order []string
	add := func(how, task string) {
		if groups[how] == nil {
			order = append(order, how)
		}
		groups[how] = append(groups[how], task)
	}
	for _, t := range set.Tasks {
		img := imgs[t.Name]
		switch {
		case img == nil:
			continue
		case img.Kind == "dir":
			add("used in place", t.Name)
		case img.Packed() && !img.InCache && img.Source == image.SourcePulled:
			add("to unpack from the registry store", t.Name)
		case img.Packed() && !img.InCache:
			add("to unpack", t.Name)
		case img.Packed() || !img.Made:
			add("from the cache", t.Name)
		case img.Kind == "build":
			add("built", t.Name)
		case img.Source == image.SourcePulled:
			add("unpacked from the registry store", t.Name)
		case img.Kind == "local":
			add("unpacked from the local image storage", t.Name)
		default:
			add("unpacked", t.Name)
		}
	}
	var parts []string
	for _, how := range order {
		parts = append(parts, fmt.Sprintf("%d %s%s", len(groups[how]), how, names(groups[how])))
	}
	line := fmt.Sprintf("images of %s: %s", Plural(len(set.Tasks), "task"), strings.Join(parts, ", "))
	var fellBack, unbuildable []string
	why := ""
	for _, c := range choices {
		switch {
		case c.Failed != nil:
			fellBack = append(fellBack, c.Task)
			if why == "" {
				why, _, _ = strings.Cut(c.Failed.Error(), "\n")
			}
		case c.Unbuildable:
			unbuildable = append(unbuildable, c.Task)
		}
	}
	if len(fellBack) > 0 {
		line += fmt.Sprintf("; the prebuilt image (docker_image) of %s was not here, its environment was built instead%s (%s)",
			Plural(len(fellBack), "task"), names(fellBack), why)
	}
	if len(unbuildable) > 0 {
		line += fmt.Sprintf("; --force-build: %s no environment/Dockerfile to build, its docker_image was used%s",
			Plural(len(unbuildable), "task")+map[bool]string{true: " has", false: " have"}[len(unbuildable) == 1], names(unbuildable))
	}
	return line
}

// names lists a few task names in parentheses ("" for more than five).
func names(tasks []string) string {
	if len(tasks) == 0 || len(tasks) > 5 {
		return ""
	}
	return " (" + strings.Join(tasks, ", ") + ")"
}

// FetchImages pulls the registry images of refs ("" skipped, each once)
// that the store lacks, before anything is unpacked or built, saying on
// stderr how each comes along. users names who uses each reference (a
// case, --image) for the message of one that cannot be had; every such
// failure is reported, then the run fails (PullFailure).
func FetchImages(ctx context.Context, e *Env, store *image.Store, refs []string, users map[string][]string, quiet bool) error {
	var pulls *termprogress.Pulls
	if store.Registry != nil && !quiet {
		pulls = NewPulls(e)
		defer pulls.Close()
		store.Registry.OnRetry = pulls.Retry
	}
	var failed []error
	seen := map[string]bool{}
	for _, ref := range refs {
		if ref == "" || seen[ref] {
			continue
		}
		seen[ref] = true
		var last pull.Progress
		pulled, err := store.Fetch(ctx, ref, func(p pull.Progress) {
			last = p
			if pulls != nil {
				pulls.Progress(p)
			}
		})
		if pulls != nil {
			var done *pull.Progress
			if err == nil && pulled {
				done = &last
			}
			pulls.Done(ref, done)
		}
		if ctx.Err() != nil {
			return WithCode(ExitInterrupted, ctx.Err())
		}
		if err != nil {
			who := strings.Join(users[ref], ", ")
			if who == "" {
				who = "a case"
			}
			failed = append(failed, fmt.Errorf("%s: %w", who, err))
			continue
		}
	}
	if len(failed) > 0 {
		return PullFailure(errors.Join(failed...))
	}
	return nil
}

// ShowPulls shows on stderr the pulls of a task set's images that o's
// fetch hooks are told of (NewPulls), the retries of store's registry
// client among them; an OnFetch o already has is still told, after. The
// function returned erases the status line: call it when the fetches
// are over. Without a registry client nothing is shown.
func ShowPulls(e *Env, store *image.Store, o *taskset.ResolveOptions) func() {
	if store.Registry == nil {
		return func() {}
	}
	pulls := NewPulls(e)
	store.Registry.OnRetry = pulls.Retry
	then := o.OnFetch
	o.OnFetch = func(f taskset.Fetched) {
		var pulled *pull.Progress
		if f.Err == nil && f.Pulled {
			pulled = &pull.Progress{Layers: f.Layers, Fetched: f.Fetched, Total: f.Total}
		}
		pulls.Done(f.Ref, pulled)
		if then != nil {
			then(f)
		}
	}
	o.OnLayer = pulls.Progress
	return pulls.Close
}

// NewPulls shows the image pulls of a command on its stderr: a live
// status line when stderr is a terminal, else a line per layer.
func NewPulls(e *Env) *termprogress.Pulls {
	return termprogress.NewPulls(e.Stderr, termprogress.PullSettings{Terminal: e.StderrTTY, Width: e.StderrWidth})
}

// PullFailure is the error of a run that could not have its images: an
// infrastructure failure (ExitInfraErrors) when every pull that failed
// found its registry unreachable or failing (nothing is wrong with the
// input; run again when the registry answers), else an input error (a
// reference the registry lacks, credentials refused, no image at all).
func PullFailure(err error) error {
	if allUnavailable(err) {
		return WithCode(ExitInfraErrors, fmt.Errorf("%w\n(a registry could not be reached: an infrastructure failure; nothing ran)", err))
	}
	return Input(err)
}

// allUnavailable says whether err holds pull errors and every one of them
// is a registry that could not be reached.
func allUnavailable(err error) bool {
	var walk func(error) (pulls int, ok bool)
	walk = func(err error) (int, bool) {
		var pe *pull.Error
		if j, isJoin := err.(interface{ Unwrap() []error }); isJoin {
			n := 0
			for _, e := range j.Unwrap() {
				m, ok := walk(e)
				if !ok {
					return 0, false
				}
				n += m
			}
			return n, true
		}
		if errors.As(err, &pe) {
			return 1, pe.Kind == pull.Unavailable
		}
		return 0, false
	}
	n, ok := walk(err)
	return ok && n > 0
}

// ValidateTaskRefs runs each task of a Harbor task directory or dataset
// with the oracle (it must score 1) and with an agent that does nothing
// (it must score 0), and writes one validation result per run.
func ValidateTaskRefs(ctx context.Context, e *Env, dir string, tf TaskFlags, output string, force, quiet bool) error {
	set, err := LoadTasks(e, dir, quiet)
	if err != nil {
		return err
	}
	store, err := tf.Store(nil)
	if err != nil {
		return err
	}
	imgs, err := ResolveTaskImages(ctx, e, store, set, taskset.ResolveOptions{ForceBuild: tf.ForceBuild}, quiet)
	if err != nil {
		return err
	}
	WarnOverBudget(e, store, quiet)
	if len(set.Tasks) > 0 {
		if img, release, err := store.Acquire(ctx, imgs[set.Tasks[0].Name]); err == nil {
			taskset.WarnOverlay(ctx, ProgressTo(e, quiet), img)
			release()
		}
	}
	var tally taskset.Tally
	err = WriteRecords(e, output, force, func(w *results.Writer) (err error) {
		if !quiet {
			fmt.Fprintf(e.Stderr, "Validating %d tasks with the oracle and a no-op agent...\n", len(set.Tasks))
		}
		tally, err = set.Validate(ctx, taskset.ValidateOptions{
			Images: imgs,
			// solve.sh and the verifier of a task with an allowlist
			// reach its hosts through the proxy, and nothing else.
			Trial: harbor.TrialOptions{Keep: tf.Keep, Egress: egress.NewProxy(nil, "")},
			// Each run's image is unpacked as it starts, held until
			// its layer is gone.
			Run: func(ctx context.Context, t *harbor.Task, img *image.Image, agent string, o harbor.TrialOptions) (*harbor.ReferenceResult, error) {
				img, release, err := store.Acquire(ctx, img)
				if err != nil {
					return nil, err
				}
				defer release()
				return harbor.RunReference(ctx, t, img, agent, o)
			},
			Each: func(o taskset.Outcome) error {
				if !quiet {
					sayRefOutcome(e.Stderr, o)
				}
				return w.Write(o.Result)
			},
		})
		return err
	})
	if err != nil {
		return err
	}
	return refsVerdict(ctx, e, tally, quiet)
}

// sayRefOutcome words one reference run for the terminal: a mark, the run
// and what it scored, and why the oracle failed when solve.sh did.
func sayRefOutcome(w io.Writer, o taskset.Outcome) {
	res := o.Ref
	note := fmt.Sprintf(": score %g, want %g", res.Verdict.Score, res.Want)
	switch {
	case o.Stopped != "":
		note = ": " + res.Verdict.Error.Message
	case o.GraderError():
		msg, _, _ := strings.Cut(res.Verdict.Error.Message, "\n")
		note = fmt.Sprintf(": grader error (%s): %s", res.Verdict.Error.Class, msg)
	}
	var solveTail string
	if r := res.Solve; o.SolveFailed() {
		// Why the oracle failed: solve.sh did.
		if r.TimedOut {
			note += fmt.Sprintf("; solve.sh did not finish within %s", o.Task.Config.AgentTimeout)
		} else {
			note += fmt.Sprintf("; solve.sh exited %d after %s", r.ExitCode, r.Duration.Round(time.Millisecond))
		}
		solveTail = indentTail(r.Output, 10, "      ")
	}
	for _, c := range res.Network {
		if !c.Allowed {
			note += fmt.Sprintf("; %s was refused %s:%d (%s)", phaseName(c.Phase), c.Host, c.Port, c.Error)
		}
	}
	if res.Layer != "" {
		note += "; layer kept in " + res.Layer
	}
	mark := "✓"
	if !res.OK {
		mark = "✗"
	}
	fmt.Fprintf(w, "  %s %s%s\n", mark, o.Label(), note)
	if solveTail != "" {
		fmt.Fprintf(w, "    solve.sh's output ends:\n%s", solveTail)
	}
}

// phaseName is the script a phase of a reference run runs.
func phaseName(phase string) string {
	switch phase {
	case harbor.PhaseSolution:
		return "solve.sh"
	case harbor.PhaseSetup:
		return "a step's setup"
	}
	return "the verifier"
}

// refsVerdict is the exit of validate-refs on tasks: interrupted, a
// reference run scored wrong, the verifier failed, or nil.
func refsVerdict(ctx context.Context, e *Env, t taskset.Tally, quiet bool) error {
	if ctx.Err() != nil {
		return WithCode(ExitInterrupted, fmt.Errorf("interrupted after %d of %d runs", t.Checked, t.Runs))
	}
	if !quiet {
		fmt.Fprintf(e.Stderr, "\nResults: %d correct, %d misjudged, %d grader errors\n", t.Correct(), len(t.Misjudged), len(t.GraderErrors))
	}
	if len(t.Misjudged) > 0 {
		return WithCode(ExitGateFailed, fmt.Errorf("%d of %d reference runs scored wrong: %s", len(t.Misjudged), t.Checked, strings.Join(t.Misjudged, ", ")))
	}
	if len(t.GraderErrors) > 0 {
		return WithCode(ExitInfraErrors, fmt.Errorf("the verifier failed on %d of %d reference runs: %s", len(t.GraderErrors), t.Checked, strings.Join(t.GraderErrors, ", ")))
	}
	return nil
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
