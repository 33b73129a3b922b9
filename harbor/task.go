// Package harbor reads task directories in the format of Harbor, the
// framework that runs Terminal-Bench 2.0 and the other datasets of its
// registry (task.toml, instruction.md, environment/, tests/, solution/),
// and runs their verifiers in a trial's image layer.
package harbor

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Task is one Harbor task directory.
type Task struct {
	// Dir is the task's directory; Name its base name.
	Dir, Name string
	// Instruction is instruction.md: the prompt.
	Instruction string
	// Image is the image a trial runs in, as Harbor chooses it without
	// --force-build: Prebuilt when there is one, else Build.
	Image string
	// Prebuilt is the prebuilt image: task.toml's docker_image (or the
	// image the compose file's main service names); "" when none.
	Prebuilt string
	// Build is the build context (environment/, or the context or
	// Dockerfile the compose file's main service names); "" when the task
	// has none.
	Build string
	// Config is task.toml.
	Config Config
	// ComposeEnv is the environment the compose file gives its main
	// service (the trial's container): under every command's.
	ComposeEnv map[string]string
	// Unhonoured lists the task.toml fields that are read but not acted on
	// (Harbor's fields not honoured here, keys its schema does not have).
	Unhonoured []Unhonoured
}

// TestsDir is the directory copied to /tests for the verifier.
func (t *Task) TestsDir() string { return filepath.Join(t.Dir, "tests") }

// SolutionDir holds solve.sh, the reference solution.
func (t *Task) SolutionDir() string { return filepath.Join(t.Dir, "solution") }

// AgentEnv is the agent's environment table: the compose file's, then
// [environment] env, then [agent] env, each over the one before.
func (t *Task) AgentEnv() map[string]string {
	return mergeEnv(t.ComposeEnv, t.Config.EnvironmentEnv, t.Config.AgentEnv)
}

// VerifierEnv is tests/test.sh's: the compose file's, [environment] env,
// then [verifier] env.
func (t *Task) VerifierEnv() map[string]string {
	return mergeEnv(t.ComposeEnv, t.Config.EnvironmentEnv, t.Config.VerifierEnv)
}

// SolutionEnv is solution/solve.sh's: the compose file's, [environment]
// env, then [solution] env.
func (t *Task) SolutionEnv() map[string]string {
	return mergeEnv(t.ComposeEnv, t.Config.EnvironmentEnv, t.Config.SolutionEnv)
}

func mergeEnv(tables ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, t := range tables {
		maps.Copy(out, t)
	}
	return out
}

// SetEnv sets the variables of table in env (a list of NAME=value), over
// those env has, in name order.
func SetEnv(env []string, table map[string]string) []string {
	out := slices.Clone(env)
	for _, k := range slices.Sorted(maps.Keys(table)) {
		out = setEnv(out, k+"="+table[k])
	}
	return out
}

// ImageChoice is the image to try first for the trial's environment and,
// when that one cannot be had, the one to fall back to, as Harbor chooses:
// the prebuilt image (docker_image) unless forceBuild, else the build
// context; "" when there is no other.
func (t *Task) ImageChoice(forceBuild bool) (first, fallback string) {
	switch {
	case t.Prebuilt == "":
		return t.Build, ""
	case t.Build == "":
		return t.Prebuilt, ""
	case forceBuild:
		return t.Build, ""
	}
	return t.Prebuilt, t.Build
}

// IsTask says whether dir is a task directory (it has task.toml).
func IsTask(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "task.toml"))
	return err == nil && fi.Mode().IsRegular()
}

// IsDataset says whether dir is a task directory or a dataset: a
// directory with a subdirectory that is one.
func IsDataset(dir string) bool {
	if IsTask(dir) {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() && IsTask(filepath.Join(dir, e.Name())) {
			return true
		}
	}
	return false
}

// NotATaskError says why dir, given where a task directory or a dataset
// is expected, is neither.
func NotATaskError(dir string) error {
	return fmt.Errorf("%s is not a Harbor task directory (it has no task.toml) nor a dataset of them (no subdirectory has a task.toml)", dir)
}

// Loader reads task directories.
type Loader struct {
	// LookupEnv finds the host's variables task.toml's env tables name
	// (${VAR}, ${VAR:-default}); os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
}

// LoadDataset reads dir as one task (it has task.toml) or as a dataset.
func LoadDataset(dir string) ([]*Task, error) { return (&Loader{}).LoadDataset(dir) }

// Load reads one task directory.
func Load(dir string) (*Task, error) { return (&Loader{}).Load(dir) }

// LoadDataset reads dir as one task (it has task.toml) or as a dataset:
// its subdirectories that have task.toml, by name. Every task's errors are
// reported together.
func (ld *Loader) LoadDataset(dir string) ([]*Task, error) {
	if IsTask(dir) {
		t, err := ld.Load(dir)
		if err != nil {
			return nil, err
		}
		return []*Task{t}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	var tasks []*Task
	var errs []error
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if !e.IsDir() || !IsTask(sub) {
			continue
		}
		t, err := ld.Load(sub)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks = append(tasks, t)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(tasks) == 0 {
		return nil, NotATaskError(dir)
	}
	return tasks, nil
}

// Load reads one task directory.
func (ld *Loader) Load(dir string) (*Task, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	lookup := ld.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	t := &Task{Dir: abs, Name: filepath.Base(abs)}
	tomlPath := filepath.Join(abs, "task.toml")
	src, err := os.ReadFile(tomlPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a Harbor task directory: it has no task.toml", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	if err := t.parseConfig(tomlPath, string(src), lookup); err != nil {
		return nil, err
	}
	if t.MultiStep() {
		// Each step has its own instruction and tests; the task's
		// instruction.md and tests/ (helpers the steps share) are optional.
		if err := t.loadSteps(); err != nil {
			return nil, err
		}
		if instr, err := os.ReadFile(filepath.Join(abs, "instruction.md")); err == nil {
			t.Instruction = string(instr)
		}
	} else {
		instr, err := os.ReadFile(filepath.Join(abs, "instruction.md"))
		if err != nil {
			return nil, fmt.Errorf("task %s: instruction.md: %w", dir, err)
		}
		t.Instruction = string(instr)
		if strings.TrimSpace(t.Instruction) == "" {
			return nil, fmt.Errorf("task %s: instruction.md is empty", dir)
		}
		if fi, err := os.Stat(filepath.Join(t.TestsDir(), "test.sh")); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("task %s: tests/test.sh is missing", dir)
		}
	}
	if err := t.findImage(lookup); err != nil {
		return nil, err
	}
	return t, nil
}

// findImage finds the environment: environment/Dockerfile (the build
// context), docker_image (the prebuilt image), and what a compose file's
// main service adds (its environment, another build context or image).
func (t *Task) findImage(lookup func(string) (string, bool)) error {
	env := filepath.Join(t.Dir, "environment")
	for _, name := range []string{"Dockerfile", "Containerfile"} {
		if fi, err := os.Stat(filepath.Join(env, name)); err == nil && fi.Mode().IsRegular() {
			t.Build = env
			break
		}
	}
	t.Prebuilt = t.Config.DockerImage
	for _, name := range []string{"docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"} {
		p := filepath.Join(env, name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		// Compose reads variables from Harbor's environment: the task's
		// [environment] env over the host's.
		c, err := readCompose(p, func(k string) (string, bool) {
			if v, ok := t.Config.EnvironmentEnv[k]; ok {
				return v, true
			}
			return lookup(k)
		})
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Dir, err)
		}
		t.ComposeEnv = c.Env
		if c.Build != "" {
			t.Build = c.Build
			if !filepath.IsAbs(t.Build) {
				t.Build = filepath.Join(env, t.Build)
			}
		}
		if c.Image != "" && t.Prebuilt == "" {
			t.Prebuilt = c.Image
		}
		break
	}
	t.Image, _ = t.ImageChoice(false)
	if t.Image == "" {
		return fmt.Errorf("task %s: no environment/Dockerfile and no docker_image in task.toml", t.Dir)
	}
	return nil
}

// UnhonouredSummary names the task.toml fields of tasks that are not
// honoured, each with the task that sets it or how many do, and for a key
// Harbor's schema does not have the one probably meant
// ("environment.healthcheck (in 2 tasks), agent.timout_sec (in fix-x; did
// you mean agent.timeout_sec?)"); "" when there are none.
func UnhonouredSummary(tasks []*Task) string {
	by := map[string][]string{}
	meant := map[string]string{}
	for _, t := range tasks {
		for _, u := range t.Unhonoured {
			if u.Suggest != "" {
				meant[u.Field] = "; did you mean " + u.Suggest + "?"
			}
			if names := by[u.Field]; len(names) == 0 || names[len(names)-1] != t.Name {
				by[u.Field] = append(names, t.Name)
			}
		}
	}
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(by)) {
		if names := by[f]; len(names) == 1 {
			parts = append(parts, fmt.Sprintf("%s (in %s%s)", f, names[0], meant[f]))
		} else {
			parts = append(parts, fmt.Sprintf("%s (in %d tasks%s)", f, len(names), meant[f]))
		}
	}
	return strings.Join(parts, ", ")
}
