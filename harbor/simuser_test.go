package harbor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUserTableNamesTheTasksSimulatedUser(t *testing.T) {
	dir := writeTask(t, `[user]
command = "./user.py"
maxTurns = 4
goal = "the tests pass"
`)
	task, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	u := task.Config.SimulatedUser
	if u == nil || len(u.Command) != 1 || u.Command[0] != filepath.Join(dir, "user.py") || u.MaxTurns != 4 || u.Goal != "the tests pass" {
		t.Fatalf("user %+v", u)
	}
	if len(task.Unhonoured) != 0 {
		t.Errorf("unhonoured %+v", task.Unhonoured)
	}

	dir = writeTask(t, "[user]\nmodel = \"claude-haiku-4-5\"\npromptFile = \"user-prompt.md\"\npersona = \"a new hire\"\n")
	os.WriteFile(filepath.Join(dir, "user-prompt.md"), []byte("Be {{persona}}."), 0o644)
	if task, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if u := task.Config.SimulatedUser; u == nil || u.Model != "claude-haiku-4-5" || u.Prompt != "Be {{persona}}." || u.PromptFile != "" {
		t.Errorf("model user %+v", u)
	}
}

func TestUserTableErrorsNameLineAndField(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[user]\ncommand = \"./u.py\"\n\nmaxTurns = 0\n", "task.toml:4: user.maxTurns: must be a whole number of turns, at least 1"},
		{"[user]\ngoal = \"x\"\n", "user.command: missing"},
		{"[user]\ncommand = \"./u\"\nmodel = \"m\"\n", "task.toml:3: user.model: give either command"},
		{"user = 3\n", "task.toml:1: user: must be a table"},
		{"[user]\nmodel = \"m\"\npromptFile = \"none.md\"\n", "task.toml:3: user.promptFile: open "},
		{"[user]\ncommand = \"./u\"\n\n[[steps]]\nname = \"one\"\n", "user: a multi-step task's turns are its steps"},
	} {
		_, err := Load(writeTask(t, tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant …%s", tc.toml, err, tc.want)
		}
	}
}
