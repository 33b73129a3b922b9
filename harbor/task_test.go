package harbor

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
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
	task, err := Load(writeTask(t, `schema_version = "1.4"
artifacts = []

[environment]
gpus = 1
gpu_types = ["H100"]
mcp_servers = []
env = { A = "1" }

[environment.healthcheck]
command = "true"
retries = 2

[agent]
user = "agent"

[verifier]
timeout_sec = 10
retries = 3
environment_mode = "shared"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Unhonoured{
		{Field: "environment.gpu_types", Line: 6},
		{Field: "verifier.retries", Line: 19},
		{Field: "environment.gpus", Line: 5},
	}
	if !reflect.DeepEqual(task.Unhonoured, want) {
		t.Fatalf("unhonoured:\n got %v\nwant %v", task.Unhonoured, want)
	}
}

func TestEveryFieldOfHarborsSchemaIsHonouredOrNamed(t *testing.T) {
	// Harbor's schema 1.4, every field set: the ones acted on (or
	// informational) are read silently, the others named.
	task, err := Load(writeTask(t, `schema_version = "1.4"
source = "somewhere"
artifacts = ["/app/out.txt"]
multi_step_reward_strategy = "mean"

[task]
name = "org/name"
description = "d"
authors = [{ name = "A", email = "a@example.com" }]
keywords = ["k"]

[metadata]
anything = { nested = true }

[agent]
timeout_sec = 10
user = "agent"
network_mode = "public"
allowed_hosts = ["example.com"]
env = { A = "1" }

[verifier]
timeout_sec = 10
env = { B = "1" }
user = "root"
network_mode = "no-network"
allowed_hosts = []
environment_mode = "separate"

[verifier.environment]
cpus = 2

[[verifier.collect]]
command = "true"

[solution]
env = { C = "1" }

[environment]
build_timeout_sec = 60
docker_image = "localhost/x:1"
os = "linux"
cpus = 1
memory_mb = 512
storage_mb = 1024
gpus = 0
gpu_types = ["T4"]
tpu = { type = "v6e", topology = "2x2" }
allow_internet = true
network_mode = "public"
allowed_hosts = ["example.com"]
env = { D = "1" }
skills_dir = "/skills"
workdir = "/app"
mcp_servers = [{ name = "s", url = "http://localhost:1" }]

[environment.healthcheck]
command = "true"
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range task.Unhonoured {
		got = append(got, u.Field)
	}
	sort.Strings(got)
	want := []string{
		"environment.gpu_types", "environment.tpu",
		"verifier.collect", "verifier.environment",
		"verifier.environment_mode",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("unhonoured:\n got %q\nwant %q", got, want)
	}
}

func TestListsCountWhenNotEmpty(t *testing.T) {
	task, err := Load(writeTask(t, `version = "1.0"
artifacts = ["/app/out.txt"]

[[environment.mcp_servers]]
name = "one"
transport = "stdio"
command = "x"

[[environment.mcp_servers]]
name = "two"
url = "http://localhost:1"
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Unhonoured) != 0 || len(task.Config.Artifacts) != 1 || len(task.Config.MCPServers) != 2 {
		t.Fatalf("unhonoured %v, artifacts %v, MCP servers %v", task.Unhonoured, task.Config.Artifacts, task.Config.MCPServers)
	}
}

// artifacts are paths or tables {source, destination}; a bad one names
// its line and entry.
func TestArtifactsAreRead(t *testing.T) {
	task, err := Load(writeTask(t, `version = "1.0"
artifacts = ["/app/out.txt", { source = "/app/logs/", destination = "run/logs" }]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Artifact{{Source: "/app/out.txt", Destination: "out.txt"}, {Source: "/app/logs", Destination: "run/logs"}}
	if !reflect.DeepEqual(task.Config.Artifacts, want) {
		t.Fatalf("artifacts %+v", task.Config.Artifacts)
	}
	for _, tc := range []struct{ toml, want string }{
		{`artifacts = ["app/out.txt"]`, `task.toml:2: artifacts[1]: source must be an absolute path`},
		{`artifacts = [{ source = "/a", destination = "../x" }]`, `task.toml:2: artifacts[1].destination: must be a relative path`},
		{`artifacts = [{ source = "/a", dest = "x" }]`, `task.toml:2: artifacts[1].dest: unknown key`},
		{`artifacts = "/a"`, `task.toml:2: artifacts: must be a list`},
	} {
		_, err := Load(writeTask(t, "version = \"1.0\"\n"+tc.toml+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.toml, err, tc.want)
		}
	}
}

func TestUnhonouredSummaryNamesEachFieldOnce(t *testing.T) {
	tasks := []*Task{
		{Name: "a", Unhonoured: []Unhonoured{{Field: "environment.healthcheck", Line: 3}, {Field: "agent.user", Line: 9}}},
		{Name: "b", Unhonoured: []Unhonoured{{Field: "environment.healthcheck", Line: 4}}},
		{Name: "c"},
		{Name: "d", Unhonoured: []Unhonoured{{Field: "environment.healthcheck", Line: 2}}},
	}
	want := "agent.user (in a), environment.healthcheck (in 3 tasks)"
	if got := UnhonouredSummary(tasks); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := UnhonouredSummary(tasks[2:3]); got != "" {
		t.Fatalf("no fields: %q", got)
	}
}

func TestSyntaxErrorNamesItsLineAndTable(t *testing.T) {
	for _, tc := range []struct {
		name, toml, want string
	}{
		// A malformed table header after a table: the header's line and
		// table, not the line after it and the table before.
		{"header", "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60\n[environment\ncpus = 1\n", "task.toml:5: table environment: expected '.' or ']' to end table name"},
		// A key without = in the middle of a table: the key, not the table.
		{"no equals", "[agent]\ntimeout_sec = 10\n\n[verifier]\ntimeout_sec 60\nuser = \"x\"\n\n[environment]\ncpus = 1\n", "task.toml:5: verifier.timeout_sec: expected '.' or '='"},
		{"trailing junk", "[verifier]\ntimeout_sec = 6 0\nenv = {}\n", "task.toml:2: verifier.timeout_sec: expected a top-level item to end"},
		// An inline table left open: the key it belongs to, and where the
		// parser noticed.
		{"open inline table", "[verifier]\ntimeout_sec = 60\nenv = { A = \"x\"\n\n[environment]\ncpus = 1\n", "task.toml:3: verifier.env: expected a comma or an inline table terminator '}', but got '[' instead (on line 5)"},
		{"missing value", "[agent]\ntimeout_sec = \n[verifier]\n", "task.toml:2: agent.timeout_sec: expected value but found '\\n' instead"},
	} {
		_, err := Load(writeTask(t, tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s", tc.name, err, tc.want)
		}
	}
}

func TestEnvTablesResolveHostVariablesAsHarborDoes(t *testing.T) {
	dir := writeTask(t, `schema_version = "1.1"

[environment]
env = { MODE = "strict", NAME = "${HOST_NAME:-Ada}", KEY = "${HOST_KEY}", EMPTY = "${HOST_EMPTY:-x}", KEPT = "a ${HOST_KEY} b" }

[verifier]
env = { MODE = "verify", CHECK = "${HOST_CHECK:-}" }

[solution]
env = { SOLVER = "1" }

[agent]
env = { AGENT = "yes" }
`)
	host := map[string]string{"HOST_KEY": "k1", "HOST_EMPTY": ""}
	ld := &Loader{LookupEnv: func(k string) (string, bool) { v, ok := host[k]; return v, ok }}
	task, err := ld.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The whole value is a template or a literal; a variable set to ""
	// is "", not the default.
	base := map[string]string{"MODE": "strict", "NAME": "Ada", "KEY": "k1", "EMPTY": "", "KEPT": "a ${HOST_KEY} b"}
	if !reflect.DeepEqual(task.Config.EnvironmentEnv, base) {
		t.Errorf("environment.env = %v", task.Config.EnvironmentEnv)
	}
	verifier := maps.Clone(base)
	verifier["MODE"], verifier["CHECK"] = "verify", ""
	if !reflect.DeepEqual(task.VerifierEnv(), verifier) {
		t.Errorf("verifier env = %v", task.VerifierEnv())
	}
	solution := maps.Clone(base)
	solution["SOLVER"] = "1"
	if !reflect.DeepEqual(task.SolutionEnv(), solution) {
		t.Errorf("solution env = %v", task.SolutionEnv())
	}
	agent := maps.Clone(base)
	agent["AGENT"] = "yes"
	if !reflect.DeepEqual(task.AgentEnv(), agent) {
		t.Errorf("agent env = %v", task.AgentEnv())
	}
	if len(task.Unhonoured) != 0 {
		t.Errorf("unhonoured %v", task.Unhonoured)
	}
	// An unset variable without a default is an error before anything
	// runs, naming the file, line, field and variable.
	delete(host, "HOST_KEY")
	_, err = ld.Load(dir)
	if err == nil || !strings.Contains(err.Error(), "task.toml:4: environment.env.KEY: ${HOST_KEY}: HOST_KEY is not set on this machine") {
		t.Fatalf("unset: %v", err)
	}
}

func TestSetEnvOverridesByName(t *testing.T) {
	got := SetEnv([]string{"PATH=/bin", "A=1"}, map[string]string{"A": "2", "B": "3"})
	if want := []string{"PATH=/bin", "A=2", "B=3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestNetworkModeSaysWhatAllowInternetSaid(t *testing.T) {
	for mode, want := range map[string]bool{"public": true, "no-network": false, "allowlist": false} {
		task, err := Load(writeTask(t, "[environment]\nallow_internet = true\nnetwork_mode = \""+mode+"\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if task.Config.AllowInternet != want {
			t.Errorf("%s: allow internet %v", mode, task.Config.AllowInternet)
		}
		if unh := fmt.Sprint(task.Unhonoured); strings.Contains(unh, "environment.network_mode") {
			t.Errorf("%s: unhonoured %s", mode, unh)
		}
	}
}

// TestAllowlistHostsAreRead: network_mode = "allowlist" keeps the
// internet closed and reads allowed_hosts (HOST, HOST:PORT) as the
// egress allowlist's rules; another mode's allowed_hosts give none; a bad
// entry names the file, line and field.
func TestAllowlistHostsAreRead(t *testing.T) {
	task, err := Load(writeTask(t, "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\", \"127.0.0.1:8080\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range task.Config.AllowedHosts {
		got = append(got, r.String())
	}
	if want := []string{"pypi.org", "127.0.0.1:8080"}; !reflect.DeepEqual(got, want) {
		t.Errorf("allowed hosts %q, want %q", got, want)
	}
	if task.Config.AllowInternet || len(task.Unhonoured) != 0 {
		t.Errorf("allow internet %v, unhonoured %v", task.Config.AllowInternet, task.Unhonoured)
	}
	task, err = Load(writeTask(t, "[environment]\nnetwork_mode = \"public\"\nallowed_hosts = [\"pypi.org\"]\n"))
	if err != nil || len(task.Config.AllowedHosts) != 0 || !task.Config.AllowInternet {
		t.Errorf("public with allowed_hosts: %v, hosts %v", err, task.Config.AllowedHosts)
	}
	// The agent's own network_mode is the agent's network, over the
	// environment's.
	for _, tc := range []struct {
		toml     string
		internet bool
		hosts    string
	}{
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n", false, "[a.org]"},
		{"[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"b.org:8443\"]\n[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n", false, "[b.org:8443]"},
		{"[agent]\nnetwork_mode = \"public\"\n[environment]\nnetwork_mode = \"no-network\"\n", true, "[]"},
		{"[agent]\nnetwork_mode = \"no-network\"\n[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n", false, "[]"},
	} {
		task, err := Load(writeTask(t, tc.toml))
		if err != nil {
			t.Fatal(err)
		}
		internet, hosts := task.Config.AgentNetwork()
		if internet != tc.internet || fmt.Sprint(hosts) != tc.hosts || len(task.Unhonoured) != 0 {
			t.Errorf("%q: agent network %v %v (unhonoured %v), want %v %s", tc.toml, internet, hosts, task.Unhonoured, tc.internet, tc.hosts)
		}
	}
	for _, tc := range []struct{ toml, want string }{
		{"[agent]\nnetwork_mode = \"closed\"\n", "task.toml:2: agent.network_mode: must be public, no-network or allowlist"},
		{"[verifier]\nnetwork_mode = \"closed\"\n", "task.toml:2: verifier.network_mode: must be public, no-network or allowlist"},
		{"[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\", 5]\n", "task.toml:3: verifier.allowed_hosts: entry 2 must be a string"},
		{"[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"\"]\n", "task.toml:3: agent.allowed_hosts: entry 1 \"\": "},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = \"pypi.org\"\n", "task.toml:3: environment.allowed_hosts: must be a list of hosts"},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"ok.org\", 5]\n", "task.toml:3: environment.allowed_hosts: entry 2 must be a string"},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"http://x.org/\"]\n", "task.toml:3: environment.allowed_hosts: entry 1 \"http://x.org/\": "},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org,b.org\"]\n", "task.toml:3: environment.allowed_hosts: entry 1 \"a.org,b.org\": one host per entry"},
	} {
		_, err := Load(writeTask(t, tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant …%s", tc.toml, err, tc.want)
		}
	}
}

// Each phase of a trial has its network: solve.sh the agent's, the
// verifier [verifier]'s own over the environment's.
func TestPhaseNetworks(t *testing.T) {
	for _, tc := range []struct {
		toml                         string
		solution, verifier           string
		solutionHosts, verifierHosts string
	}{
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n", "false", "false", "[a.org]", "[a.org]"},
		{"[environment]\nnetwork_mode = \"no-network\"\n", "false", "false", "[]", "[]"},
		{"[environment]\nnetwork_mode = \"public\"\n", "true", "true", "[]", "[]"},
		{"[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"b.org\"]\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"c.org:8080\"]\n[environment]\nnetwork_mode = \"no-network\"\n", "false", "false", "[b.org]", "[c.org:8080]"},
		{"[verifier]\nnetwork_mode = \"public\"\n[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n", "false", "true", "[a.org]", "[]"},
		{"[verifier]\nnetwork_mode = \"no-network\"\n[environment]\nallow_internet = true\n", "true", "false", "[]", "[]"},
	} {
		task, err := Load(writeTask(t, tc.toml))
		if err != nil {
			t.Fatal(err)
		}
		si, sh := task.Config.Network(PhaseSolution)
		vi, vh := task.Config.Network(PhaseVerifier)
		if fmt.Sprint(si) != tc.solution || fmt.Sprint(vi) != tc.verifier || fmt.Sprint(sh) != tc.solutionHosts || fmt.Sprint(vh) != tc.verifierHosts || len(task.Unhonoured) != 0 {
			t.Errorf("%q: solution %v %v, verifier %v %v (unhonoured %v)", tc.toml, si, sh, vi, vh, task.Unhonoured)
		}
	}
}

func TestWhatCannotRunIsRefused(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[environment]\nos = \"windows\"\n", "task.toml:2: environment.os: \"windows\": only Linux images run here"},
		{"[environment]\nnetwork_mode = \"none\"\n", "task.toml:2: environment.network_mode: must be public, no-network or allowlist"},
	} {
		_, err := Load(writeTask(t, tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant …%s", tc.toml, err, tc.want)
		}
	}
}

func TestDockerImageIsUsedAsHarborDoes(t *testing.T) {
	// With a Dockerfile too: the prebuilt image, unless forced to build.
	dir := writeTask(t, "[environment]\ndocker_image = \"localhost/x:1\"\n")
	task, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "environment")
	if task.Image != "localhost/x:1" || task.Prebuilt != "localhost/x:1" || task.Build != env {
		t.Fatalf("task %+v", task)
	}
	if first, fallback := task.ImageChoice(false); first != "localhost/x:1" || fallback != env {
		t.Errorf("choice: %q, then %q", first, fallback)
	}
	if first, fallback := task.ImageChoice(true); first != env || fallback != "" {
		t.Errorf("forced: %q, then %q", first, fallback)
	}
	// Only a Dockerfile, only an image.
	task, err = Load(writeTask(t, "version = \"1.0\"\n"))
	if first, fallback := task.ImageChoice(false); err != nil || first != task.Build || fallback != "" {
		t.Errorf("dockerfile only: %q, %q, %v", first, fallback, err)
	}
	dir = writeTask(t, "[environment]\ndocker_image = \"localhost/x:1\"\n")
	os.RemoveAll(filepath.Join(dir, "environment"))
	task, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first, fallback := task.ImageChoice(true); first != "localhost/x:1" || fallback != "" {
		t.Errorf("image only, forced: %q, %q", first, fallback)
	}
}

func TestADirectoryWithoutTaskTomlIsNamed(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "instruction.md"), []byte("x"), 0o644)
	if _, err := Load(dir); err == nil || err.Error() != dir+" is not a Harbor task directory: it has no task.toml" {
		t.Errorf("Load: %v", err)
	}
	if _, err := LoadDataset(dir); err == nil || err.Error() != dir+" is not a Harbor task directory (it has no task.toml) nor a dataset of them (no subdirectory has a task.toml)" {
		t.Errorf("LoadDataset: %v", err)
	}
	if IsDataset(dir) {
		t.Error("IsDataset")
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

func TestComposeMainEnvironmentIsHonoured(t *testing.T) {
	dir := writeTask(t, "[environment]\nenv = { FROM_TOML = \"t\", SHARED = \"toml\" }\n")
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte(`# Harbor merges this over its own main service.
version: "3.8"
x-note: anything
services:
  main:
    build:
      context: .
      dockerfile: Dockerfile
    environment:
      LITERAL: "plain $$HOME"
      FROM_HOST: ${HOST_VAR:-fallback}
      FROM_TOML_VAR: ${FROM_TOML}
      PASSED:
      MISSING:
      SHARED: compose
      PORT: 8080
`), 0o644)
	host := map[string]string{"PASSED": "p"}
	task, err := (&Loader{LookupEnv: func(k string) (string, bool) { v, ok := host[k]; return v, ok }}).Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if task.Build != filepath.Join(dir, "environment", "Dockerfile") || task.Image != task.Build {
		t.Errorf("build %q, image %q", task.Build, task.Image)
	}
	want := map[string]string{"LITERAL": "plain $HOME", "FROM_HOST": "fallback", "FROM_TOML_VAR": "t", "PASSED": "p", "SHARED": "compose", "PORT": "8080"}
	if !reflect.DeepEqual(task.ComposeEnv, want) {
		t.Errorf("compose env %v", task.ComposeEnv)
	}
	// task.toml's env is set over the container's, as docker exec -e is.
	if env := task.VerifierEnv(); env["SHARED"] != "toml" || env["FROM_TOML"] != "t" || env["PORT"] != "8080" {
		t.Errorf("verifier env %v", env)
	}
	// The list form.
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte("services:\n  main:\n    environment:\n      - A=1\n      - PASSED\n      - NONE\n"), 0o644)
	task, err = (&Loader{LookupEnv: func(k string) (string, bool) { v, ok := host[k]; return v, ok }}).Load(dir)
	if err != nil || !reflect.DeepEqual(task.ComposeEnv, map[string]string{"A": "1", "PASSED": "p"}) || task.Build != filepath.Join(dir, "environment") {
		t.Fatalf("list: %v %+v", err, task)
	}
}

func TestComposeWhatCannotRunIsRefusedByName(t *testing.T) {
	dir := writeTask(t, "version = \"1.0\"\n")
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte(`services:
  main:
    environment:
      A: "1"
    ports:
      - "8080:80"
    volumes:
      - ./data:/data
    build:
      context: .
      args:
        X: "1"
  db:
    image: postgres:16
volumes:
  data: {}
`), 0o644)
	_, err := Load(dir)
	want := "docker-compose.yaml: services.main.ports (line 5), services.main.volumes (line 7), services.main.build.args (line 11), services.db (line 13; a service beside main: there is no container network between services here), volumes (line 15): cannot be honoured here (of a compose file, only the main service's environment, build and image are); run this task with Harbor and Docker"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant …%s", err, want)
	}
	// A lone service that is not main is a sidecar beside Harbor's main.
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte("services:\n  app:\n    build: .\n"), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "services.app (line 2; a service beside main") {
		t.Fatalf("app: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "environment/docker-compose.yaml"), []byte("services:\n  main:\n    environment:\n      A: ${NOPE:?set NOPE first}\n"), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "docker-compose.yaml:4: services.main.environment: A: NOPE: set NOPE first") {
		t.Fatalf("required variable: %v", err)
	}
}

func TestInterpolateAsDockerCompose(t *testing.T) {
	vars := map[string]string{"SET": "v", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"$SET/${SET}":                            "v/v",
		"$$SET":                                  "$SET",
		"${UNSET}":                               "",
		"${UNSET:-d} ${EMPTY:-d}":                "d d",
		"${UNSET-d} ${EMPTY-d}":                  "d ",
		"${SET:+alt} ${EMPTY:+alt} ${EMPTY+alt}": "alt  alt",
		"cost: 5$":                               "cost: 5$",
	} {
		if got, err := interpolate(in, lookup); err != nil || got != want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${UNSET?no}", "${EMPTY:?no}", "${SET", "${1X}"} {
		if _, err := interpolate(in, lookup); err == nil {
			t.Errorf("interpolate(%q): no error", in)
		}
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
	if _, err := LoadDataset(t.TempDir()); err == nil || !strings.Contains(err.Error(), "nor a dataset of them") {
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
	want := []string{"broken-reference", "column-sum", "csv-to-json", "env-vars", "fix-greeting", "fix-shout", "prebuilt-image", "quiet-bench", "text-transforms"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("tasks %v, want %v", names, want)
	}
}

// A key Harbor's schema does not have is listed with the key probably
// meant; a misspelt table holding a table's fields is an error naming the
// line, the table meant and the fields it would have set.
func TestMistypedKeysAndTables(t *testing.T) {
	task, err := Load(writeTask(t, `version = "1.0"

[agent]
timout_sec = 30

[verifer]
note = "not a field of verifier"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Unhonoured{{Field: "agent.timout_sec", Line: 4, Suggest: "agent.timeout_sec"}, {Field: "verifer", Line: 6, Suggest: "verifier"}}
	if !reflect.DeepEqual(task.Unhonoured, want) {
		t.Fatalf("unhonoured:\n got %v\nwant %v", task.Unhonoured, want)
	}
	if got := task.Unhonoured[0].String(); got != "agent.timout_sec (line 4; did you mean agent.timeout_sec?)" {
		t.Errorf("String() = %q", got)
	}

	_, err = Load(writeTask(t, `version = "1.0"

[enviroment]
docker_image = "img"
memory_mb = 512
`))
	if err == nil || !strings.HasSuffix(err.Error(), "task.toml:3: enviroment: not a task.toml table: did you mean [environment]? It holds docker_image, memory_mb, which [environment] sets and [enviroment] leaves unread") {
		t.Errorf("misspelt table: %v", err)
	}
}
