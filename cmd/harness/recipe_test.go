package main

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docBlock returns the first fenced block of the given language after the
// heading in the markdown file.
func docBlock(t *testing.T, file, heading, lang string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s: no heading %q", file, heading)
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	if !ok {
		t.Fatalf("%s: no %s block under %q", file, lang, heading)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: the %s block under %q does not end", file, lang, heading)
	}
	return block
}

// TestCIMatrixRecipeSharesKey checks the GitHub Actions recipe of
// scale-out.md: every job writes the shared record key from the
// repository's secret before its harness step, and that step (and only a
// harness step) names the file, so the shards of different runners merge.
// testdata/script/ci_matrix.txtar runs the same commands.
func TestCIMatrixRecipeSharesKey(t *testing.T) {
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				Run  string            `yaml:"run"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	block := docBlock(t, "../../docs/scale-out.md", "## A CI matrix", "yaml")
	if err := yaml.Unmarshal([]byte(block), &wf); err != nil {
		t.Fatalf("scale-out.md, A CI matrix: %v", err)
	}
	const writeKey = `umask 077 && printf '%s\n' "$HARNESS_RECORD_KEY" > "$RUNNER_TEMP/record.key"`
	for _, name := range []string{"shard", "merge"} {
		job, ok := wf.Jobs[name]
		if !ok {
			t.Fatalf("no job %q in the recipe", name)
		}
		wrote, ran := false, false
		for i, st := range job.Steps {
			run := strings.TrimSpace(st.Run)
			switch {
			case run == writeKey:
				if st.Env["HARNESS_RECORD_KEY"] != "${{ secrets.HARNESS_RECORD_KEY }}" {
					t.Errorf("job %s step %d writes the key but its env gives it %q", name, i+1, st.Env["HARNESS_RECORD_KEY"])
				}
				wrote = true
			case strings.HasPrefix(run, "harness trials") || strings.HasPrefix(run, "harness merge"):
				ran = true
				if !wrote {
					t.Errorf("job %s step %d runs harness before the key is written", name, i+1)
				}
				if got := st.Env["HARNESS_RECORD_KEY_FILE"]; got != "${{ runner.temp }}/record.key" {
					t.Errorf("job %s step %d: HARNESS_RECORD_KEY_FILE = %q, want the file the key step writes", name, i+1, got)
				}
				if _, ok := st.Env["HARNESS_RECORD_KEY"]; ok {
					t.Errorf("job %s step %d hands the secret itself to harness (and its agent)", name, i+1)
				}
			}
		}
		if !ran {
			t.Errorf("job %s runs no harness step", name)
		}
	}
	script, err := os.ReadFile("../../testdata/script/ci_matrix.txtar")
	if err != nil {
		t.Fatal(err)
	}
	want := "exec sh -c '" + strings.ReplaceAll(writeKey, "'", "''") + "'"
	if n := strings.Count(string(script), want); n != 3 {
		t.Errorf("ci_matrix.txtar runs the recipe's key step %d times, want 3 (two shard runners and the merge)", n)
	}
}

// docBlocks returns the fenced blocks of the given language in the
// section of the markdown file under heading (up to the next "## ").
func docBlocks(t *testing.T, file, heading, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s: no heading %q", file, heading)
	}
	rest, _, _ = strings.Cut(rest, "\n## ")
	var blocks []string
	for {
		var block string
		_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
		if !ok {
			return blocks
		}
		block, rest, ok = strings.Cut(rest, "```")
		if !ok {
			t.Fatalf("%s: a %s block under %q does not end", file, lang, heading)
		}
		blocks = append(blocks, block)
	}
}

// TestPRRecipeRunsAsDocumented checks that testdata/script/pr_recipe.txtar
// runs the harness commands of the pull-request recipe in suite.md, and
// that its suite has the recipe's baseline and gate.
func TestPRRecipeRunsAsDocumented(t *testing.T) {
	blocks := docBlocks(t, "../../docs/suite.md", "## The pull-request recipe", "yaml")
	if len(blocks) != 2 {
		t.Fatalf("the recipe has %d yaml blocks, want the suite and the workflow", len(blocks))
	}
	script, err := os.ReadFile("../../testdata/script/pr_recipe.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Agents map[string]any `yaml:"agents"`
		Gates  map[string]any `yaml:"gates"`
	}
	var tested struct {
		Agents map[string]any `yaml:"agents"`
		Gates  map[string]any `yaml:"gates"`
	}
	if err := yaml.Unmarshal([]byte(blocks[0]), &doc); err != nil {
		t.Fatalf("the recipe's suite: %v", err)
	}
	_, suiteText, _ := strings.Cut(string(script), "-- evals/suite.yaml --\n")
	if err := yaml.Unmarshal([]byte(suiteText), &tested); err != nil {
		t.Fatalf("pr_recipe.txtar's suite: %v", err)
	}
	if doc.Agents["main"] != tested.Agents["main"] {
		t.Errorf("the baseline agent: recipe %v, test %v", doc.Agents["main"], tested.Agents["main"])
	}
	for _, k := range []string{"baseline", "max-regression"} {
		if doc.Gates[k] != tested.Gates[k] {
			t.Errorf("gates.%s: recipe %v, test %v", k, doc.Gates[k], tested.Gates[k])
		}
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(blocks[1]), &wf); err != nil {
		t.Fatalf("the recipe's workflow: %v", err)
	}
	n := 0
	for _, job := range wf.Jobs {
		for _, st := range job.Steps {
			for _, line := range strings.Split(st.Run, "\n") {
				line = strings.TrimSpace(line)
				if !strings.HasPrefix(line, "harness ") || strings.HasPrefix(line, "harness install") {
					continue
				}
				n++
				if !strings.Contains(string(script), "exec "+line+"\n") {
					t.Errorf("pr_recipe.txtar does not run the recipe's %q", line)
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("the recipe runs %d harness commands, want 2 (main's run, the pull request's)", n)
	}
}
