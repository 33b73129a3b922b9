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
	"strconv"
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
		// A grader that fails trial 2, so calibrate has failures to show.
		Grade: func(_ context.Context, rec *schemas.CaptureRecord, _ *schemas.PromptCase) (*schemas.GraderResult, []schemas.GraderResult) {
			pass := rec.Trial == 1
			score := 0.0
			if pass {
				score = 1
			}
			return &schemas.GraderResult{Pass: pass, Score: score, Reasoning: "trial " + strconv.Itoa(rec.Trial)}, nil
		},
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
	// The peer's own summarize and calibrate read the file.
	out2 := peerCLI(t, "summarize", capPath)
	if n := strings.Count(strings.TrimSpace(out2), "\n") + 1; n != len(units) || !strings.Contains(out2, `"toolCalls"`) {
		t.Errorf("peer summarize: %d lines, want %d:\n%s", n, len(units), out2)
	}
	if cal := peerCLI(t, "calibrate", capPath); !strings.Contains(cal, "# Grader Calibration Report") || !strings.Contains(cal, "trial 2") {
		t.Errorf("peer calibrate:\n%s", cal)
	}

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

// peerCLI runs a command of the peer's own CLI on harness's files and
// returns its output; it fails the test when the command fails.
func peerCLI(t *testing.T, args ...string) string {
	t.Helper()
	bun, script := peer(t)
	cli := filepath.Join(filepath.Dir(script), "node_modules", "@plaited", "agent-eval-harness", "bin", "cli.ts")
	out, err := exec.Command(bun, append([]string{cli}, args...)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("peer %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return string(out)
}
