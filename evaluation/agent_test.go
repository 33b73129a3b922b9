package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/graders"
	"harness/internal/buildinfo"
	"harness/internal/redact"
	"harness/sandbox"
	"harness/schemas"
)

func TestCaptureConfigMapsTheAgentOptions(t *testing.T) {
	var stderr bytes.Buffer
	sb := sandbox.None{}
	a := &AgentOptions{
		Command: []string{"agent", "--acp"}, Env: []string{"A=1"}, Dir: "/srv/agent-dir",
		Workspace: "/tpl", KeepWorkspaces: true, WorkspaceSetup: "make", WorkspacePrepare: "npm ci", AnyCaseWorkspace: true,
		TurnTimeout: 2 * time.Minute, StartupTimeout: 30 * time.Second, CancelGrace: time.Second, Settle: 10 * time.Millisecond,
		Concurrency: 3, MaxRecordBytes: 1000, FreshProcess: true, Auth: "login",
		MCPServers: []json.RawMessage{json.RawMessage(`{"name":"m"}`)},
		Permission: acp.PermissionPolicy("deny"), Requests: acp.Limits{Requests: 2, Bytes: 5, Timeout: time.Minute},
		FS:       &acp.FSOptions{MaxBytes: 77},
		Terminal: &acp.TerminalOptions{Timeout: time.Hour, MaxOutput: 99},
		Sandbox:  sb, Build: buildinfo.Info{Version: "v1.2.3"}, Stderr: &stderr,
	}
	cfg := CaptureConfig(a)
	switch {
	case !slices.Equal(cfg.Agent, a.Command) || !slices.Equal(cfg.AgentEnv, a.Env):
		t.Errorf("agent %v env %v", cfg.Agent, cfg.AgentEnv)
	case cfg.AgentDir != "/srv/agent-dir" || cfg.Cwd != "/srv/agent-dir":
		t.Errorf("agent dir %q, cwd %q: want the working directory for both", cfg.AgentDir, cfg.Cwd)
	case cfg.Workspace != "/tpl" || !cfg.KeepWorkspaces || cfg.WorkspaceSetup != "make" || cfg.WorkspacePrepare != "npm ci" || !cfg.AnyCaseWorkspace:
		t.Errorf("workspace settings lost: %+v", cfg)
	case cfg.TurnTimeout != 2*time.Minute || cfg.StartupTimeout != 30*time.Second || cfg.CancelGrace != time.Second || cfg.Settle != 10*time.Millisecond:
		t.Errorf("timeouts %v %v %v %v", cfg.TurnTimeout, cfg.StartupTimeout, cfg.CancelGrace, cfg.Settle)
	case cfg.Concurrency != 3 || cfg.MaxRecordBytes != 1000 || !cfg.FreshProcess || cfg.Auth != "login" || len(cfg.MCPServers) != 1:
		t.Errorf("run settings lost: %+v", cfg)
	case cfg.Sandbox != sb || cfg.StderrCopy != &stderr || cfg.Build.Version != "v1.2.3":
		t.Errorf("sandbox, stderr or build lost")
	case cfg.Warm != 0:
		t.Errorf("warm %d with none given, want 0 (capture's default)", cfg.Warm)
	case cfg.Grade != nil || cfg.GraderNames != nil:
		t.Errorf("a run without graders grades")
	}
	c := cfg.Client
	if c.ClientInfo.Name != "harness" || c.ClientInfo.Version != "v1.2.3" || c.Permission != "deny" || c.Limits != a.Requests {
		t.Errorf("client options %+v", c)
	}
	if c.FS == nil || c.FS.MaxBytes != 77 {
		t.Errorf("fs options %+v", c.FS)
	}
	if c.Terminal == nil || c.Terminal.Timeout != time.Hour || c.Terminal.MaxOutput != 99 || !slices.Equal(c.Terminal.Env, a.Env) ||
		c.Terminal.Sandbox != sb || !slices.Equal(c.Terminal.UserDirs, []string{"/srv/agent-dir"}) {
		t.Errorf("terminal options %+v", c.Terminal)
	}
	if a.Terminal.Env != nil || a.Terminal.UserDirs != nil {
		t.Error("CaptureConfig changed its input's terminal options")
	}
	if cfg := CaptureConfig(&AgentOptions{}); cfg.Client.FS != nil || cfg.Client.Terminal != nil {
		t.Errorf("fs and terminal served without being asked for: %+v", cfg.Client)
	}
}

func TestCaptureConfigWarm(t *testing.T) {
	for _, tc := range []struct {
		warm *int
		want int
	}{{nil, 0}, {new(int), -1}, {ptr(-3), -1}, {ptr(4), 4}} {
		if got := CaptureConfig(&AgentOptions{Warm: tc.warm}).Warm; got != tc.want {
			t.Errorf("warm %v: config %d, want %d", tc.warm, got, tc.want)
		}
	}
}

// seen is a grader that passes records whose output holds "ok" and keeps
// the outputs it saw.
type seen struct {
	name    string
	outputs *[]string
}

func (g seen) Name() string { return g.name }

func (g seen) Grade(_ context.Context, in *graders.Input) schemas.GraderResult {
	*g.outputs = append(*g.outputs, in.Record.Output)
	ok := strings.Contains(in.Record.Output, "ok")
	return schemas.GraderResult{Pass: ok, Score: map[bool]float64{true: 1}[ok], Grader: g.name}
}

func TestCaptureConfigGradesRedactedRecords(t *testing.T) {
	var outputs []string
	red := redact.New([]string{"sk-very-secret"}, nil)
	one := CaptureConfig(&AgentOptions{Graders: []graders.Grader{seen{"a", &outputs}}, Redact: red})
	if !slices.Equal(one.GraderNames, []string{"a"}) || one.GradeInTrial {
		t.Fatalf("grader names %v, in trial %v", one.GraderNames, one.GradeInTrial)
	}
	rec := &schemas.CaptureRecord{ID: "c", Output: "ok, key sk-very-secret"}
	score, scores := one.Grade(context.Background(), rec, &schemas.PromptCase{ID: "c"})
	if score == nil || !score.Pass || scores != nil {
		t.Fatalf("one grader: score %+v, scores %+v", score, scores)
	}
	if want := "ok, key " + redact.Mask; outputs[0] != want {
		t.Fatalf("the grader saw %q, want %q", outputs[0], want)
	}
	if rec.Output != "ok, key sk-very-secret" {
		t.Fatalf("grading changed the record: %q", rec.Output)
	}

	two := CaptureConfig(&AgentOptions{Graders: []graders.Grader{seen{"a", &outputs}, seen{"b", &outputs}}})
	score, scores = two.Grade(context.Background(), &schemas.CaptureRecord{Output: "ok"}, nil)
	if len(scores) != 2 || scores[1].Grader != "b" || score == nil || !score.Pass {
		t.Fatalf("two graders: score %+v, scores %+v", score, scores)
	}
}

func TestAgentEnvironment(t *testing.T) {
	host := map[string]string{"MY_TOKEN": "tok-from-host", "JUDGE_KEY": "judge-secret", "HOME": "/home/u"}
	o := EnvOptions{
		Environ:     []string{"HOME=/home/u", "JUDGE_KEY=judge-secret", "MY_TOKEN=tok-from-host"},
		Set:         []string{"MODE=fast", "EXTRA=set-secret"},
		SecretNames: []string{"MY_TOKEN", "EXTRA"},
		Withheld:    []string{"JUDGE_KEY"},
		Getenv:      func(k string) string { return host[k] },
	}
	env, secrets, err := AgentEnvironment(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"HOME=/home/u", "MY_TOKEN=tok-from-host", "MODE=fast", "EXTRA=set-secret"}; !slices.Equal(env, want) {
		t.Errorf("env %v, want %v (the judge's key withheld)", env, want)
	}
	for _, s := range []string{"tok-from-host", "set-secret", "judge-secret"} {
		if !slices.Contains(secrets, s) {
			t.Errorf("secrets %v lack %q", secrets, s)
		}
	}
	if slices.Contains(secrets, "fast") || slices.Contains(secrets, "/home/u") {
		t.Errorf("secrets %v hold a value that is none", secrets)
	}

	// A withheld variable the user sets explicitly reaches the agent: the
	// setting comes last, and the last one of a name is the one that holds.
	o.Set = append(o.Set, "JUDGE_KEY=mine")
	if env, _, _ := AgentEnvironment(o); env[len(env)-1] != "JUDGE_KEY=mine" {
		t.Errorf("an explicit setting of a withheld variable: env %v", env)
	}

	o.Set = []string{"NOEQUALS"}
	var ee *EnvError
	if _, _, err := AgentEnvironment(o); err == nil || !errors.As(err, &ee) || ee.Entry != "NOEQUALS" || err.Error() != `"NOEQUALS": want KEY=VALUE` {
		t.Errorf("a setting without =: %v", err)
	}
}

func TestSurvey(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	prompts := filepath.Join(dir, "p.jsonl")
	write := func(s string) {
		if err := os.WriteFile(prompts, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"id":"a","input":"x","image":"img:1"}
{"id":"b","input":"x","image":"img:1","workspace":"ws"}
{"id":"c","input":"x","image":"img:2"}
{"id":"d","input":"x"}
`)
	s, err := Prompts{Name: prompts, Path: prompts}.Survey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Cases != 4 || s.CasesWithImage != 3 || !slices.Equal(s.Images, []string{"img:1", "img:2"}) ||
		!slices.Equal(s.Workspaces, []string{filepath.Join(dir, "ws")}) || !s.AnyCaseWorkspace() {
		t.Errorf("survey %+v", s)
	}
	write(`{"id":"a","input":"x","workspace":"nowhere"}
{"id":"b","input":"x","workspace":"p.jsonl"}
`)
	_, err = Prompts{Name: prompts, Path: prompts}.Survey(nil)
	if err == nil || !strings.Contains(err.Error(), ":1") || !strings.Contains(err.Error(), ":2") || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("two cases with bad workspaces: %v", err)
	}
	write(`{"id":"a","input":"x","user":{"model":"gpt-x","apiKeyEnv":"K"}}
{"id":"b","input":"x","user":{"model":"gpt-x","baseURL":"http://127.0.0.1:9"}}
`)
	if _, err := (Prompts{Name: prompts, Path: prompts}.Survey(func(string) string { return "" })); err == nil ||
		!strings.Contains(err.Error(), `p.jsonl:1: field "user.apiKeyEnv"`) || !strings.Contains(err.Error(), "variable K is not set") || strings.Contains(err.Error(), ":2") {
		t.Errorf("a model user without its key: %v", err)
	}
	if _, err := (Prompts{Name: prompts, Path: prompts}.Survey(func(k string) string { return map[string]string{"K": "sk"}[k] })); err != nil {
		t.Errorf("a model user with its key: %v", err)
	}
}
