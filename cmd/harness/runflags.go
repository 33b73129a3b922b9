package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/acp"
	"harness/capture"
	"harness/cli"
	"harness/cost"
	"harness/evaluation"
	"harness/graders"
	"harness/headless"
	"harness/internal/buildinfo"
	"harness/internal/redact"
	"harness/modelgateway"
	"harness/modelrecord"
	"harness/sandbox"
	"harness/schemas"
)

// runFlags are the flags capture and trials share.
type runFlags struct {
	output         string
	graders        []string
	concurrency    int
	timeout        time.Duration
	cwd            string
	workspace      string
	keepWorkspaces bool
	wsSetup        string
	wsPrepare      string
	resume         bool
	retryErrors    bool
	rerunChanged   bool
	force          bool
	permission     string
	sessionMode    string
	fs             bool
	fsMaxBytes     int64
	terminal       bool
	terminalTO     time.Duration
	terminalMax    int64
	maxRequests    int
	maxBytes       int64
	requestTO      time.Duration
	maxRecordBytes int64
	sandbox        cli.SandboxFlags
	stopOn         []string
	sameGraderErr  int
	threshold      cli.Threshold
	env            []string
	secretEnv      []string
	mcpServers     []string
	auth           string
	startupTimeout time.Duration
	cancelGrace    time.Duration
	settle         time.Duration
	freshProcess   bool
	warm           int
	graderTimeout  time.Duration
	agentStderr    bool
	progress       bool
	quiet          bool
	shard          string
	junit          string
	events         string
	markdown       string
	adapter        string
	pricesFile     string
	agentModel     string
	maxCost        float64
	// budgetName, when not empty, names the budget in messages instead of
	// --max-cost and --max-tokens with their values: a suite's agent runs
	// under its share of the run's budget, a number nobody typed.
	budgetName     string
	maxTokens      int64
	retries        int
	retryOn        []string
	retryBackoff   time.Duration
	noModelGateway bool
	workingLimit   time.Duration
	modelRecord    string
	modelReplay    string
	// prices is the price table (from --prices, or set by harness run).
	prices cost.Table
	// moreGraders, when set, builds graders besides -g's with the same
	// options (harness run's suite graders and per-case asserts).
	moreGraders func(graders.Options) ([]graders.Grader, error)
	slurm       slurmFlags
	judgeCache  cli.JudgeCacheFlags
	// failOn and summaryPath are trials' --fail-on and --summary, which a
	// Slurm run applies when it merges.
	failOn      []string
	leaveOut    []string
	summaryPath string
	// image runs cases in task images (--image, --tasks).
	image imageFlags
}

func (f *runFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.output, "output", "o", "", "write records to `file` (default stdout); a .zst or .gz suffix compresses")
	fs.StringArrayVarP(&f.graders, "grader", "g", nil, "grade each record with `grader` (executable, .js/.ts module, or .json/.yaml config); repeatable")
	fs.IntVarP(&f.concurrency, "concurrency", "j", 1, "run `n` agent processes at once")
	cli.DurationVarP(fs, &f.timeout, "timeout", "t", 60*time.Second, "per-turn `timeout` (Go duration, or milliseconds); a case's timeout field overrides it")
	fs.StringVarP(&f.cwd, "cwd", "c", "", "working `dir` of the agent and of its sessions (default: current directory)")
	fs.StringVar(&f.workspace, "workspace", "", "template `dir` copied fresh for every case and trial; the copy is the session's cwd, and its file changes go on the record")
	fs.BoolVar(&f.keepWorkspaces, "keep-workspaces", false, "keep the workspace copies on disk")
	fs.StringVar(&f.wsSetup, "workspace-setup", "", "run shell `command` in each fresh workspace copy before the agent starts (agentv's before_each)")
	fs.StringVar(&f.wsPrepare, "workspace-prepare", "", "run shell `command` once in a copy of each template, which the case copies are made from (agentv's before_all)")
	fs.BoolVar(&f.resume, "resume", false, "append to an existing output and run only the units it does not hold yet")
	fs.BoolVar(&f.retryErrors, "retry-errors", false, "with --resume, also rerun units whose record has an error")
	fs.BoolVar(&f.rerunChanged, "rerun-changed", false, "with --resume, run again the cases whose prompts line changed since their records were written (their records are replaced), instead of refusing to resume")
	fs.BoolVar(&f.force, "force", false, "overwrite an existing output file")
	fs.StringVar(&f.sessionMode, "session-mode", "", "switch each session to the mode `ID` its agent lists in session/new's answer (session/set_mode), e.g. default; a case whose agent did not list it fails")
	fs.StringVar(&f.permission, "permission", "allow", "answer permission requests by `policy`: allow (allow_once, else allow_always), deny (reject_once, else reject_always), or cancel")
	fs.BoolVar(&f.fs, "fs", false, "serve fs/read_text_file and fs/write_text_file inside the session's workspace")
	fs.Int64Var(&f.fsMaxBytes, "fs-max-bytes", 10<<20, "largest file `bytes` --fs reads or writes")
	fs.BoolVar(&f.terminal, "terminal", false, "serve terminal/* commands inside the session's workspace")
	cli.DurationVar(fs, &f.terminalTO, "terminal-timeout", 5*time.Minute, "kill a terminal command after this `duration`")
	fs.Int64Var(&f.terminalMax, "terminal-max-output", 1<<20, "keep at most `bytes` of a terminal command's output")
	fs.IntVar(&f.maxRequests, "max-agent-requests", 8, "serve at most `n` fs and terminal requests of a session at once; more get an error")
	fs.Int64Var(&f.maxBytes, "max-agent-bytes", 64<<20, "hold at most `bytes` of file content for fs requests at once; more get an error")
	cli.DurationVar(fs, &f.requestTO, "request-timeout", 10*time.Minute, "deadline of each fs and terminal `request` of the agent")
	f.sandbox.AddFlags(fs, "run the agent, its terminal commands and executable graders in a `sandbox`: none or bwrap (bubblewrap)")
	fs.Int64Var(&f.maxRecordBytes, "max-record-bytes", 64<<20, "cut the largest contents of a record over `bytes`, with a visible marker (0: no limit)")
	fs.StringArrayVar(&f.env, "env", nil, "set `KEY=VALUE` in the agent's environment; repeatable")
	fs.StringArrayVar(&f.secretEnv, "secret-env", nil, "redact the value of environment variable `NAME` from all output; repeatable (API key variables are redacted anyway)")
	fs.StringArrayVar(&f.mcpServers, "mcp-server", nil, "pass an MCP server `json` config to session/new; repeatable")
	fs.StringVar(&f.auth, "auth", "", "call authenticate with this `method` id after initialize")
	cli.DurationVar(fs, &f.startupTimeout, "startup-timeout", 60*time.Second, "`timeout` for initialize and session/new")
	cli.DurationVar(fs, &f.cancelGrace, "cancel-grace", 5*time.Second, "after session/cancel, wait this `duration` for the turn to end before killing the agent")
	cli.DurationVar(fs, &f.settle, "settle", 250*time.Millisecond, "keep collecting updates this `duration` after the last prompt answers")
	fs.BoolVar(&f.freshProcess, "fresh-process", false, "start a new agent process for every case and trial")
	fs.IntVar(&f.warm, "warm", 0, "while a unit runs, prepare the next `n` units of each worker: workspace copy, agent (when each unit has its own) and session (0: none; default 2 with --sandbox bwrap and a workspace, else 1)")
	cli.GraderTimeoutVar(fs, &f.graderTimeout)
	f.threshold.Add(fs)
	fs.BoolVar(&f.agentStderr, "agent-stderr", false, "copy the agent's stderr to harness's stderr")
	fs.BoolVar(&f.progress, "progress", false, "print a line per finished record on stderr (default on a terminal)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors on stderr")
	fs.IntVar(&f.retries, "retries", 2, "run a unit that failed for the infrastructure (the provider's 429/5xx or lost connection, the sandbox, the machine) again up to `n` times, keeping each failed attempt on its record; never the agent's own failures (0: no retries)")
	fs.StringSliceVar(&f.retryOn, "retry-on", nil, "retry the failures of these owners or error `classes` (infra,grader,config,agent_error,...) instead of infrastructure failures; the agent's own are never retried")
	cli.DurationVar(fs, &f.retryBackoff, "retry-backoff", time.Second, "wait about this `duration` before the first retry, doubling for each next one (with jitter; a provider's Retry-After waits longer)")
	fs.StringSliceVar(&f.stopOn, "stop-on", nil, "end the run at the first record with one of these error `classes` (auth_required,...) instead of failing every case the same way")
	fs.IntVar(&f.sameGraderErr, "stop-on-same-grader-error", 3, "end the run when each of the first `n` graded records had the same grader error, rather than run the agent for a grader that fails every record (0: never)")
	fs.StringVar(&f.shard, "shard", "", "run only share `I/N` of the units (1-based I), for spreading a run over machines")
	fs.StringVar(&f.junit, "junit", "", "after the run, write a JUnit XML report of the output to `file` (one testcase per case)")
	fs.StringVar(&f.events, "events", "", "write the run's events (planned, started, turn_answered, record_written, case_finished, stop_requested, summary_written, finished) to `file` as JSON lines, as they happen")
	fs.StringVar(&f.markdown, "markdown", "", "after the run, write a markdown summary of the output to `file`, for pull-request comments")
	fs.StringVar(&f.pricesFile, "prices", "", "price table `file` (YAML or JSON: model -> {input, output, cacheRead, cacheWrite} in USD per million tokens) for the cost of each record")
	fs.StringVar(&f.agentModel, "agent-model", "", "the `model` whose price applies to the agent's tokens (default: the table's \"*\" row, else the cost the agent reports)")
	fs.StringVar(&f.modelRecord, "model-record", "", "record every model call of the run (redacted, zstd) into `dir`, a file per trial, for --model-replay")
	fs.StringVar(&f.modelReplay, "model-replay", "", "answer the agent's model calls from the recording in `dir` (--model-record), reaching no provider; a call with no recording fails its trial as replay_miss")
	fs.BoolVar(&f.noModelGateway, "no-model-gateway", false, "let the agent reach its model provider directly, not through the run's model gateway (which puts each model call on the record: modelCalls, with usage and cost their sums)")
	cli.DurationVar(fs, &f.workingLimit, "working-limit", 0, "per-turn limit of working time, in place of --timeout: a failed model call (rate limit, overload, server or connection error) and the agent's wait after it until its next call do not count (the record's timing.waited)")
	fs.Float64Var(&f.maxCost, "max-cost", 0, "start no new work once the run has cost `usd` (needs prices, or an agent that reports its cost); exit 4")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, "start no new work once the run has used `n` tokens (agent and judge); exit 4")
	f.slurm.addFlags(fs)
	f.judgeCache.AddFlags(fs)
	f.image.add(fs)
	fs.StringVar(&f.adapter, "adapter", "", "run an agent without ACP headless, one process per turn, mapping its JSON events: `name` is claude-stream-json, codex-json or gemini-stream-json")
}

// runSetup is everything a run needs, checked before any agent starts.
type runSetup struct {
	cmd     string // the command: capture, trials, run
	file    string // the prompts file as named on the command line
	path    string // where to read it (a copy, for standard input)
	cleanup func()
	cases   int
	cfg     capture.Config
	redact  *redact.Redactor
	graders []graders.Grader
	shard   evaluation.Shard
	// anyCaseWorkspace says some case names a workspace of its own;
	// caseWorkspaces are those workspaces.
	anyCaseWorkspace bool
	caseWorkspaces   []string
	// caseImages are the images cases name, resolved by configure;
	// casesWithImage counts the cases that name one.
	caseImages     []string
	casesWithImage int
}

// prepare checks the flags and the prompts file and builds the run config,
// resolving the run's images (which may build them). Every problem is an
// input error: nothing has run yet.
func (f *runFlags) prepare(ctx context.Context, e *cli.Env, args, agent []string, cmdName string) (*runSetup, error) {
	v, err := f.validate()
	if err != nil {
		return nil, err
	}
	s, err := f.readPrompts(e, args)
	if err != nil {
		return nil, err
	}
	s.shard, s.cmd = v.shard, cmdName
	if err := f.configure(ctx, e, s, v, agent); err != nil {
		s.cleanup()
		return nil, err
	}
	return s, nil
}

// validFlags are the run flags that validate parsed.
type validFlags struct {
	build   buildinfo.Info
	policy  acp.PermissionPolicy
	shard   evaluation.Shard
	mcp     []json.RawMessage
	adapter *headless.Adapter
	retry   capture.Retry
}

// validate checks the run flags that need nothing from the outside world.
func (f *runFlags) validate() (*validFlags, error) {
	v := &validFlags{}
	if _, err := f.threshold.Value(); err != nil {
		return nil, err
	}
	var err error
	if v.retry, err = f.retryPolicy(); err != nil {
		return nil, err
	}
	switch {
	case f.concurrency < 1:
		return nil, cli.Usagef("--concurrency must be at least 1")
	case f.sameGraderErr < 0:
		return nil, cli.Usagef("--stop-on-same-grader-error %d: want a count of records, or 0 for never", f.sameGraderErr)
	case f.timeout <= 0:
		return nil, cli.Usagef("--timeout must be positive")
	case f.maxCost < 0 || f.maxTokens < 0:
		return nil, cli.Usagef("--max-cost and --max-tokens must not be negative")
	case f.maxRequests < 1 || f.maxBytes < 1 || f.requestTO <= 0:
		return nil, cli.Usagef("--max-agent-requests, --max-agent-bytes and --request-timeout must be positive")
	case f.maxRecordBytes < 0:
		return nil, cli.Usagef("--max-record-bytes must not be negative")
	case f.modelRecord != "" && f.modelReplay != "":
		return nil, cli.Usagef("--model-record and --model-replay: choose one")
	case f.workingLimit < 0:
		return nil, cli.Usagef("--working-limit must be positive")
	case f.workingLimit > 0 && f.noModelGateway:
		return nil, cli.Usagef("--working-limit needs the model gateway to see the provider's failures: drop --no-model-gateway")
	case f.workingLimit > 0 && f.sandbox.Set != nil && f.sandbox.Set.Changed("timeout"):
		return nil, cli.Usagef("--working-limit and --timeout: choose one")
	case f.noModelGateway && (f.modelRecord != "" || f.modelReplay != ""):
		return nil, cli.Usagef("--model-record and --model-replay need the model gateway: drop --no-model-gateway")
	}
	if err := cli.CheckClasses("--stop-on", f.stopOn); err != nil {
		return nil, err
	}
	if v.policy, err = acp.ParsePermissionPolicy(f.permission); err != nil {
		return nil, cli.Usagef("--permission: %v", err)
	}
	if f.shard != "" {
		if v.shard, err = evaluation.ParseShard(f.shard); err != nil {
			return nil, cli.Usagef("--shard %v", err)
		}
	}
	for _, m := range f.mcpServers {
		srv, err := acp.ParseMCPServer(m)
		if err != nil {
			return nil, cli.Usagef("--mcp-server %s: %v (see harness schemas McpServerConfig)", m, err)
		}
		b, err := json.Marshal(srv)
		if err != nil {
			return nil, cli.Usagef("--mcp-server %s: %v", m, err)
		}
		v.mcp = append(v.mcp, b)
	}
	if v.adapter, err = f.headlessAdapter(); err != nil {
		return nil, err
	}
	return v, f.checkOutput()
}

// headlessAdapter is the adapter of --adapter (nil for an ACP agent); the
// flags that only ACP agents have are refused with it.
func (f *runFlags) headlessAdapter() (*headless.Adapter, error) {
	if f.adapter == "" {
		return nil, nil
	}
	a, err := headless.Lookup(f.adapter)
	if err != nil {
		return nil, cli.Usagef("--adapter: %v", err)
	}
	for _, acpOnly := range []struct {
		set  bool
		flag string
	}{{f.fs, "--fs"}, {f.terminal, "--terminal"}, {f.auth != "", "--auth"}, {len(f.mcpServers) > 0, "--mcp-server"}, {f.permission != "allow", "--permission"}, {f.sessionMode != "", "--session-mode"}} {
		if acpOnly.set {
			return nil, cli.Usagef("%s is for ACP agents; with --adapter %s the agent's own flags (after --) decide what it may do", acpOnly.flag, f.adapter)
		}
	}
	return a, nil
}

// readPrompts finds the prompts file (the argument, standard input, or
// the cases of --tasks) and reads it through once, checking each case.
func (f *runFlags) readPrompts(e *cli.Env, args []string) (*runSetup, error) {
	tasksFile := ""
	if f.image.tasks != "" {
		p, err := f.image.taskPrompts(e, args, f.quiet)
		if err != nil {
			return nil, err
		}
		if p != "" {
			tasksFile, args = p, []string{p}
		}
	}
	if len(args) != 1 {
		return nil, cli.Usagef("want exactly one prompts file, got %d arguments", len(args))
	}
	s := &runSetup{file: args[0], path: args[0], cleanup: func() {}}
	if tasksFile != "" {
		s.file, s.cleanup = f.image.tasks, func() { os.Remove(tasksFile) }
	}
	if args[0] == "-" {
		tmp, err := os.CreateTemp("", "harness-prompts-*.jsonl")
		if err != nil {
			return nil, err
		}
		s.path, s.cleanup = tmp.Name(), func() { os.Remove(tmp.Name()) }
		_, err = io.Copy(tmp, e.Stdin)
		tmp.Close()
		if err != nil {
			s.cleanup()
			return nil, cli.Input(fmt.Errorf("prompts from stdin: %w", err))
		}
	}
	survey, err := s.prompts().Survey(e.Getenv)
	if err != nil {
		s.cleanup()
		return nil, cli.Input(err)
	}
	s.cases, s.caseImages, s.casesWithImage = survey.Cases, survey.Images, survey.CasesWithImage
	s.caseWorkspaces, s.anyCaseWorkspace = survey.Workspaces, survey.AnyCaseWorkspace()
	return s, nil
}

// dirs are the agent's working directory and the workspace template ("":
// none), made absolute and checked.
func (f *runFlags) dirs() (wd, cwd, workspace string, err error) {
	wd, _ = os.Getwd()
	cwd = wd
	if f.cwd != "" {
		if cwd, err = filepath.Abs(f.cwd); err != nil {
			return "", "", "", cli.Usagef("--cwd: %v", err)
		}
		if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
			return "", "", "", cli.Usagef("--cwd %s: not a directory", f.cwd)
		}
	}
	if f.workspace != "" {
		workspace, _ = filepath.Abs(f.workspace)
		if st, err := os.Stat(workspace); err != nil || !st.IsDir() {
			return "", "", "", cli.Usagef("--workspace %s: not a directory", f.workspace)
		}
	}
	return wd, cwd, workspace, nil
}

// configure builds the run's sandbox, graders, agent environment and
// capture config, and resolves its images.
func (f *runFlags) configure(ctx context.Context, e *cli.Env, s *runSetup, v *validFlags, agent []string) error {
	wd, cwd, workspace, err := f.dirs()
	if err != nil {
		return err
	}
	f.sandbox.ImageRun = f.image.active() || s.casesWithImage > 0
	var gw *modelgateway.Gateway
	tapeRedact := &lateRedactor{}
	if !f.noModelGateway {
		var opts modelgateway.Options
		var recorder *modelrecord.Recorder
		switch {
		case f.modelRecord != "":
			if recorder, err = modelrecord.NewRecorder(f.modelRecord, tapeRedact); err != nil {
				return cli.Input(fmt.Errorf("--model-record: %w", err))
			}
			opts.Tape = recorder
		case f.modelReplay != "":
			player, err := modelrecord.NewPlayer(f.modelReplay, tapeRedact)
			if err != nil {
				return cli.Input(fmt.Errorf("--model-replay: %w", err))
			}
			opts.Tape = player
		}
		if gw, err = modelgateway.Start(opts); err != nil {
			return err
		}
		prev := s.cleanup
		s.cleanup = func() {
			gw.Close()
			if recorder != nil {
				if err := recorder.Err(); err != nil {
					fmt.Fprintf(e.Stderr, "harness: --model-record: %v\n", err)
				}
			}
			prev()
		}
		f.sandbox.ModelEndpoint = gw.URL
	}
	sb, err := f.sandbox.Runner(f.env, f.secretEnv, agent)
	if err != nil {
		return err
	}
	// Graders first: a judge's API key variable is a secret, redacted
	// everywhere and kept from the agent.
	gopts, graderSecrets, err := f.graderOptions(e, s, wd, sb)
	if err != nil {
		return err
	}
	if s.graders, err = f.loadGraders(gopts); err != nil {
		return err
	}
	if f.pricesFile != "" {
		if f.prices, err = cost.LoadTable(f.pricesFile); err != nil {
			return cli.Input(err)
		}
	}
	agentEnv, secrets, err := evaluation.AgentEnvironment(evaluation.EnvOptions{Environ: os.Environ(), Set: f.env,
		SecretNames: f.secretEnv, Withheld: *graderSecrets, Getenv: e.Getenv})
	if err != nil {
		return cli.Usagef("--env %v", err)
	}
	s.redact = redact.New(secrets, agentEnv)
	tapeRedact.r = s.redact
	v.build = e.Build()
	a := f.agentOptions(v, agent, agentEnv, cwd, workspace, sb)
	a.Getenv = e.Getenv
	a.AnyCaseWorkspace, a.Graders, a.Redact = s.anyCaseWorkspace, s.graders, s.redact
	if f.agentStderr {
		a.Stderr = e.Stderr
	}
	s.cfg = evaluation.CaptureConfig(a)
	s.cfg.Gateway, s.cfg.Prices = gw, f.prices
	f.protect(e, s, sb, gopts)
	return f.image.configure(ctx, e, f, s)
}

// graderOptions are the options the run's graders are loaded with: in the
// run's sandbox, with a build cache of their own (removed with the run),
// and the judge cache. The names of the variables graders read secrets
// from are added to the list returned as the graders load.
func (f *runFlags) graderOptions(e *cli.Env, s *runSetup, wd string, sb sandbox.Runner) (graders.Options, *[]string, error) {
	cache, err := f.judgeCache.Open(e)
	if err != nil {
		return graders.Options{}, nil, err
	}
	gsb := sb
	if _, ok := sb.(*sandbox.Bwrap); ok {
		// The run's sandboxed graders share a build cache, removed with
		// the run (docs/sandbox.md).
		bc := sandbox.NewBuildCache("", e.Getenv)
		gsb = bc.Runner(sb)
		prev := s.cleanup
		s.cleanup = func() { bc.Remove(); prev() }
	}
	secrets := new([]string)
	threshold, err := f.threshold.Value()
	if err != nil {
		return graders.Options{}, nil, err
	}
	return graders.Options{Threshold: threshold, Timeout: f.graderTimeout, Getenv: e.Getenv, Dir: wd, Sandbox: gsb, JudgeCache: cache,
		SecretEnv: func(name string) { *secrets = append(*secrets, name) }, Warn: e.GraderWarn(s.cmd)}, secrets, nil
}

// loadGraders loads -g's graders and harness run's (moreGraders).
func (f *runFlags) loadGraders(gopts graders.Options) ([]graders.Grader, error) {
	var gs []graders.Grader
	for _, spec := range f.graders {
		g, err := graders.Load(spec, gopts)
		if err != nil {
			return nil, cli.Input(err)
		}
		gs = append(gs, g)
	}
	if f.moreGraders != nil {
		more, err := f.moreGraders(gopts)
		if err != nil {
			return nil, cli.Input(err)
		}
		gs = append(gs, more...)
	}
	return gs, nil
}

// agentOptions are the agent options the flags describe, for an agent with
// its environment, working directory, workspace template and sandbox.
func (f *runFlags) agentOptions(v *validFlags, agent, agentEnv []string, cwd, workspace string, sb sandbox.Runner) *evaluation.AgentOptions {
	a := &evaluation.AgentOptions{
		Command: agent, Env: agentEnv, Dir: cwd,
		Workspace: workspace, KeepWorkspaces: f.keepWorkspaces, WorkspaceSetup: f.wsSetup, WorkspacePrepare: f.wsPrepare,
		TurnTimeout: f.timeout, StartupTimeout: f.startupTimeout, CancelGrace: f.cancelGrace, Settle: f.settle,
		Concurrency: f.concurrency, MaxRecordBytes: f.maxRecordBytes, FreshProcess: f.freshProcess,
		Auth: f.auth, MCPServers: v.mcp, Permission: v.policy, SessionMode: f.sessionMode,
		Requests: acp.Limits{Requests: f.maxRequests, Bytes: f.maxBytes, Timeout: f.requestTO},
		Sandbox:  sb, Build: v.build, Adapter: v.adapter, Retry: v.retry,
	}
	if f.workingLimit > 0 {
		a.TurnTimeout, a.WorkingTime = f.workingLimit, true
	}
	if f.sandbox.Set != nil && f.sandbox.Set.Changed("warm") {
		a.Warm = &f.warm
	}
	if f.fs {
		a.FS = &acp.FSOptions{MaxBytes: f.fsMaxBytes}
	}
	if f.terminal {
		a.Terminal = &acp.TerminalOptions{Timeout: f.terminalTO, MaxOutput: f.terminalMax}
	}
	return a
}

// protect keeps the run's own files out of the agent's reach in the
// sandbox, and warns of what the sandbox cannot do, or of running without
// one.
func (f *runFlags) protect(e *cli.Env, s *runSetup, sb sandbox.Runner, gopts graders.Options) {
	if bw, ok := sb.(*sandbox.Bwrap); ok {
		bw.Protect(f.runFiles(s, gopts)...)
		if !f.quiet {
			for _, w := range bw.Warnings() {
				fmt.Fprintf(e.Stderr, "warning: %s\n", w)
			}
		}
	} else if f.output != "" && f.output != "-" && !f.quiet && !f.image.active() {
		fmt.Fprintf(e.Stderr, "warning: no sandbox: the agent runs as you and can change %s, the graders and the prompts; add --sandbox bwrap to keep them out of its reach\n", f.output)
	}
}

// runFiles are the run's own files, kept read-only in the sandbox: the
// prompts, every grader (its file and directory), the prices, workspace
// templates, the outputs and the files harness writes beside them, and
// --sandbox-protect paths.
func (f *runFlags) runFiles(s *runSetup, gopts graders.Options) []string {
	files := []string{s.path, f.pricesFile, f.junit, f.markdown, f.summaryPath, f.events}
	if f.output != "" && f.output != "-" {
		files = append(files, f.output, f.output+".partial", cli.SummaryBeside(f.output))
		if f.shard != "" {
			// A shard of a --slurm run: the job's directory (its script,
			// which a retry submits again, and the other shards).
			files = append(files, filepath.Dir(f.output))
		}
	}
	for _, spec := range f.graders {
		p := spec
		if !filepath.IsAbs(p) && gopts.Dir != "" {
			p = filepath.Join(gopts.Dir, p)
		}
		files = append(files, p, filepath.Dir(p))
	}
	// The harness binary: the sandbox's caps helper runs it outside the
	// sandbox at every agent start, and a Slurm retry runs it again.
	if exe, err := os.Executable(); err == nil {
		files = append(files, exe)
	}
	// Every file a grader runs or reads, however it was given (a suite's
	// graders come as a configuration, not as -g): it and its directory.
	for _, g := range s.graders {
		for _, p := range graders.PinnedPaths(g) {
			files = append(files, p, filepath.Dir(p))
		}
	}
	if s.cfg.Workspace != "" {
		files = append(files, s.cfg.Workspace)
	}
	files = append(files, s.caseWorkspaces...)
	return append(files, f.sandbox.Protect...)
}

// checkOutput refuses to touch an existing output without --resume or
// --force.
func (f *runFlags) checkOutput() error {
	if f.resume && f.force {
		return cli.Usagef("--resume and --force contradict each other")
	}
	if f.retryErrors && !f.resume {
		return cli.Usagef("--retry-errors needs --resume")
	}
	if f.rerunChanged && !f.resume {
		return cli.Usagef("--rerun-changed needs --resume")
	}
	if f.output == "" || f.output == "-" {
		if f.resume {
			return cli.Usagef("--resume needs an output file (-o)")
		}
		if f.junit != "" || f.markdown != "" {
			return cli.Usagef("--junit and --markdown need an output file (-o)")
		}
		return nil
	}
	return nil
}

// prompts is the run's prompts file.
func (s *runSetup) prompts() evaluation.Prompts {
	return evaluation.Prompts{Name: s.file, Path: s.path}
}

// scan reads the prompts file, calling fn with each case, its relative
// workspace path resolved against the prompts file's directory.
func (s *runSetup) scan(fn func(lineNo int, c *schemas.PromptCase) error) error {
	return s.prompts().Scan(fn)
}

// retryPolicy is the retry of --retries, --retry-on and --retry-backoff.
func (f *runFlags) retryPolicy() (capture.Retry, error) {
	if f.retries < 0 {
		return capture.Retry{}, cli.Usagef("--retries must be 0 or more")
	}
	if err := cli.CheckOwnersOrClasses("--retry-on", f.retryOn); err != nil {
		return capture.Retry{}, err
	}
	p := capture.Retry{Max: f.retries, Backoff: f.retryBackoff}
	for _, c := range f.retryOn {
		if c = strings.TrimSpace(c); c == schemas.OwnerAgent {
			return capture.Retry{}, cli.Usagef("--retry-on agent: the agent's own failures are never retried (they count as failures)")
		} else if p.On == nil {
			p.On = map[string]bool{c: true}
		} else {
			p.On[c] = true
		}
	}
	return p, nil
}

// lateRedactor redacts with the run's redactor once it is made (the
// model gateway starts before it, for the sandbox to allow it).
type lateRedactor struct{ r *redact.Redactor }

// Bytes redacts b.
func (l *lateRedactor) Bytes(b []byte) []byte {
	if l.r == nil {
		return b
	}
	return l.r.Bytes(b)
}
