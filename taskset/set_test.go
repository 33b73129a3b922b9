package taskset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"harness/schemas"
	"harness/suite"
)

// writeTask makes the task directory dir/name with the given task.toml.
func writeTask(t *testing.T, dir, name, toml string) string {
	t.Helper()
	task := filepath.Join(dir, name)
	for f, body := range map[string]string{
		"task.toml":              toml,
		"instruction.md":         "Do " + name + ".\n",
		"environment/Dockerfile": "FROM localhost/harness-base:bookworm\n",
		"tests/test.sh":          "echo 1 > /logs/verifier/reward.txt\n",
	} {
		p := filepath.Join(task, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

// dataset makes a dataset of two tasks, written in reverse order, and
// loads it.
func dataset(t *testing.T) *Set {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	writeTask(t, dir, "zeta", "[agent]\ntimeout_sec = 10\n")
	writeTask(t, dir, "alpha", "[agent]\ntimeout_sec = 60\n\n[metadata]\ndifficulty = \"easy\"\n\n[environment]\ngpu_types = [\"H100\"]\n")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a task\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

type taskCase struct {
	ID       string         `json:"id"`
	Input    string         `json:"input"`
	Timeout  string         `json:"timeout"`
	Metadata map[string]any `json:"metadata"`
}

func readCases(t *testing.T, b []byte) []taskCase {
	t.Helper()
	var cases []taskCase
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var c taskCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		cases = append(cases, c)
	}
	return cases
}

// A dataset's tasks are its subdirectories with task.toml, by name; the
// one task of a task directory is the set.
func TestLoad(t *testing.T) {
	set := dataset(t)
	var names []string
	for _, task := range set.Tasks {
		names = append(names, task.Name)
	}
	if !reflect.DeepEqual(names, []string{"alpha", "zeta"}) {
		t.Errorf("tasks %v", names)
	}
	if set.Task("zeta") != set.Tasks[1] || set.Task("README.md") != nil {
		t.Error("Task does not find the tasks by name")
	}
	if got := set.Unhonoured(); got != "environment.gpu_types (in alpha)" {
		t.Errorf("unhonoured %q", got)
	}
	one, err := Load(filepath.Join(set.Dir, "zeta"))
	if err != nil || len(one.Tasks) != 1 || one.Tasks[0].Name != "zeta" {
		t.Errorf("a task directory: %v, %v", one, err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a Harbor task directory") {
		t.Errorf("an empty directory: %v", err)
	}
}

// Each task is a case: its name, its instruction, its agent timeout
// scaled, its metadata and its directory.
func TestWriteCases(t *testing.T) {
	set := dataset(t)
	var b bytes.Buffer
	if err := set.WriteCases(&b, 1.5); err != nil {
		t.Fatal(err)
	}
	want := []taskCase{
		{ID: "alpha", Input: "Do alpha.\n", Timeout: "1m30s", Metadata: map[string]any{"task": filepath.Join(set.Dir, "alpha"), "difficulty": "easy"}},
		{ID: "zeta", Input: "Do zeta.\n", Timeout: "15s", Metadata: map[string]any{"task": filepath.Join(set.Dir, "zeta")}},
	}
	if got := readCases(t, b.Bytes()); !reflect.DeepEqual(got, want) {
		t.Errorf("cases\n%+v\nwant\n%+v", got, want)
	}
}

func TestWriteCasesRefusesAScaleNotPositive(t *testing.T) {
	set := dataset(t)
	for _, scale := range []float64{0, -1} {
		var b bytes.Buffer
		if err := set.WriteCases(&b, scale); !errors.Is(err, ErrTimeoutScale) || b.Len() != 0 {
			t.Errorf("scale %g: %v, wrote %q", scale, err, b.String())
		}
	}
}

// The suite of a directory is a suite harness run reads: named after the
// directory, its prompts the tasks' cases, its tasks the directory; the
// same directory, however named, has the same suite.
func TestWriteSuite(t *testing.T) {
	set := dataset(t)
	cache := t.TempDir()
	p, err := set.WriteSuite(cache, 2)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p) != filepath.Join(cache, "task-suites") || !strings.HasPrefix(filepath.Base(p), "ds-") || filepath.Ext(p) != ".yaml" {
		t.Errorf("suite file %s", p)
	}
	s, err := suite.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "ds" || s.PromptsFile != strings.TrimSuffix(p, ".yaml")+".jsonl" {
		t.Errorf("suite %s, prompts %s", s.Name, s.PromptsFile)
	}
	if len(s.Flags) != 1 || s.Flags[0].Name != "tasks" || !reflect.DeepEqual(s.Flags[0].Values, []string{set.Dir}) {
		t.Errorf("flags %+v", s.Flags)
	}
	b, err := os.ReadFile(s.PromptsFile)
	if err != nil {
		t.Fatal(err)
	}
	if cases := readCases(t, b); len(cases) != 2 || cases[0].Timeout != "2m0s" || cases[1].Timeout != "20s" {
		t.Errorf("cases %+v", cases)
	}

	// The same directory by a relative name.
	wd, _ := os.Getwd()
	t.Cleanup(func() { os.Chdir(wd) })
	if err := os.Chdir(filepath.Dir(set.Dir)); err != nil {
		t.Fatal(err)
	}
	rel, err := Load("ds")
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := rel.WriteSuite(cache, 2); err != nil || p2 != p {
		t.Errorf("by a relative name: %s, %v; want %s", p2, err, p)
	}
	// A relative cache directory: the suite still reads its prompts.
	relCache, err := filepath.Rel(filepath.Dir(set.Dir), cache)
	if err != nil {
		t.Fatal(err)
	}
	if p4, err := rel.WriteSuite(relCache, 2); err != nil || p4 != p {
		t.Errorf("a relative cache directory: %s, %v; want %s", p4, err, p)
	} else if s, err := suite.Load(p4, nil); err != nil {
		t.Errorf("a relative cache directory: %v", err)
	} else if _, err := os.Stat(s.PromptsFile); err != nil {
		t.Errorf("a relative cache directory: prompts %v", err)
	}
	other := dataset(t)
	if p3, err := other.WriteSuite(cache, 2); err != nil || p3 == p {
		t.Errorf("another directory of the same name: %s, %v", p3, err)
	}
	if _, err := set.WriteSuite(cache, 0); !errors.Is(err, ErrTimeoutScale) {
		t.Errorf("scale 0: %v", err)
	}
}

// A task's [user] is its case's simulated user, read back as a prompt
// case reads it.
func TestWriteCasesCarriesTheUser(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	writeTask(t, dir, "talk", "[user]\ncommand = \"./user.py\"\nmaxTurns = 4\ngoal = \"it works\"\n")
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := set.WriteCases(&b, 1); err != nil {
		t.Fatal(err)
	}
	c, err := schemas.ParsePrompt(bytes.TrimSpace(b.Bytes()))
	if err != nil {
		t.Fatalf("%s: %v", b.Bytes(), err)
	}
	if u := c.User; u == nil || !reflect.DeepEqual(u.Command, []string{filepath.Join(dir, "talk", "user.py")}) || u.MaxTurns != 4 || u.Goal != "it works" {
		t.Errorf("user %+v", c.User)
	}
}
