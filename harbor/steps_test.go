package harbor

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"harness/schemas"
)

// writeSteps adds steps/<name>/instruction.md and tests/test.sh to a task.
func writeSteps(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		for f, body := range map[string]string{"instruction.md": "Do " + n + ".\n", "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"} {
			p := filepath.Join(dir, "steps", n, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(body), 0o644)
		}
	}
}

const threeSteps = `schema_version = "1.4"
multi_step_reward_strategy = "final"

[agent]
timeout_sec = 100

[[steps]]
name = "one"
contributes_to_reward = false

[[steps]]
name = "two"
min_reward = { order = 1, reward = 0.5 }

[steps.agent]
timeout_sec = 7

[steps.verifier]
timeout_sec = 8

[steps.healthcheck]
command = "true"

[[steps]]
name = "three"
min_reward = 1
`

func TestStepsAreRead(t *testing.T) {
	dir := writeTask(t, threeSteps)
	writeSteps(t, dir, "one", "two", "three")
	task, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := task.Config
	if c.RewardStrategy != StrategyFinal || len(c.Steps) != 3 {
		t.Fatalf("strategy %q, %d steps", c.RewardStrategy, len(c.Steps))
	}
	want := []StepConfig{
		{Name: "one", Line: 7, Instruction: "Do one.\n", AgentTimeout: 100 * time.Second, VerifierTimeout: DefaultVerifierTimeout},
		{Name: "two", Line: 11, Instruction: "Do two.\n", AgentTimeout: 7 * time.Second, VerifierTimeout: 8 * time.Second,
			MinReward: map[string]float64{"order": 1, "reward": 0.5}, Contributes: true,
			Healthcheck: &Healthcheck{Command: "true", Interval: DefaultHealthInterval, Timeout: DefaultHealthTimeout, Retries: DefaultHealthRetries,
				StartInterval: DefaultHealthStartInterval, Field: "steps[2].healthcheck", Line: 21}},
		{Name: "three", Line: 24, Instruction: "Do three.\n", AgentTimeout: 100 * time.Second, VerifierTimeout: DefaultVerifierTimeout,
			MinReward: map[string]float64{"reward": 1}, Contributes: true},
	}
	if !reflect.DeepEqual(c.Steps, want) {
		t.Errorf("steps:\n got %+v\nwant %+v", c.Steps, want)
	}
	if got := task.Prompts(); !reflect.DeepEqual(got, []string{"Do one.\n", "Do two.\n", "Do three.\n"}) {
		t.Errorf("prompts %q", got)
	}
	// A step's healthcheck is read: nothing is named.
	if len(task.Unhonoured) != 0 {
		t.Errorf("unhonoured %v", task.Unhonoured)
	}
	// Without a strategy: the mean.
	dir = writeTask(t, "[[steps]]\nname = \"a\"\n")
	writeSteps(t, dir, "a")
	if task, err := Load(dir); err != nil || task.Config.RewardStrategy != StrategyMean {
		t.Errorf("default strategy: %v %v", task, err)
	}
}

func TestBadStepsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[[steps]]\nname = \"a\"\n\n[[steps]]\nmin_reward = 1\n", "task.toml:4: steps[2].name: every step needs a name"},
		{"[[steps]]\nname = \"a\"\n[[steps]]\nname = \"a\"\n", "task.toml:3: steps[2].name: \"a\" is the name of an earlier step"},
		{"[[steps]]\nname = \"../x\"\n", "task.toml:1: steps[1].name: ../x is not a directory name"},
		{"[[steps]]\nname = \"a\"\nmin_reward = \"high\"\n", "task.toml:1: steps[1].min_reward: must be a number or a table"},
		{"[[steps]]\nname = \"a\"\n[steps.agent]\ntimeout_sec = \"soon\"\n", "task.toml:1: steps[1].agent.timeout_sec: must be a number of seconds more than 0, not soon"},
		{"[[steps]]\nname = \"a\"\ncontributes_to_reward = 1\n", "task.toml:1: steps[1].contributes_to_reward: must be true or false"},
		{"multi_step_reward_strategy = \"max\"\n", "task.toml:1: multi_step_reward_strategy: must be mean or final, not \"max\""},
	} {
		dir := writeTask(t, tc.toml)
		writeSteps(t, dir, "a")
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant …%s", tc.toml, err, tc.want)
		}
	}
	// A step's files are required.
	dir := writeTask(t, "[[steps]]\nname = \"a\"\n[[steps]]\nname = \"b\"\n")
	writeSteps(t, dir, "a")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "step b (task.toml:3): instruction.md") {
		t.Errorf("missing step: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "steps", "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "steps", "b", "instruction.md"), []byte("x"), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "steps/b/tests/test.sh is missing") {
		t.Errorf("missing tests: %v", err)
	}
}

func TestMinReward(t *testing.T) {
	score := func(v float64) *float64 { return &v }
	res := schemas.GraderResult{Score: 0.5, Checks: []schemas.Check{{Text: "order", Score: score(1)}, {Text: "style", Score: score(0)}}}
	for _, tc := range []struct {
		min   map[string]float64
		below bool
	}{
		{nil, false},
		{map[string]float64{"reward": 0.5}, false},
		{map[string]float64{"reward": 0.6}, true},
		{map[string]float64{"order": 1}, false},
		{map[string]float64{"style": 1}, true},
		{map[string]float64{"missing": 0.1}, true},
	} {
		if below, why := (StepConfig{MinReward: tc.min}).BelowMinReward(res); below != tc.below {
			t.Errorf("%v: below %v (%s)", tc.min, below, why)
		}
	}
	errRes := schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "x"}}
	if below, _ := (StepConfig{MinReward: map[string]float64{"reward": 0}}).BelowMinReward(errRes); !below {
		t.Error("a verifier error is below any min_reward")
	}
}

func TestStepsVerdictFollowsTheStrategy(t *testing.T) {
	step := func(score float64) schemas.TaskStep {
		return schemas.TaskStep{Verdict: &schemas.GraderResult{Score: score, Pass: score >= 1}}
	}
	broken := schemas.TaskStep{Verdict: &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "no reward"}}}
	for _, tc := range []struct {
		name       string
		strategy   string
		counts     []bool
		steps      []schemas.TaskStep
		score      float64
		pass       bool
		errMessage string
	}{
		{"mean of all", StrategyMean, []bool{true, true, true}, []schemas.TaskStep{step(1), step(0.5), step(0)}, 0.5, false, ""},
		{"mean without a step that does not count", StrategyMean, []bool{false, true, true}, []schemas.TaskStep{step(0), step(1), step(1)}, 1, true, ""},
		{"mean with steps not reached", StrategyMean, []bool{true, true, true}, []schemas.TaskStep{step(1), step(0.5)}, 0.5, false, ""},
		{"final", StrategyFinal, []bool{true, true, true}, []schemas.TaskStep{step(0), step(0), step(1)}, 1, true, ""},
		{"final not reached", StrategyFinal, []bool{true, true, true}, []schemas.TaskStep{step(1), step(1)}, 0, false, ""},
		{"final ignores an earlier broken step", StrategyFinal, []bool{true, true, true}, []schemas.TaskStep{broken, step(1), step(1)}, 1, true, ""},
		{"mean with a broken step", StrategyMean, []bool{true, true, true}, []schemas.TaskStep{step(1), broken, step(1)}, 0, false, "step s2: no reward"},
		{"broken step that does not count", StrategyMean, []bool{false, true}, []schemas.TaskStep{broken, step(1)}, 1, true, ""},
	} {
		task := &Task{Config: Config{RewardStrategy: tc.strategy}}
		for i, c := range tc.counts {
			task.Config.Steps = append(task.Config.Steps, StepConfig{Name: "s" + string(rune('1'+i)), Contributes: c})
		}
		res := task.StepsVerdict(tc.steps)
		gotErr := ""
		if res.Error != nil {
			gotErr = res.Error.Message
		}
		if res.Score != tc.score || res.Pass != tc.pass || gotErr != tc.errMessage {
			t.Errorf("%s: score %v pass %v error %q (%s)", tc.name, res.Score, res.Pass, gotErr, res.Reasoning)
		}
		if tc.errMessage == "" && len(res.Checks) != len(tc.counts) {
			t.Errorf("%s: %d checks", tc.name, len(res.Checks))
		}
	}
}
