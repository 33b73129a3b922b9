// Package peercompat checks harness's records with the TypeScript
// acp-harness's own code: its Zod schemas (CaptureResultSchema,
// TrialResultSchema), run by Bun, both pinned in testdata/peer and
// installed by scripts/test.
package peercompat

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/acp"
	"harness/capture"
	"harness/internal/buildinfo"
	"harness/results"
	"harness/schemas"
	"harness/testkit/testagents"
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

// TestSchemaNames: every schema name of the peer's own registry (as its
// `schemas --list` prints them) is one `harness schemas` knows.
func TestSchemaNames(t *testing.T) {
	out := peerCLI(t, "schemas", "--list")
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
			names = append(names, n)
		}
	}
	if len(names) < 15 {
		t.Fatalf("the peer listed %d schemas:\n%s", len(names), out)
	}
	for _, n := range names {
		if _, err := schemas.Schema(n); err != nil {
			t.Errorf("the peer has schema %s: %v", n, err)
		}
	}
}

// TestWireAndSessionsValidate: the JSON-RPC messages harness sends an agent
// and the sessions and MCP server configs it records are valid under the
// peer's JsonRpcRequest, JsonRpcResponse, Session and McpServerConfig
// schemas, and under harness's own strict ones.
func TestWireAndSessionsValidate(t *testing.T) {
	peer(t)
	dir := t.TempDir()
	wire := filepath.Join(dir, "wire.jsonl")
	argv, env := testagents.FakeAgent()
	// The agent's stdin, teed: every line harness wrote to it.
	agent := append([]string{"sh", "-c", `tee -a "$0" | "$@"`, wire}, argv...)
	mcp := []acp.MCPServer{
		{Name: "calc", Command: "/bin/true", Env: []acp.NameValue{{Name: "A", Value: "1"}}},
		{Type: acp.MCPHTTP, Name: "web", URL: "http://127.0.0.1:1/mcp", Headers: []acp.NameValue{{Name: "X", Value: "y"}}},
	}
	var raw []json.RawMessage
	for _, m := range mcp {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	cfg := capture.Config{
		Agent: agent, AgentEnv: env, Cwd: dir, MCPServers: raw,
		TurnTimeout: 5 * time.Second, StartupTimeout: 10 * time.Second, CancelGrace: time.Second, Settle: 50 * time.Millisecond,
		Build: buildinfo.Info{Version: "test"},
	}
	var sessions []json.RawMessage
	var units []capture.Unit
	for i, in := range []string{"permission", "fs-read README.md", "agent-error", "echo hi"} {
		units = append(units, capture.Unit{Case: &schemas.PromptCase{ID: strconv.Itoa(i), Input: schemas.SingleTurn(in)}, Trial: 1})
	}
	r := capture.NewRunner(cfg)
	if _, err := r.Run(context.Background(), slices.Values(units), func(rec *schemas.CaptureRecord) error {
		if rec.Session == nil {
			t.Errorf("record %s has no session", rec.ID)
			return nil
		}
		b, err := json.Marshal(rec.Session)
		sessions = append(sessions, b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	byKind := map[string][][]byte{"Session": nil, "McpServerConfig": nil, "JsonRpcRequest": nil, "JsonRpcResponse": nil}
	for _, s := range sessions {
		byKind["Session"] = append(byKind["Session"], s)
	}
	for _, m := range raw {
		byKind["McpServerConfig"] = append(byKind["McpServerConfig"], m)
	}
	b, err := os.ReadFile(wire)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &probe); err != nil {
			t.Fatalf("harness wrote a line that is not JSON: %q", line)
		}
		_, hasID := probe["id"]
		_, hasMethod := probe["method"]
		switch {
		case hasID && hasMethod:
			byKind["JsonRpcRequest"] = append(byKind["JsonRpcRequest"], []byte(line))
		case hasID:
			byKind["JsonRpcResponse"] = append(byKind["JsonRpcResponse"], []byte(line))
		}
	}
	for kind, lines := range byKind {
		if len(lines) == 0 {
			t.Errorf("no %s lines to check", kind)
			continue
		}
		file := filepath.Join(dir, kind+".jsonl")
		if err := os.WriteFile(file, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		validate(t, kind, len(lines), file)
		strict := compileStrict(t, kind)
		for i, l := range lines {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(l))
			if err != nil {
				t.Fatal(err)
			}
			if err := strict.Validate(v); err != nil {
				t.Errorf("%s line %d fails harness's own strict schema: %v\n%s", kind, i+1, err, l)
			}
		}
	}
}

func compileStrict(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	b, err := schemas.StrictSchema(name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemas.SchemaBase+name+".json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schemas.SchemaBase + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}
