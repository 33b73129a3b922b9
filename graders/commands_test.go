package graders

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunsCommands: graders that start processes, alone or inside others,
// say so; graders that run in harness itself do not.
func TestRunsCommands(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "grade.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho '{\"pass\":true}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	contains := map[string]any{"type": "contains", "value": "x"}
	judge := map[string]any{"type": "llm-judge", "prompt": "Is {{response}} right?", "model": "m", "provider": "openai", "apiKeyEnv": "K"}
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		want bool
	}{
		{"assertions on the record", map[string]any{"assert": []any{contains}}, false},
		{"a command assertion", map[string]any{"assert": []any{contains, map[string]any{"type": "command-succeeds", "command": "true"}}}, true},
		{"a judge", judge, false},
		{"an executable", map[string]any{"type": "exec", "path": exe}, true},
		{"a script", map[string]any{"command": []any{exe}}, true},
		{"a test suite", map[string]any{"command": "go test -json ./...", "report": "go-test-json"}, true},
		{"a composite with an executable", map[string]any{"graders": []any{map[string]any{"assert": []any{contains}}, map[string]any{"type": "exec", "path": exe}}}, true},
		{"a composite of assertions", map[string]any{"graders": []any{map[string]any{"assert": []any{contains}}}}, false},
		{"a case's command", map[string]any{"cases": map[string]any{"c1": []any{contains}, "c2": []any{map[string]any{"type": "exec", "path": exe}}}}, true},
		{"cases of assertions", map[string]any{"cases": map[string]any{"c1": []any{contains}}, "default": []any{contains}}, false},
	} {
		g, err := FromConfig(tc.cfg, "g.yaml", dir, Options{Getenv: func(string) string { return "key" }})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := RunsCommands(g); got != tc.want {
			t.Errorf("%s: RunsCommands = %v, want %v", tc.name, got, tc.want)
		}
	}
	one, err := Load(exe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !RunsCommands(Many([]Grader{one})) || RunsCommands(Many(nil)) {
		t.Error("Many: an executable runs commands, no grader none")
	}
	// One whose notes are said (as the CLI loads them) still does.
	warned, err := Load(exe, Options{Warn: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	if !RunsCommands(warned) {
		t.Error("an executable whose notes are said does not run commands")
	}
}
