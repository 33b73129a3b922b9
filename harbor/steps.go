package harbor

import (
	"context"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"harness/image"
	"harness/schemas"
)

// The values of multi_step_reward_strategy.
const (
	// StrategyMean scores a multi-step trial by the mean reward of its
	// steps that count (a step the trial did not reach counts 0).
	StrategyMean = "mean"
	// StrategyFinal scores it by its last step's reward (0 when the
	// trial ended before it).
	StrategyFinal = "final"
)

// StepConfig is one [[steps]] table of a multi-step task: its files are
// under steps/<Name>/ (instruction.md, tests/test.sh, and optionally
// solution/solve.sh and workdir/ with a setup.sh).
type StepConfig struct {
	// Name is the step's name and directory under steps/.
	Name string
	// Line is the line of its [[steps]] header.
	Line int
	// Instruction is steps/<Name>/instruction.md: the step's prompt.
	Instruction string
	// AgentTimeout and VerifierTimeout are [steps.agent] timeout_sec and
	// [steps.verifier] timeout_sec, else the task's.
	AgentTimeout, VerifierTimeout time.Duration
	// MinReward is min_reward: the rewards the step must reach, by name
	// ("reward" for a plain number); a step below any of them ends the
	// trial. Nil when the step sets none.
	MinReward map[string]float64
	// Contributes is contributes_to_reward (default true): whether the
	// step's reward counts in the trial's.
	Contributes bool
	// Healthcheck is [steps.healthcheck]: run after the step's setup,
	// before its prompt (nil: none).
	Healthcheck *Healthcheck
}

// honouredStepField says whether key is a field of a [[steps]] table
// that is acted on here.
func honouredStepField(key string) bool {
	switch key {
	case "steps", "steps.name", "steps.min_reward", "steps.contributes_to_reward",
		"steps.agent", "steps.agent.timeout_sec", "steps.verifier", "steps.verifier.timeout_sec", "steps.healthcheck":
		return true
	}
	if k, ok := strings.CutPrefix(key, "steps.healthcheck."); ok {
		return slices.Contains(healthKeys, k)
	}
	return strings.HasPrefix(key, "steps.min_reward.")
}

// validStepName matches a step name usable as a directory name.
func validStepName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\\\x00")
}

// steps reads the [[steps]] tables.
func (r *reader) steps(raw map[string]any, src string, agent, verifier time.Duration) []StepConfig {
	v, ok := raw["steps"]
	if !ok {
		return nil
	}
	list, isList := v.([]map[string]any)
	if !isList {
		r.fail("steps", "must be an array of tables ([[steps]])")
		return nil
	}
	headers := stepHeaders(src)
	var out []StepConfig
	seen := map[string]bool{}
	for i, m := range list {
		line := 0
		if i < len(headers) {
			line = headers[i]
		}
		field := func(name string) string { return fmt.Sprintf("steps[%d].%s", i+1, name) }
		fail := func(name, format string, args ...any) {
			if r.err == nil {
				r.err = fieldError(r.file, line, field(name), format, args...)
			}
		}
		s := StepConfig{Line: line, AgentTimeout: agent, VerifierTimeout: verifier, Contributes: true}
		name, _ := m["name"].(string)
		switch {
		case m["name"] == nil:
			fail("name", "every step needs a name (its directory under steps/)")
		case !validStepName(name):
			fail("name", "%v is not a directory name", m["name"])
		case seen[name]:
			fail("name", "%q is the name of an earlier step", name)
		}
		seen[name] = true
		s.Name = name
		secs := func(table string, def time.Duration) time.Duration {
			tv, ok := m[table]
			if !ok {
				return def
			}
			tm, isMap := tv.(map[string]any)
			if !isMap {
				fail(table, "must be a table")
				return def
			}
			x, ok := tm["timeout_sec"]
			if !ok {
				return def
			}
			if f := toFloat(x); f > 0 && !math.IsInf(f, 0) {
				return time.Duration(f * float64(time.Second))
			}
			fail(table+".timeout_sec", "must be a number of seconds more than 0, not %v", x)
			return def
		}
		s.AgentTimeout = secs("agent", agent)
		s.VerifierTimeout = secs("verifier", verifier)
		if c, ok := m["contributes_to_reward"]; ok {
			b, isBool := c.(bool)
			if !isBool {
				fail("contributes_to_reward", "must be true or false, not %v", c)
			}
			s.Contributes = b
		}
		switch mr := m["min_reward"].(type) {
		case nil:
		case int64, float64:
			s.MinReward = map[string]float64{"reward": toFloat(mr)}
		case map[string]any:
			s.MinReward = map[string]float64{}
			for k, x := range mr {
				switch x.(type) {
				case int64, float64:
					s.MinReward[k] = toFloat(x)
				default:
					fail("min_reward."+k, "must be a number, not %v", x)
				}
			}
		default:
			fail("min_reward", "must be a number or a table of numbers by reward name, not %v", mr)
		}
		if hv, ok := m["healthcheck"]; ok {
			s.Healthcheck = readHealthcheck(hv, field("healthcheck"), healthLine(src, line), func(key, format string, args ...any) {
				fail(strings.TrimSuffix("healthcheck."+key, "."), format, args...)
			})
		}
		out = append(out, s)
	}
	return out
}

// healthLine is the line of the [steps.healthcheck] header of the step
// whose [[steps]] header is on line step (that line when it has none).
func healthLine(src string, step int) int {
	lines := strings.Split(src, "\n")
	for i := step; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(t, "[[") && tableName(t) == "steps":
			return step
		case strings.HasPrefix(t, "[") && tableName(t) == "steps.healthcheck":
			return i + 1
		}
	}
	return step
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return math.NaN()
}

// stepHeaders are the lines of the [[steps]] headers, in order.
func stepHeaders(src string) []int {
	var out []int
	for i, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[[") && tableName(t) == "steps" {
			out = append(out, i+1)
		}
	}
	return out
}

// loadSteps reads each step's instruction and checks its tests are there.
func (t *Task) loadSteps() error {
	for i := range t.Config.Steps {
		s := &t.Config.Steps[i]
		b, err := os.ReadFile(filepath.Join(t.StepDir(i), "instruction.md"))
		if err != nil {
			return fmt.Errorf("task %s: step %s (task.toml:%d): instruction.md: %w", t.Dir, s.Name, s.Line, err)
		}
		if strings.TrimSpace(string(b)) == "" {
			return fmt.Errorf("task %s: step %s (task.toml:%d): steps/%s/instruction.md is empty", t.Dir, s.Name, s.Line, s.Name)
		}
		s.Instruction = string(b)
		if fi, err := os.Stat(filepath.Join(t.StepDir(i), "tests", "test.sh")); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("task %s: step %s (task.toml:%d): steps/%s/tests/test.sh is missing", t.Dir, s.Name, s.Line, s.Name)
		}
	}
	return nil
}

// MultiStep says whether the task has [[steps]].
func (t *Task) MultiStep() bool { return len(t.Config.Steps) > 0 }

// Prompts are the task's prompts: each step's instruction in turn, or
// instruction.md.
func (t *Task) Prompts() []string {
	if !t.MultiStep() {
		return []string{t.Instruction}
	}
	out := make([]string, len(t.Config.Steps))
	for i, s := range t.Config.Steps {
		out[i] = s.Instruction
	}
	return out
}

// StepDir is steps/<name>/ of step i.
func (t *Task) StepDir(i int) string { return filepath.Join(t.Dir, "steps", t.Config.Steps[i].Name) }

// stepScript is where a step's setup.sh goes while it runs.
const stepScript = "/tmp/.harbor-step-setup.sh"

// SetupStep prepares step i in the layer before its prompt:
// steps/<name>/workdir/ is copied into the working directory and, when
// it holds a setup.sh, that script runs there (then is removed from the
// working directory). Ran is nil when the step has no workdir/. A setup
// that fails is an error of the trial's environment. Then the step's
// healthcheck, when it has one, must pass (CheckHealth).
func SetupStep(ctx context.Context, l *image.Layer, t *Task, i int, s Step) (*Ran, error) {
	ran, err := setupWorkdir(ctx, l, t, i, s)
	if err != nil {
		return ran, err
	}
	return ran, stepHealth(ctx, l, t, i, s)
}

// setupWorkdir copies step i's workdir/ and runs its setup.sh.
func setupWorkdir(ctx context.Context, l *image.Layer, t *Task, i int, s Step) (*Ran, error) {
	src := filepath.Join(t.StepDir(i), "workdir")
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, nil
	}
	wd := t.Workdir(l.Image)
	if err := l.CopyIn(src, wd); err != nil {
		return nil, fmt.Errorf("step %s: copy workdir/ to %s: %w", t.Config.Steps[i].Name, wd, err)
	}
	setup := path.Join(wd, "setup.sh")
	if _, err := l.ReadFile(setup); err != nil {
		return nil, nil
	}
	if err := l.RemoveAll(setup); err != nil {
		return nil, err
	}
	if err := l.CopyIn(filepath.Join(src, "setup.sh"), stepScript); err != nil {
		return nil, err
	}
	defer l.RemoveAll(stepScript)
	timeout := s.Timeout
	if timeout == 0 {
		timeout = t.Config.Steps[i].AgentTimeout
	}
	ran, err := run(ctx, l, []string{"bash", stepScript}, wd, env(l.Image, t.AgentEnv(), s.Env), timeout, s)
	if err != nil {
		return nil, fmt.Errorf("step %s: run workdir/setup.sh: %w", t.Config.Steps[i].Name, err)
	}
	switch {
	case ran.TimedOut:
		return &ran, fmt.Errorf("step %s: workdir/setup.sh did not finish within %s", t.Config.Steps[i].Name, timeout)
	case ran.ExitCode != 0:
		return &ran, fmt.Errorf("step %s: workdir/setup.sh exited %d: %s", t.Config.Steps[i].Name, ran.ExitCode, lastLines(ran.Output, 5))
	}
	return &ran, nil
}

// stepHealth runs step i's healthcheck, when it has one.
func stepHealth(ctx context.Context, l *image.Layer, t *Task, i int, s Step) error {
	hc := t.Config.Steps[i].Healthcheck
	if hc == nil {
		return nil
	}
	if _, err := CheckHealth(ctx, l, t, hc, s); err != nil {
		return fmt.Errorf("step %s: %w", t.Config.Steps[i].Name, err)
	}
	return nil
}

// VerifyStep runs step i's tests in the layer: the task's tests/ (helpers
// the steps share), then steps/<name>/tests/ over it, go to /tests, and
// its test.sh runs with the step's verifier timeout, read as Verify reads
// the task's.
func VerifyStep(ctx context.Context, l *image.Layer, t *Task, i int, s Step) schemas.GraderResult {
	start := time.Now()
	dirs := []string{}
	if fi, err := os.Stat(t.TestsDir()); err == nil && fi.IsDir() {
		dirs = append(dirs, t.TestsDir())
	}
	dirs = append(dirs, filepath.Join(t.StepDir(i), "tests"))
	if s.Timeout == 0 {
		s.Timeout = t.Config.Steps[i].VerifierTimeout
	}
	res := verify(ctx, l, t, dirs, s)
	res.Grader = GraderName
	res.DurationMs = time.Since(start).Milliseconds()
	return res
}

// SolveStep runs step i's reference solution (steps/<name>/solution/
// solve.sh, copied to /solution), when the step has one; Ran is nil when
// it has none.
func SolveStep(ctx context.Context, l *image.Layer, t *Task, i int, s Step) (*Ran, error) {
	dir := filepath.Join(t.StepDir(i), "solution")
	if fi, err := os.Stat(filepath.Join(dir, "solve.sh")); err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	if err := l.RemoveAll(SolutionPath); err != nil {
		return nil, err
	}
	if err := l.CopyIn(dir, SolutionPath); err != nil {
		return nil, fmt.Errorf("task %s: step %s: copy solution/: %w", t.Name, t.Config.Steps[i].Name, err)
	}
	if s.Timeout == 0 {
		s.Timeout = t.Config.Steps[i].AgentTimeout
	}
	s.User = t.agentUser(s)
	ran, err := run(ctx, l, []string{"bash", solutionScript}, t.Workdir(l.Image), env(l.Image, t.SolutionEnv(), s.Env), s.Timeout, s)
	if err != nil {
		return nil, err
	}
	return &ran, l.RemoveAll(SolutionPath)
}

// BelowMinReward says whether a step's verdict is below its min_reward,
// and why: a verifier error is below any minimum; a named reward that
// reward.json did not write counts 0.
func (s StepConfig) BelowMinReward(res schemas.GraderResult) (bool, string) {
	if s.MinReward == nil {
		return false, ""
	}
	if res.Error != nil {
		return true, "its verifier gave no reward"
	}
	for _, k := range slices.Sorted(mapsKeys(s.MinReward)) {
		min := s.MinReward[k]
		got := 0.0
		if k == "reward" {
			got = res.Score
		} else {
			for _, c := range res.Checks {
				if c.Text == k && c.Score != nil {
					got = *c.Score
				}
			}
		}
		if got < min {
			return true, fmt.Sprintf("%s %g is below min_reward %g", k, got, min)
		}
	}
	return false, ""
}

func mapsKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// StepsVerdict is the trial's verdict from its steps' results (in order;
// the steps the trial did not reach are missing), by the task's
// multi_step_reward_strategy: "mean", the mean reward of the steps that
// contribute (those not reached count 0), or "final", the last step's
// (0 when the trial ended before it). A contributing step whose verifier
// gave no reward makes the verdict an error of that class: never a pass
// or a fail. Each step is a check of the verdict.
func (t *Task) StepsVerdict(steps []schemas.TaskStep) schemas.GraderResult {
	res := schemas.GraderResult{Grader: GraderName}
	n := len(t.Config.Steps)
	sum, counted := 0.0, 0
	for i, cfg := range t.Config.Steps {
		var st *schemas.TaskStep
		if i < len(steps) {
			st = &steps[i]
		}
		c := schemas.Check{Text: "step " + cfg.Name}
		switch {
		case st == nil || st.Verdict == nil:
			c.Reason = "not reached"
			c.Score = new(float64)
		case st.Verdict.Error != nil:
			c.Reason = st.Verdict.Error.Class + ": " + st.Verdict.Error.Message
		default:
			score := st.Verdict.Score
			c.Score, c.Pass = &score, st.Verdict.Pass
			c.Reason = st.Verdict.Reasoning
		}
		if !cfg.Contributes {
			c.Reason = strings.TrimPrefix(c.Reason+"; does not count (contributes_to_reward = false)", "; ")
		}
		res.Checks = append(res.Checks, c)
		if st != nil {
			res.DurationMs += st.Timing.Verifier
		}
		counts := cfg.Contributes && (t.Config.RewardStrategy != StrategyFinal || i == n-1)
		if !counts {
			continue
		}
		if st != nil && st.Verdict != nil && st.Verdict.Error != nil {
			e := *st.Verdict.Error
			e.Message = fmt.Sprintf("step %s: %s", cfg.Name, e.Message)
			res.Error = &e
			return res
		}
		counted++
		if c.Score != nil {
			sum += *c.Score
		}
	}
	switch {
	case counted == 0:
		res.Reasoning = "no step counts toward the reward"
	case t.Config.RewardStrategy == StrategyFinal:
		res.Score = sum
		res.Reasoning = fmt.Sprintf("reward %g, the final step's (multi_step_reward_strategy = final)", res.Score)
	default:
		res.Score = sum / float64(counted)
		res.Reasoning = fmt.Sprintf("reward %g, the mean of %d steps (multi_step_reward_strategy = mean)", res.Score, counted)
	}
	if len(steps) < n && len(steps) > 0 && steps[len(steps)-1].EndedTrial != "" {
		res.Reasoning += "; " + steps[len(steps)-1].EndedTrial
	}
	res.Pass = counted > 0 && res.Score >= 1
	last := n
	if len(steps) < n {
		last = len(steps)
	}
	if last > 0 && steps[last-1].Verdict != nil && steps[last-1].Verdict.Outcome != nil {
		res.Outcome = map[string]any{"steps": len(steps), "reward": res.Score}
	}
	return res
}
