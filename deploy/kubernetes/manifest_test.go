// Package kubernetes holds the Kubernetes manifests of a sharded harness
// run; its test checks that they parse and that their shard arithmetic
// matches harness's --shard.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// job is the part of a batch/v1 Job the test reads.
type job struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		CompletionMode string `yaml:"completionMode"`
		Completions    *int   `yaml:"completions"`
		Parallelism    *int   `yaml:"parallelism"`
		Template       struct {
			Spec struct {
				RestartPolicy string `yaml:"restartPolicy"`
				Containers    []struct {
					Image   string   `yaml:"image"`
					Command []string `yaml:"command"`
					Args    []string `yaml:"args"`
					Env     []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func (j *job) env(name string) string {
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// readDocs parses every YAML document of a manifest file.
func readDocs(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", name, len(docs)+1, err)
		}
		if d == nil {
			continue
		}
		for _, key := range []string{"apiVersion", "kind", "metadata"} {
			if d[key] == nil {
				t.Errorf("%s: document %d has no %s", name, len(docs)+1, key)
			}
		}
		docs = append(docs, d)
	}
	return docs
}

// jobs returns the Jobs of a manifest file.
func jobs(t *testing.T, name string) map[string]*job {
	t.Helper()
	out := map[string]*job{}
	for _, d := range readDocs(t, name) {
		if d["kind"] != "Job" {
			continue
		}
		b, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var j job
		if err := yaml.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(j.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: job %s: want one container", name, j.Metadata.Name)
		}
		out[j.Metadata.Name] = &j
	}
	return out
}

// runScript runs a container's shell command with a stub harness that
// prints its arguments, one a line, and returns them.
func runScript(t *testing.T, j *job, env ...string) []string {
	t.Helper()
	c := j.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 2 || c.Command[0] != "/bin/sh" || c.Command[1] != "-c" || len(c.Args) != 1 {
		t.Fatalf("job %s: want command [/bin/sh -c] and one script, got %q %q", j.Metadata.Name, c.Command, c.Args)
	}
	bin := t.TempDir()
	stub := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(bin, "harness"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", c.Args[0])
	cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin"}, env...)
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("job %s script (%q): %v\n%s", j.Metadata.Name, env, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func intText(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}

// flagValue returns the value after flag in args.
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// parseShard parses I/N as harness's --shard does.
func parseShard(s string) (i, n int, err error) {
	if _, err := fmt.Sscanf(s, "%d/%d", &i, &n); err != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("--shard %q: want I/N with 1 <= I <= N", s)
	}
	return i, n, nil
}

// inShard is harness's rule (cmd/harness runflags.go, units): unit u
// (1-based over cases in file order, trials inner) belongs to shard
// ((u-1) mod N)+1.
func inShard(u, i, n int) bool { return (u-1)%n == i-1 }

func TestIndexedJob(t *testing.T) {
	shards := jobs(t, "harness-eval.yaml")["harness-eval-shards"]
	if shards == nil {
		t.Fatal("harness-eval.yaml: no Job harness-eval-shards")
	}
	spec := shards.Spec
	if spec.CompletionMode != "Indexed" {
		t.Errorf("completionMode %q, want Indexed", spec.CompletionMode)
	}
	if spec.Completions == nil || spec.Parallelism == nil || *spec.Parallelism < 1 || *spec.Parallelism > *spec.Completions {
		t.Fatalf("want completions and 1 <= parallelism <= completions, got %s and %s", intText(spec.Completions), intText(spec.Parallelism))
	}
	n := *spec.Completions
	if got := shards.env("SHARDS"); got != strconv.Itoa(n) {
		t.Errorf("SHARDS env %q, want completions %d", got, n)
	}
	if spec.Template.Spec.RestartPolicy != "Never" && spec.Template.Spec.RestartPolicy != "OnFailure" {
		t.Errorf("restartPolicy %q", spec.Template.Spec.RestartPolicy)
	}
	if img := spec.Template.Spec.Containers[0].Image; !strings.Contains(img, "REPLACE_ME") {
		t.Errorf("image %q is not the marked placeholder", img)
	}

	// Every pod index runs a distinct shard; together they cover every
	// unit exactly once.
	outputs := map[string]bool{}
	claimed := map[int]int{}
	const units = 1000
	for idx := 0; idx < n; idx++ {
		args := runScript(t, shards, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", idx))
		if args[0] != "trials" || flagValue(args, "-g") != "/input/grader.sh" || flagValue(args, "-k") != shards.env("TRIALS") {
			t.Errorf("index %d: harness %q", idx, args)
		}
		i, sn, err := parseShard(flagValue(args, "--shard"))
		if err != nil {
			t.Fatalf("index %d: %v", idx, err)
		}
		if sn != n || i != idx+1 {
			t.Errorf("index %d runs shard %d/%d, want %d/%d", idx, i, sn, idx+1, n)
		}
		out := flagValue(args, "-o")
		if want := fmt.Sprintf("/results/shard-%d.jsonl.zst", idx); out != want {
			t.Errorf("index %d writes %q, want %q", idx, out, want)
		}
		outputs[out] = true
		for u := 1; u <= units; u++ {
			if inShard(u, i, sn) {
				claimed[u]++
			}
		}
	}
	for u := 1; u <= units; u++ {
		if claimed[u] != 1 {
			t.Fatalf("unit %d is run by %d shards", u, claimed[u])
		}
	}

	// The merge Job reads exactly the shard outputs, with the same k.
	merge := jobs(t, "merge-job.yaml")["harness-eval-merge"]
	if merge == nil {
		t.Fatal("merge-job.yaml: no Job harness-eval-merge")
	}
	if got := merge.env("SHARDS"); got != strconv.Itoa(n) {
		t.Errorf("merge SHARDS %q, want %d", got, n)
	}
	args := runScript(t, merge)
	if args[0] != "merge" {
		t.Fatalf("merge job runs harness %q", args)
	}
	var inputs []string
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			break
		}
		inputs = append(inputs, a)
	}
	if len(inputs) != n {
		t.Errorf("merge reads %d files, want %d: %q", len(inputs), n, inputs)
	}
	for _, in := range inputs {
		if !outputs[in] {
			t.Errorf("merge reads %s, which no shard writes", in)
		}
	}
	if flagValue(args, "-k") != shards.env("TRIALS") || flagValue(args, "--prompts") != "/input/prompts.jsonl" {
		t.Errorf("merge flags %q", args)
	}
}

// Every manifest in the directory parses.
func TestManifestsParse(t *testing.T) {
	names, err := filepath.Glob("*.yaml")
	if err != nil || len(names) < 2 {
		t.Fatalf("manifests %v: %v", names, err)
	}
	for _, name := range names {
		if docs := readDocs(t, name); len(docs) == 0 {
			t.Errorf("%s: no documents", name)
		}
	}
}
