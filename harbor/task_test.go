package harbor

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeTask makes a task directory with the given task.toml.
func writeTask(t *testing.T, toml string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my-task")
	for f, body := range map[string]string{
		"task.toml":              toml,
		"instruction.md":         "Do the thing.\n",
		"environment/Dockerfile": "FROM localhost/harness-base:bookworm\n",
		"tests/test.sh":          "echo 1 > /logs/verifier/reward.txt\n",
	} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	return dir
}

func TestLoadReadsEveryHonouredField(t *testing.T) {
	dir := writeTask(t, `version = "1.0"

[metadata]
author_name = "someone"
tags = ["a", "b"]

[verifier]
timeout_sec = 90.5
env = { API = "x", N = 3 }

[agent]
timeout_sec = 300

[environment]
build_timeout_sec = 120.0
cpus = 2
memory = "2G"
storage_mb = 4096
allow_internet = false
workdir = "/workdir"

[solution]
env = { MODE = "ref" }
`)
	task, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := task.Config
	if c.VerifierTimeout != 90500*time.Millisecond || c.AgentTimeout != 300*time.Second || c.BuildTimeout != 120*time.Second {
		t.Errorf("timeouts %v %v %v", c.VerifierTimeout, c.AgentTimeout, c.BuildTimeout)
	}
	if c.CPUs != 2 || c.MemoryMB != 2048 || c.StorageMB != 4096 || c.AllowInternet || c.Workdir != "/workdir" {
		t.Errorf("environment %+v", c)
	}
	if !reflect.DeepEqual(c.VerifierEnv, map[string]string{"API": "x", "N": "3"}) || c.SolutionEnv["MODE"] != "ref" {
		t.Errorf("env %v %v", c.VerifierEnv, c.SolutionEnv)
	}
	if c.Metadata["author_name"] != "someone" {
		t.Errorf("metadata %v", c.Metadata)
	}
	if len(task.Unhonoured) != 0 {
		t.Errorf("unhonoured %v", task.Unhonoured)
	}
	if task.Image != filepath.Join(dir, "environment") || task.Name != "my-task" || task.Instruction != "Do the thing.\n" {
		t.Errorf("task %+v", task)
	}
}

func TestLoadDefaults(t *testing.T) {
	task, err := Load(writeTask(t, "version = \"1.0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := task.Config
	if c.AgentTimeout != DefaultAgentTimeout || c.VerifierTimeout != DefaultVerifierTimeout || c.MemoryMB != DefaultMemoryMB || c.StorageMB != DefaultStorageMB || c.BuildTimeout != DefaultBuildTimeout || !c.AllowInternet || c.CPUs != 1 {
		t.Errorf("defaults %+v", c)
	}
}

func TestUnhonouredFieldsAreListedOnceWithTheirLine(t *testing.T) {
	task, err := Load(writeTask(t, `version = "1.0"

[environment]
gpus = 1
gpu_types = ["H100"]

[[environment.mcp_servers]]
name = "one"
command = "x"

[[environment.mcp_servers]]
name = "two"

[verifier]
timeout_sec = 10
retries = 3
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"environment.gpu_types (line 5)",
		"environment.mcp_servers (line 7)",
		"verifier.retries (line 16)",
		"environment.gpus = 1 (line 4): no GPUs are given to trials",
	}
	if !reflect.DeepEqual(task.Unhonoured, want) {
		t.Fatalf("unhonoured:\n got %q\nwant %q", task.Unhonoured, want)
	}
}

func TestTaskTomlErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		toml, want string
	}{
		{"[verifier]\ntimeout_sec = \"soon\"\n", "task.toml:2: verifier.timeout_sec: must be a number"},
		{"[agent]\n\ntimeout_sec = -5\n", "task.toml:3: agent.timeout_sec: must be a positive number"},
		{"[environment]\nmemory = \"lots\"\n", `task.toml:2: environment.memory: "lots" is not a size`},
		{"[environment]\nallow_internet = \"no\"\n", "task.toml:2: environment.allow_internet: must be true or false"},
		{"[environment]\nworkdir = \"app\"\n", "task.toml:2: environment.workdir: must be an absolute path"},
		{"verifier = 3\n", "task.toml:1: verifier: must be a table"},
		{"[verifier]\nenv = \"A=1\"\n", "task.toml:2: verifier.env: must be a table of variables"},
		{"[agent]\ntimeout_sec = = 3\n", "task.toml:2: agent.timeout_sec:"},
	} {
		_, err := Load(writeTask(t, tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "my-task") {
			t.Errorf("%q:\n got %v\nwant …%s", tc.toml, err, tc.want)
		}
	}
}

func TestComposeWithOtherServicesIsRefused(t *testing.T) {
	dir := writeTask(t, "version = \"1.0\"\n")
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte("services:\n  main:\n    build: .\n  db:\n    image: postgres:16\n"), 0o644)
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "2 services (db, main): only a single-service environment") || !strings.Contains(err.Error(), "docker-compose.yaml") {
		t.Fatalf("err = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte("services:\n  main:\n    build:\n      context: .\n      dockerfile: Dockerfile\n"), 0o644)
	task, err := Load(dir)
	if err != nil || task.Image != filepath.Join(dir, "environment", "Dockerfile") {
		t.Fatalf("single service: %v, %+v", err, task)
	}
}

func TestMissingPartsAreNamed(t *testing.T) {
	dir := writeTask(t, "version = \"1.0\"\n")
	os.Remove(filepath.Join(dir, "tests/test.sh"))
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "tests/test.sh is missing") {
		t.Errorf("no test.sh: %v", err)
	}
	dir = writeTask(t, "version = \"1.0\"\n")
	os.RemoveAll(filepath.Join(dir, "environment"))
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no environment/Dockerfile and no docker_image") {
		t.Errorf("no environment: %v", err)
	}
	dir = writeTask(t, "docker_image = \"ghcr.io/x/y:1\"\n")
	os.RemoveAll(filepath.Join(dir, "environment"))
	if task, err := Load(dir); err != nil || task.Image != "ghcr.io/x/y:1" {
		t.Errorf("docker_image: %v", err)
	}
}

func TestLoadDatasetReportsEveryBadTask(t *testing.T) {
	ds := t.TempDir()
	good := writeTask(t, "version = \"1.0\"\n")
	os.Rename(good, filepath.Join(ds, "good"))
	bad1 := writeTask(t, "[agent]\ntimeout_sec = \"x\"\n")
	os.Rename(bad1, filepath.Join(ds, "bad1"))
	bad2 := writeTask(t, "[verifier]\ntimeout_sec = \"y\"\n")
	os.Rename(bad2, filepath.Join(ds, "bad2"))
	_, err := LoadDataset(ds)
	if err == nil || !strings.Contains(err.Error(), filepath.Join("bad1", "task.toml")+":2") || !strings.Contains(err.Error(), filepath.Join("bad2", "task.toml")+":2") {
		t.Fatalf("err = %v", err)
	}
	os.RemoveAll(filepath.Join(ds, "bad1"))
	os.RemoveAll(filepath.Join(ds, "bad2"))
	tasks, err := LoadDataset(ds)
	if err != nil || len(tasks) != 1 || tasks[0].Name != "good" {
		t.Fatalf("%v %v", tasks, err)
	}
	if _, err := LoadDataset(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no task directories") {
		t.Fatalf("empty: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"2G": 2048, "512M": 512, "1.5GiB": 1536, "2048": 2048, "10g": 10240, "1T": 1 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestTestdataTasksLoad(t *testing.T) {
	tasks, err := LoadDataset("../testdata/tasks")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, task := range tasks {
		names = append(names, task.Name)
		if len(task.Unhonoured) != 0 {
			t.Errorf("%s: unhonoured %v", task.Name, task.Unhonoured)
		}
	}
	want := []string{"broken-reference", "column-sum", "csv-to-json", "fix-greeting", "fix-shout", "quiet-bench", "text-transforms"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("tasks %v, want %v", names, want)
	}
}
