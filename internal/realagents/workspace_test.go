package realagents

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"harness/graders"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// TestClaudeCodeOnTheGoExample runs Claude Code on examples/workspace-go:
// through its own shell it edits calc.go in its workspace copy, and the
// tests grader (the hidden go test verifier) passes the right edit and
// fails the wrong one, naming the failing test.
func TestClaudeCodeOnTheGoExample(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	_, self, _, _ := runtime.Caller(0)
	example := filepath.Join(filepath.Dir(self), "..", "..", "examples", "workspace-go")
	g, err := graders.Load(filepath.Join(example, "tests.json"), graders.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sb, _, agent := claudeSetup(t, fakemodel.Options{})
	sb.Env = append(sb.Env, "GOCACHE="+filepath.Join(sb.Tmp, "gocache"), "GOFLAGS=-mod=mod", "PATH="+filepath.Dir(gobin)+":/usr/bin:/bin")
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Workspace = filepath.Join(example, "template")
	cfg.GraderNames = []string{g.Name()}
	cfg.Grade = func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) (*schemas.GraderResult, []schemas.GraderResult) {
		r := g.Grade(ctx, &graders.Input{Record: rec, Case: c})
		return &r, nil
	}
	edit := func(op string) string {
		return fmt.Sprintf(`bash printf 'package calc\n\nfunc Add(a, b int) int { return a %s b }\n' > calc.go && echo edited`, op)
	}
	recs := runCases(t, cfg, edit("+"), edit("-"))
	right, wrong := recs[0], recs[1]
	for _, rec := range recs {
		if rec.Error != nil || rec.Score == nil || rec.Score.Error != nil {
			t.Fatalf("%s: error %+v score %+v\n%s", rec.ID, rec.Error, rec.Score, dump(rec))
		}
		if rec.Workspace == nil || len(rec.Workspace.FileChanges) != 1 || rec.Workspace.FileChanges[0].Path != "calc.go" {
			t.Errorf("%s: workspace changes %+v", rec.ID, rec.Workspace)
		}
	}
	if !right.Score.Pass || right.Score.Score != 1 {
		t.Errorf("right edit: %+v", right.Score)
	}
	if wrong.Score.Pass || wrong.Score.Score != 0.5 {
		t.Errorf("wrong edit: %+v", wrong.Score)
	}
	var failed []string
	for _, c := range wrong.Score.Checks {
		if !c.Pass {
			failed = append(failed, c.Text+": "+fmt.Sprint(c.Evidence))
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "TestAdd: ") || !strings.Contains(failed[0], "Add(2, 2) = 0, want 4") {
		t.Errorf("failing checks %q", failed)
	}
}
