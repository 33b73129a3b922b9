// Package checkcmd is harness check: probe an agent's ACP compliance and print what it supports.
package checkcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/acp"
	"harness/cli"
	"harness/compliance"
	"harness/internal/redact"
	"harness/sandbox"
)

// checkFlags are the flags of harness check.
type checkFlags struct {
	sandbox      cli.SandboxFlags
	jsonOut      bool
	prompt       string
	cancelPrompt string
	noCancel     bool
	auth         string
	timeout      time.Duration
	cancelGrace  time.Duration
	cancelAfter  time.Duration
	settle       time.Duration
	eofGrace     time.Duration
	cwd          string
	permission   string
	env          []string
	secretEnv    []string
	verbose      bool
}

const checkLong = `check starts the agent and walks it through what a run needs: initialize
(name, version, protocol version, capabilities, auth methods), authenticate
(with --auth), session/new with an absolute cwd, a prompt turn and its
stopReason, a second turn cancelled with session/cancel, and closing stdin.
It prints a checklist (✓ passed, ✗ failed with the reason, – skipped or
worth a note), or with --json a machine-readable report.

The agent is usable when the required checks pass: it starts, answers
initialize with protocol version 1, accepts session/new, and ends a prompt
turn. Junk on stdout, a cancel that is not answered "cancelled", or an agent
that outlives its stdin are reported but do not make it unusable. Updates
before session/new answers or after a prompt answers are allowed by ACP and
only counted. A turn that ends before the cancel lands is not a failure.

Permission requests are denied by default (--permission), so the probe does
not change anything.

Examples:
  harness check -- npx @zed-industries/claude-code-acp
  harness check --auth gemini-api-key -- gemini --acp
  harness check --json --cancel-prompt "Count slowly to 100." -- ./my-agent

Exit status of check: 0 the agent is usable, 1 a required check failed, 2 usage error.`

// NewCmd returns the harness check command.
func NewCmd() *cli.Command {
	var f checkFlags
	c := &cli.Command{
		Name:  "check",
		Usage: "check [flags] -- AGENT [ARGS...]",
		Short: "probe an agent's ACP compliance and print what it supports",
		Long:  checkLong,
		Agent: true,
		Flags: pflag.NewFlagSet("check", pflag.ContinueOnError),
	}
	fs := c.Flags
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&f.prompt, "prompt", compliance.DefaultPrompt, "`text` of the prompt turn")
	fs.StringVar(&f.cancelPrompt, "cancel-prompt", "", "`text` of the turn that is cancelled (default: --prompt)")
	fs.BoolVar(&f.noCancel, "no-cancel", false, "skip the cancelled turn")
	fs.StringVar(&f.auth, "auth", "", "call authenticate with this `method` id after initialize")
	cli.DurationVarP(fs, &f.timeout, "timeout", "t", 60*time.Second, "`timeout` for initialize, authenticate, session/new and each turn")
	cli.DurationVar(fs, &f.cancelGrace, "cancel-grace", 5*time.Second, "how `long` a cancelled turn may take to answer")
	cli.DurationVar(fs, &f.cancelAfter, "cancel-after", 500*time.Millisecond, "send session/cancel at the turn's first update, or after this `long` at the latest")
	cli.DurationVar(fs, &f.settle, "settle", 500*time.Millisecond, "watch this `long` for updates after the prompt answered")
	cli.DurationVar(fs, &f.eofGrace, "eof-grace", 5*time.Second, "how `long` the agent may take to exit once its stdin is closed")
	fs.StringVarP(&f.cwd, "cwd", "c", "", "working `dir` of the agent and of its session (default: current directory)")
	fs.StringVar(&f.permission, "permission", "deny", "answer permission requests by `policy`: allow, deny or cancel")
	fs.StringArrayVar(&f.env, "env", nil, "set `KEY=VALUE` in the agent's environment; repeatable")
	fs.StringArrayVar(&f.secretEnv, "secret-env", nil, "redact the value of environment variable `NAME` from the output; repeatable")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print every protocol line on stderr")
	f.sandbox.AddFlags(fs, "probe the agent inside a `sandbox`: none or bwrap (bubblewrap), as capture and trials run it")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runCheck(ctx, e, &f, args, agent)
	}
	return c
}

// runCheck probes the agent and prints the report.
func runCheck(ctx context.Context, e *cli.Env, f *checkFlags, args, agent []string) error {
	if len(args) > 0 {
		return cli.Usagef("unexpected arguments %q: the agent command goes after --", args)
	}
	opts, red, err := f.options(e, agent)
	if err != nil {
		return err
	}
	rep := compliance.Run(ctx, opts)
	addFlagHints(rep)
	var sbInfo *sandbox.Info
	if opts.Sandbox != nil {
		i := opts.Sandbox.Info()
		sbInfo = &i
	}
	out, err := compliance.Render(rep, sbInfo, f.jsonOut)
	if err != nil {
		return err
	}
	if _, err := e.Stdout.Write(red.Bytes(out)); err != nil {
		return fmt.Errorf("check: write report: %w", err)
	}
	if ctx.Err() != nil {
		return cli.WithCode(cli.ExitInterrupted, fmt.Errorf("interrupted"))
	}
	if !rep.Usable {
		return cli.WithCode(cli.ExitGateFailed, fmt.Errorf("the agent is not usable: a required check failed"))
	}
	return nil
}

// options checks the flags and builds the probe's options.
func (f *checkFlags) options(e *cli.Env, agent []string) (compliance.Options, *redact.Redactor, error) {
	var o compliance.Options
	o.Timeout, o.CancelGrace, o.CancelAfter, o.Settle, o.EOFGrace = f.timeout, f.cancelGrace, f.cancelAfter, f.settle, f.eofGrace
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--timeout", f.timeout}, {"--cancel-grace", f.cancelGrace}, {"--cancel-after", f.cancelAfter}, {"--eof-grace", f.eofGrace}} {
		if d.v <= 0 {
			return o, nil, cli.Usagef("%s must be positive", d.name)
		}
	}
	if strings.TrimSpace(f.prompt) == "" {
		return o, nil, cli.Usagef("--prompt must not be empty")
	}
	policy, err := acp.ParsePermissionPolicy(f.permission)
	if err != nil {
		return o, nil, cli.Usagef("--permission: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return o, nil, fmt.Errorf("check: working directory: %w", err)
	}
	cwd := wd
	if f.cwd != "" {
		if cwd, err = filepath.Abs(f.cwd); err != nil {
			return o, nil, cli.Usagef("--cwd: %v", err)
		}
		if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
			return o, nil, cli.Usagef("--cwd %s: not a directory", f.cwd)
		}
	}
	agentEnv, secrets, err := cli.AgentEnvironment(f.env, f.secretEnv, e.Getenv)
	if err != nil {
		return o, nil, err
	}
	o.Agent = agent
	o.Env = agentEnv
	o.Dir = cwd
	o.Cwd = cwd
	o.Prompt = f.prompt
	o.CancelPrompt = f.cancelPrompt
	o.SkipCancel = f.noCancel
	o.Auth = f.auth
	o.Client = acp.Options{
		ClientInfo: acp.Implementation{Name: "harness", Title: "harness check", Version: e.Build().Version},
		Permission: policy,
	}
	sb, err := f.sandbox.Runner(f.env, f.secretEnv, agent)
	if err != nil {
		return o, nil, err
	}
	o.Sandbox = sb
	red := redact.New(secrets, agentEnv)
	if f.verbose {
		o.Wire = redactWriter{w: e.Stderr, red: red}
	}
	return o, red, nil
}

// redactWriter removes secrets from what it passes on.
type redactWriter struct {
	w   interface{ Write([]byte) (int, error) }
	red *redact.Redactor
}

func (r redactWriter) Write(b []byte) (int, error) {
	if _, err := r.w.Write(r.red.Bytes(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// checkFlag names, per check, the flag that acts on what its hint speaks
// of.
func checkFlag(id string) string {
	switch id {
	case compliance.CheckInitialize:
		return "--timeout"
	case compliance.CheckSessionNew, compliance.CheckPrompt:
		return "--auth METHOD"
	case compliance.CheckCancel:
		return "--cancel-prompt"
	case compliance.CheckEOF:
		return "--cancel-grace"
	}
	return ""
}

// addFlagHints ends each hint with the flag that acts on it.
func addFlagHints(rep *compliance.Report) {
	for i := range rep.Checks {
		c := &rep.Checks[i]
		if flag := checkFlag(c.ID); flag != "" && c.Hint != "" {
			c.Hint += " (" + flag + ")"
		}
	}
}
