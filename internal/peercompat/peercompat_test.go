// Package peercompat checks harness's records with the TypeScript
// acp-harness's own code: its Zod schemas (CaptureResultSchema,
// TrialResultSchema), run by Bun, both pinned in testdata/peer and
// installed by scripts/test.
package peercompat

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"harness/capture"
	"harness/internal/buildinfo"
	"harness/internal/testagents"
	"harness/results"
	"harness/schemas"
	"harness/trials"
)

func TestMain(m *testing.M) { os.Exit(testagents.FakeAgentMain(m)) }

// peer returns the paths of bun and of the validation script.
func peer(t *testing.T) (bun, script string) {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "testdata", "peer")
	bun = filepath.Join(dir, "node_modules", ".bin", "bun")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@plaited", "agent-eval-harness", "package.json")); err != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			t.Fatalf("the acp-harness peer is not installed under %s (scripts/test installs it)", dir)
		}
		t.Skipf("the acp-harness peer is not installed (run scripts/test): %v", err)
	}
	return bun, filepath.Join(dir, "validate.ts")
}

// validate runs the peer's schemas over files and fails the test on any
// line they reject, or when they did not see wantLines lines.
func validate(t *testing.T, kind string, wantLines int, files ...string) {
	t.Helper()
	bun, script := peer(t)
	out, err := exec.Command(bun, append([]string{script, kind}, files...)...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		t.Fatalf("the acp-harness schemas reject harness's %s records:\n%s", kind, text)
	}
	lines := strings.Split(text, "\n")
	if last, want := lines[len(lines)-1], fmt.Sprintf("%d passed, 0 failed", wantLines); last != want {
		t.Errorf("validated %q, want %q", last, want)
	}
}

// TestGoldenRecordsValidate: every golden capture record is a valid
// CaptureResult.
func TestGoldenRecordsValidate(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	validate(t, "capture", 6, filepath.Join(filepath.Dir(self), "..", "..", "capture", "testdata", "golden.jsonl"))
}

// TestFreshRecordsValidate: records of a fresh capture run over every kind
// of agent behaviour, and the trials records built from them, are valid
// CaptureResult and TrialResult objects.
func TestFreshRecordsValidate(t *testing.T) {
	peer(t)
	argv, env := testagents.FakeAgent()
	cfg := capture.Config{
		Agent: argv, AgentEnv: env, Cwd: t.TempDir(),
		TurnTimeout: 5 * time.Second, StartupTimeout: 10 * time.Second, CancelGrace: time.Second, Settle: 50 * time.Millisecond,
		Build: buildinfo.Info{Version: "test"},
	}
	inputs := []string{"full", "permission", "messages", "junk", "crash", "late", "echo plain", "usage", "unknown-session", "dup-tool"}
	var units []capture.Unit
	for i, in := range inputs {
		c := &schemas.PromptCase{ID: string(rune('a' + i)), Input: schemas.SingleTurn(in)}
		for trial := 1; trial <= 2; trial++ {
			units = append(units, capture.Unit{Case: c, Trial: trial})
		}
	}
	dir := t.TempDir()
	capPath := filepath.Join(dir, "capture.jsonl")
	out, err := results.OpenOutput(capPath, results.OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byCase := map[string][]schemas.CaptureRecord{}
	r := capture.NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background(), slices.Values(units), func(rec *schemas.CaptureRecord) error {
		byCase[rec.ID] = append(byCase[rec.ID], *rec)
		return out.Write(rec)
	})
	if err != nil || out.Close() != nil {
		t.Fatalf("run: %v", err)
	}
	validate(t, "capture", len(units), capPath)

	trialsPath := filepath.Join(dir, "trials.jsonl")
	tout, err := results.OpenOutput(trialsPath, results.OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		id := string(rune('a' + i))
		tr := trials.BuildRecord(schemas.PromptCase{ID: id, Input: schemas.SingleTurn(in)}, 2, byCase[id])
		if err := tout.Write(tr); err != nil {
			t.Fatal(err)
		}
	}
	tout.Close()
	validate(t, "trials", len(inputs), trialsPath)
}
