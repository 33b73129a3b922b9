package realagents

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"harness/capture"
	"harness/harbor"
	"harness/image"
	"harness/sandbox/egress"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// TestClaudeCodeSolvesATaskInItsImage runs Claude Code, installed on the
// host, inside the image of the testdata editing task (fix-greeting),
// which has no internet: it reaches its fake model through the egress
// allowlist, its own Bash tool fixes /app/greet.py in the image, and the
// task's verifier scores the layer it left 1.
func TestClaudeCodeSolvesATaskInItsImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil || exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run() != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			t.Fatal("podman or the task base image is missing (scripts/test installs podman and runs scripts/build-base-image)")
		}
		t.Skip("podman or the task base image is missing")
	}
	task, err := harbor.Load("../../testdata/tasks/fix-greeting")
	if err != nil {
		t.Fatal(err)
	}
	if task.Config.AllowInternet {
		t.Fatal("fix-greeting should have allow_internet = false")
	}
	store := &image.Store{Dir: filepath.Join(t.TempDir(), "images")}
	img, err := store.Resolve(context.Background(), task.Image)
	if err != nil {
		t.Fatal(err)
	}
	sb, _, agent := claudeSetup(t, fakemodel.Options{})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Image = &capture.ImageConfig{
		For:      func(*schemas.PromptCase) (*image.Image, *harbor.Task, error) { return img, task, nil },
		LayerDir: t.TempDir(),
		Egress:   egress.NewProxy(egress.DefaultRules(sb.Env, agent), ""),
	}
	fix := `sed -i 's/return "Hello " + name/return "Hello, " + name + "!"/' /app/greet.py && echo fixed-in-image`
	rec := runCases(t, cfg, "bash "+fix)[0]
	if rec.Error != nil {
		t.Fatalf("error %+v\n%s", rec.Error, dump(rec))
	}
	if !strings.Contains(dump(rec), "fixed-in-image") {
		t.Fatalf("the Bash tool did not run:\n%s", dump(rec))
	}
	if rec.Score == nil || rec.Score.Score != 1 || !rec.Score.Pass || len(rec.Score.Checks) != 3 {
		t.Fatalf("verdict %+v", rec.Score)
	}
	if rec.Cwd != "/app" || rec.Provenance.Sandbox == nil || rec.Provenance.Sandbox.Backend != "image" || rec.Provenance.Sandbox.Network != "allow" {
		t.Fatalf("cwd %q, sandbox %+v", rec.Cwd, rec.Provenance.Sandbox)
	}
	var changed []string
	for _, c := range rec.Workspace.FileChanges {
		changed = append(changed, c.Path+" "+c.Status)
	}
	if !strings.Contains(strings.Join(changed, ","), "greet.py modified") {
		t.Fatalf("file changes %v", changed)
	}
}
