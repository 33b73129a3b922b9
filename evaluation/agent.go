package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/graders"
	"harness/headless"
	"harness/internal/buildinfo"
	"harness/internal/redact"
	"harness/sandbox"
	"harness/schemas"
)

// AgentOptions say how every unit's agent is started, served and graded,
// in typed values: what a command's flags or a suite give. [CaptureConfig]
// maps them onto the capture.Config of [Options.Config].
type AgentOptions struct {
	// Command is the agent's command line; Env its whole environment (see
	// [AgentEnvironment]).
	Command, Env []string
	// Getenv reads harness's own environment, where a model simulated
	// user finds its base URL and key.
	Getenv func(string) string
	// Dir is the working directory of the agent and of its sessions.
	Dir string
	// Workspace, when set, is a template directory copied fresh for every
	// unit, the session's working directory; KeepWorkspaces keeps the
	// copies. WorkspaceSetup runs in every copy, WorkspacePrepare once in
	// a copy of each template the unit copies are made from.
	Workspace                        string
	KeepWorkspaces                   bool
	WorkspaceSetup, WorkspacePrepare string
	// AnyCaseWorkspace says some case names a workspace of its own.
	AnyCaseWorkspace bool
	// The timeouts: of each turn, of initialize and session/new, of a
	// cancelled turn before its agent is killed, and the time updates are
	// still collected after the last prompt answers.
	TurnTimeout, StartupTimeout, CancelGrace, Settle time.Duration
	// WorkingTime makes the turn timeout count working time only (see
	// capture.Config.WorkingTime).
	WorkingTime bool
	// Concurrency is how many units run at once.
	Concurrency int
	// MaxRecordBytes cuts the largest contents of a record over it (0: no
	// limit).
	MaxRecordBytes int64
	// FreshProcess starts an agent for every unit.
	FreshProcess bool
	// Warm, when not nil, is how many units of each worker are prepared
	// while one runs (0 or less: none); nil leaves it to capture's default.
	Warm *int
	// Auth is the authenticate method called after initialize ("": none).
	Auth string
	// MCPServers go to session/new.
	MCPServers []json.RawMessage
	// SessionMode, when set, is the mode each session is switched to after
	// session/new (see capture.Config.SessionMode).
	SessionMode string
	// Permission answers the agent's permission requests; Requests bound
	// its fs and terminal requests.
	Permission acp.PermissionPolicy
	Requests   acp.Limits
	// FS, when set, serves fs requests; Terminal, when set, serves
	// terminal requests, with the agent's environment, in its sandbox.
	FS       *acp.FSOptions
	Terminal *acp.TerminalOptions
	// Sandbox runs the agent, its terminal commands and the graders that
	// run commands (nil: none).
	Sandbox sandbox.Runner
	// Build is harness's own build, named to the agent and on every record.
	Build buildinfo.Info
	// Adapter, when set, runs an agent without ACP, one process per turn.
	Adapter *headless.Adapter
	// Stderr, when set, gets a copy of the agent's stderr.
	Stderr io.Writer
	// Graders grade each record as it will be written: with Redact's
	// secrets removed.
	Graders []graders.Grader
	Redact  *redact.Redactor
	// Retry says which failed units run again (infrastructure failures
	// by default, never the agent's) and how long to wait first.
	Retry capture.Retry
}

// CaptureConfig is the capture.Config of a run's agent: how each unit runs
// and is graded. It does no I/O.
func CaptureConfig(a *AgentOptions) capture.Config {
	client := acp.Options{
		ClientInfo: acp.Implementation{Name: "harness", Title: "harness", Version: a.Build.Version},
		Permission: a.Permission,
		Limits:     a.Requests,
		FS:         a.FS,
	}
	if a.Terminal != nil {
		t := *a.Terminal
		t.Env, t.Sandbox, t.UserDirs = a.Env, a.Sandbox, []string{a.Dir}
		client.Terminal = &t
	}
	cfg := capture.Config{
		Agent:            a.Command,
		AgentEnv:         a.Env,
		Getenv:           a.Getenv,
		AgentDir:         a.Dir,
		Cwd:              a.Dir,
		Workspace:        a.Workspace,
		KeepWorkspaces:   a.KeepWorkspaces,
		WorkspaceSetup:   a.WorkspaceSetup,
		WorkspacePrepare: a.WorkspacePrepare,
		AnyCaseWorkspace: a.AnyCaseWorkspace,
		TurnTimeout:      a.TurnTimeout,
		Retry:            a.Retry,
		WorkingTime:      a.WorkingTime,
		StartupTimeout:   a.StartupTimeout,
		CancelGrace:      a.CancelGrace,
		Settle:           a.Settle,
		Concurrency:      a.Concurrency,
		MaxRecordBytes:   a.MaxRecordBytes,
		Sandbox:          a.Sandbox,
		FreshProcess:     a.FreshProcess,
		Warm:             warm(a.Warm),
		Auth:             a.Auth,
		MCPServers:       a.MCPServers,
		SessionMode:      a.SessionMode,
		Client:           client,
		Build:            a.Build,
		Adapter:          a.Adapter,
		StderrCopy:       a.Stderr,
	}
	gradeWith(&cfg, a.Graders, a.Redact)
	return cfg
}

// warm maps AgentOptions.Warm onto capture.Config.Warm (0: the default,
// negative: none).
func warm(n *int) int {
	switch {
	case n == nil:
		return 0
	case *n <= 0:
		return -1
	}
	return *n
}

// gradeWith has the run grade each record with gs, which see it as it
// will be written: with secrets redacted.
func gradeWith(cfg *capture.Config, gs []graders.Grader, red *redact.Redactor) {
	if len(gs) == 0 {
		return
	}
	for _, g := range gs {
		cfg.GraderNames = append(cfg.GraderNames, g.Name())
	}
	// Graders that run processes are part of the trial: the concurrency
	// bounds them with the agents.
	cfg.GradeInTrial = graders.RunsCommands(graders.Many(gs))
	cfg.Grade = func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) (*schemas.GraderResult, []schemas.GraderResult) {
		rec = redact.Value(red, rec)
		out := make([]schemas.GraderResult, len(gs))
		for i, g := range gs {
			out[i] = g.Grade(ctx, &graders.Input{Record: rec, Case: c})
		}
		score := graders.Combine(out)
		if len(out) == 1 {
			out = nil
		}
		return &score, out
	}
}

// EnvOptions say what an agent's environment is made of.
type EnvOptions struct {
	// Environ is harness's own environment (os.Environ()).
	Environ []string
	// Set are KEY=VALUE settings added over it.
	Set []string
	// SecretNames name variables whose values are secrets, redacted from
	// all output: from Set, or from harness's environment (Getenv).
	SecretNames []string
	// Withheld name variables kept from the agent unless Set sets them (a
	// judge's API key); their values are secrets too.
	Withheld []string
	// Getenv reads harness's environment.
	Getenv func(string) string
}

// EnvError is a setting of EnvOptions.Set that is not KEY=VALUE.
type EnvError struct{ Entry string }

func (e *EnvError) Error() string { return fmt.Sprintf("%q: want KEY=VALUE", e.Entry) }

// AgentEnvironment returns the agent's environment and the secret values
// to redact from everything the run writes.
func AgentEnvironment(o EnvOptions) (env, secrets []string, err error) {
	names := slices.Concat(o.SecretNames, o.Withheld)
	env = slices.Clone(o.Environ)
	for _, kv := range o.Set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, nil, &EnvError{Entry: kv}
		}
		env = append(env, kv)
		if slices.Contains(names, k) {
			secrets = append(secrets, v)
		}
	}
	for _, name := range names {
		if v := o.Getenv(name); v != "" {
			secrets = append(secrets, v)
		}
	}
	return withoutVars(env, o.Withheld, o.Set), secrets, nil
}

// withoutVars drops the variables names from env, except those set
// explicitly.
func withoutVars(env, names, explicit []string) []string {
	if len(names) == 0 {
		return env
	}
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	for _, kv := range explicit {
		k, _, _ := strings.Cut(kv, "=")
		delete(drop, k)
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}
