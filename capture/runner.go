package capture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"harness/acp"
	"harness/cost"
	"harness/failure"
	"harness/headless"
	"harness/internal/buildinfo"
	"harness/modelgateway"
	"harness/sandbox"
	"harness/sandbox/egress"
	"harness/schemas"
)

// Config says how to run cases against an agent.
type Config struct {
	// Agent is the agent command line.
	Agent []string
	// AgentEnv is the agent's whole environment.
	AgentEnv []string
	// Getenv reads harness's own environment: where a model simulated
	// user finds its base URL and key (nil: an empty environment).
	Getenv func(string) string
	// AgentDir is the agent process's working directory ("" = inherit).
	AgentDir string
	// Cwd is the absolute session directory when no workspace is used.
	Cwd string
	// Workspace is a template directory copied fresh for every unit.
	Workspace string
	// WorkspaceTmp is where copies go ("" = the system temp dir).
	WorkspaceTmp string
	// WorkspacePrepare, when set, is a shell command run once in a copy
	// of each template (like agentv's before_all: install dependencies
	// once); that prepared copy is what each case's copy is made from.
	WorkspacePrepare string
	// WorkspaceSetup, when set, is a shell command run in each fresh copy
	// before the agent starts (like agentv's before_each).
	WorkspaceSetup string
	// SetupTimeout bounds each of them; 0 means 10 minutes.
	SetupTimeout time.Duration
	// KeepWorkspaces leaves the copies on disk.
	KeepWorkspaces bool
	// TurnTimeout bounds each prompt turn, unless the case sets its own.
	TurnTimeout time.Duration
	// StartupTimeout bounds initialize and session/new.
	StartupTimeout time.Duration
	// CancelGrace is how long a cancelled turn may take to stop before the
	// agent's process group is killed.
	CancelGrace time.Duration
	// StopWait is how long a unit whose process died of a stop signal
	// (SIGTERM, SIGINT, SIGHUP) that harness did not send waits for the
	// run's own stop before the death counts as the unit's error (see
	// stop.go); 0 means 2 seconds.
	StopWait time.Duration
	// Settle is how long updates are still collected after the last prompt
	// answered (the next cases run meanwhile).
	Settle time.Duration
	// Concurrency is the number of agent processes run at once.
	Concurrency int
	// FreshProcess starts a new agent process for every unit.
	FreshProcess bool
	// Auth, if set, is the method id sent with authenticate after
	// initialize.
	Auth string
	// MCPServers are passed to session/new.
	MCPServers []json.RawMessage
	// SessionMode, when set, is the mode each session is switched to
	// (session/set_mode) after session/new, unless it starts in it; a
	// session whose agent did not list the mode fails its case.
	SessionMode string
	// Client configures the protocol client (policy, fs, terminal).
	Client acp.Options
	// Grade, if set, grades each finished record: score is the verdict,
	// scores each grader's result when there are several.
	Grade func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) (score *schemas.GraderResult, scores []schemas.GraderResult)
	// GradeInTrial says that grading is part of the trial: its graders
	// run processes (test suites, executables, command assertions) that
	// use the machine as the agent does and may read or run the
	// workspace. A worker then holds its slot until its unit is graded, so
	// -j bounds trials with their grading; otherwise records are graded
	// beside the next units. A Harbor task's verifier is always part of
	// its trial.
	GradeInTrial bool
	// GraderNames go into each record's provenance.
	GraderNames []string
	// Build identifies the harness build in each record's provenance.
	Build buildinfo.Info
	// StderrCopy, if set, also receives the agents' stderr.
	StderrCopy io.Writer
	// Kill, when closed, kills every agent at once (a second interrupt).
	Kill <-chan struct{}
	// Log, when set, is told of what the agent sent that belongs to no
	// case: updates and notifications for a session the harness does not
	// know (never created, or over), and junk while no case runs. Such
	// messages go on no record.
	Log func(Stray)
	// MaxRecordBytes, when positive, caps the size of a record: the
	// largest values are cut, with a marker, and the record says so.
	MaxRecordBytes int64
	// Sandbox, when set, runs agents in it (and their terminal commands,
	// through Client.Terminal.Sandbox). With a workspace template each
	// case gets an agent process of its own, started in its copy, the
	// only place it can write.
	Sandbox sandbox.Runner
	// AnyCaseWorkspace says some case names a workspace of its own.
	AnyCaseWorkspace bool
	// Image, when set, runs every case in a fresh layer over an image
	// (see ImageConfig); each case gets an agent process of its own.
	Image *ImageConfig
	// Adapter, when set, runs Agent headless instead of over ACP: one
	// process per turn with the adapter's flags and the prompt, its JSON
	// event stream mapped onto the same trajectory. Client, Auth and
	// MCPServers do not apply.
	Adapter *headless.Adapter
	// Warm is how many units each worker prepares ahead while its current
	// unit runs: workspace copy and session on the worker's agent, or,
	// when every unit needs an agent process of its own (a sandbox with
	// workspaces, an image, FreshProcess), that agent too, started in the
	// unit's copy or layer and initialized. 0 means the default: 2 in a
	// sandbox with workspaces (an agent's start there takes longer than
	// most turns, and runs beside them), else 1; negative disables it. A
	// shared agent prepares one unit ahead at most.
	Warm int
	// Control, when set, is told of every turn's answer as it arrives and
	// can stop the run (see Control).
	Control Control
	// Retry says which failed units run again (infrastructure failures,
	// by default) and how long to wait first; the zero value runs none
	// again.
	Retry Retry
	// Gateway, when set, is the run's model gateway: every agent process
	// gets a route through it (its base URL variables and base_url
	// settings pointing there), and each record the ledger of its model
	// calls (ModelCalls), with Usage their sums (what the agent reported
	// kept in AgentUsage) and ProviderFailure when the trial ended on
	// calls the provider failed.
	Gateway *modelgateway.Gateway
	// WorkingTime makes each turn's timeout count working time only:
	// the turn's failed model calls, and the agent's wait after each
	// until its next call, do not count (see ledger.Waited). It needs
	// Gateway; without it turns count wall time.
	WorkingTime bool
	// Prices price the model calls (nil: cost.Builtin).
	Prices cost.Table
}

func (c *Config) defaults() {
	if c.TurnTimeout <= 0 {
		c.TurnTimeout = 60 * time.Second
	}
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = 60 * time.Second
	}
	if c.CancelGrace <= 0 {
		c.CancelGrace = 5 * time.Second
	}
	if c.StopWait <= 0 {
		c.StopWait = 2 * time.Second
	}
	if c.Settle < 0 {
		c.Settle = 0
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.Kill == nil {
		c.Kill = make(chan struct{})
	}
	if c.Warm == 0 {
		c.Warm = 1
		if c.Sandbox != nil && (c.Workspace != "" || c.AnyCaseWorkspace) && c.Image == nil {
			c.Warm = 2
		}
	}
}

// warmDepth is how many units a worker prepares ahead (0: none).
func (c *Config) warmDepth() int { return max(c.Warm, 0) }

// Unit is one trial of one case.
type Unit struct {
	Case  *schemas.PromptCase
	Trial int
	// Record, when set, is the record an earlier run wrote for the unit
	// with its agent's turn complete and its grading still to do
	// (Ungraded): the unit is graded, in the workspace copy or layer that
	// run kept, without running the agent again.
	Record *schemas.CaptureRecord
	// Attempts are the unit's earlier attempts that failed and are being
	// retried: its record carries them.
	Attempts []schemas.Attempt
}

// Stats counts what a run produced.
type Stats struct {
	mu       sync.Mutex
	Records  int
	Errors   map[string]int // by error class
	Graded   int
	Passed   int
	GradeErr int
	// AgentFailures counts the records whose error is the agent's own
	// (counted as failures, not as infrastructure errors).
	AgentFailures int
}

func (s *Stats) add(rec *schemas.CaptureRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Records++
	if rec.Error != nil {
		s.Errors[rec.Error.Class]++
		if rec.Error.Owner == schemas.OwnerAgent {
			s.AgentFailures++
		}
	}
	if rec.Score != nil {
		if rec.Score.Error != nil {
			s.GradeErr++
		} else {
			s.Graded++
			if rec.Score.Pass {
				s.Passed++
			}
		}
	}
}

// InfraErrors is the number of records with an error that is not the
// agent's own (the infrastructure's, the grader's, the configuration's,
// or an error without an owner), which are left out of n.
func (s *Stats) InfraErrors() int {
	n := 0
	for _, v := range s.Errors {
		n += v
	}
	return n - s.AgentFailures + s.GradeErr
}

// Runner runs units against agent processes.
type Runner struct {
	cfg       Config
	junkShown atomic.Int32 // junk lines told to the run's log
	prepMu    sync.Mutex
	prepared  map[string]*preparedTemplate // by template path
	trees     map[string]*sourceListing    // baselines of workspace sources, by path
	scratch   string                       // the first agent's directory, when it has its own
	ready     chan *agent                  // agents started by Preflight, adopted by workers
	retiring  *retirer                     // agents shutting down in the background
	stats     Stats
	// grading is the graders' context: a second interrupt cancels it.
	grading context.Context
	// turning counts the units in their turns; judging those whose
	// verifier or graders run.
	turning, judging atomic.Int32
	// retries holds the units waiting to run again.
	retries *retrier
}

// InFlight says how many units are in their turns, and how many are being
// verified or graded.
func (r *Runner) InFlight() (turns, grading int) {
	return int(r.turning.Load()), int(r.judging.Load())
}

// NewRunner returns a runner for cfg.
func NewRunner(cfg Config) *Runner {
	cfg.defaults()
	// Each worker may leave its last agent and its prepared ones behind.
	lingering := cfg.Concurrency * (2 + cfg.warmDepth())
	return &Runner{cfg: cfg, ready: make(chan *agent, 1), retiring: newRetirer(lingering), stats: Stats{Errors: map[string]int{}}}
}

// AgentError is an agent that could not be brought up to a usable state.
type AgentError struct{ Info schemas.ErrorInfo }

func (e *AgentError) Error() string {
	msg := e.Info.Message
	if s := strings.TrimSpace(e.Info.Stderr); s != "" {
		msg += "\nagent stderr (last lines):\n" + lastLines(s, 10)
	}
	return msg
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Preflight starts one agent and initializes it, so that an agent that
// cannot run is reported before any output is written. The agent is kept
// for the run.
func (r *Runner) Preflight(ctx context.Context) (*acp.InitializeResponse, error) {
	if r.cfg.Adapter != nil {
		return r.headlessPreflight()
	}
	if r.cfg.Image != nil {
		return r.imagePreflight(ctx)
	}
	dir := r.cfg.AgentDir
	if r.ownDirs() {
		// In a sandbox with workspaces, no agent process starts in the
		// user's directory: this one gets an empty scratch directory.
		scratch, err := os.MkdirTemp(r.cfg.WorkspaceTmp, "harness-scratch-")
		if err != nil {
			return nil, &AgentError{Info: schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: "scratch directory: " + err.Error()}}
		}
		dir = scratch
		r.scratch = scratch
	}
	ag, info := r.startAgent(ctx, dir)
	if info != nil {
		r.removeScratch()
		return nil, &AgentError{Info: *info}
	}
	ag.scratch = r.scratch
	r.ready <- ag
	return ag.init, nil
}

// ownDirs says whether every agent process starts in a directory of its
// own: in a sandbox, when the run has workspaces.
func (r *Runner) ownDirs() bool {
	return r.cfg.Sandbox != nil && (r.cfg.Workspace != "" || r.cfg.AnyCaseWorkspace)
}

// removeScratch removes the first agent's scratch directory once that
// agent is gone.
func (r *Runner) removeScratch() {
	if r.scratch != "" {
		os.RemoveAll(r.scratch)
		r.scratch = ""
	}
}

// Run runs every unit units yields (read as they are needed, so a run of any
// size keeps little in memory), calling emit with each finished record (from
// several goroutines at once, in completion order). When ctx is cancelled
// it starts no new unit, cancels the turns in flight, and emits their
// records with error class "interrupted"; the records of units whose turns
// had ended are graded (and, when Kill closes, written ungraded, their
// workspaces kept, for --resume to grade). A unit with a Record is only
// graded. It returns the run's counts and the first error emit returned.
func (r *Runner) Run(ctx context.Context, units iter.Seq[Unit], emit func(*schemas.CaptureRecord) error) (*Stats, error) {
	// With more than one unit prepared ahead per worker, the units wait
	// in a buffer, so a worker topping up finds the next ones ready
	// instead of racing the feeder for each.
	work := make(chan Unit, r.cfg.Concurrency*max(r.cfg.warmDepth()-1, 0))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if r.cfg.Control != nil {
		// A limit reached starts no new unit and cancels the turns in
		// flight; records already answered are kept as they are.
		go func() {
			select {
			case <-r.cfg.Control.Stopped():
				stop()
			case <-runCtx.Done():
			}
		}()
	}
	var (
		emitErr  error
		emitOnce sync.Once
	)
	// Finished records are graded and emitted off the workers: a slow
	// grader never delays the next case's prompt or skews its timing,
	// unless grading is part of the trial (GradeInTrial), when the worker
	// waits for it (see worker.await).
	graded := make(chan *caseRun)
	// Graders finish what they started on the first interrupt and are
	// stopped on the second.
	gradeCtx, stopGrading := context.WithCancel(context.Background())
	defer stopGrading()
	r.grading = gradeCtx
	go func() {
		select {
		case <-r.cfg.Kill:
			stopGrading()
		case <-gradeCtx.Done():
		}
	}()
	r.retries = newRetrier()
	var gwg sync.WaitGroup
	for i := 0; i < r.cfg.Concurrency; i++ {
		gwg.Add(1)
		go func() {
			defer gwg.Done()
			for run := range graded {
				rec := run.record
				r.grade(gradeCtx, rec, run.unit.Case)
				r.graded(rec)
				r.regradeFailed(gradeCtx, runCtx, rec, run.unit.Case)
				r.timeTrial(run)
				r.settleStop(ctx, gradeCtx, rec)
				r.cleanup(run)
				close(run.judged)
				if r.retry(runCtx, run) {
					continue // it runs again; its record waits
				}
				r.stats.add(rec)
				if err := emit(rec); err != nil {
					emitOnce.Do(func() { emitErr = err; stop() })
				}
				r.retries.done()
			}
		}()
	}
	safeEmit := func(run *caseRun) { graded <- run }
	var wg sync.WaitGroup
	for i := 0; i < r.cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{r: r, emit: safeEmit}
			if r.cfg.Adapter != nil {
				w.headlessLoop(runCtx, work)
				return
			}
			select {
			case ag := <-r.ready:
				w.ag = ag
			default:
			}
			w.loop(runCtx, work)
		}()
	}
	r.feed(runCtx, units, work)
	close(work)
	wg.Wait()
	// Units still waiting to run again when the run ended are written
	// as their last attempt failed.
	for _, run := range r.retries.flush() {
		r.stats.add(run.record)
		if err := emit(run.record); err != nil {
			emitOnce.Do(func() { emitErr = err; stop() })
		}
	}
	close(graded)
	gwg.Wait()
	r.removePrepared()
	select {
	case ag := <-r.ready:
		r.retire(ag)
	default:
	}
	// No agent outlives the run.
	r.retiring.wait()
	r.removeScratch()
	return &r.stats, emitErr
}

// feed hands the units to the workers, and the units to run again as
// their waits end, until every unit handed out has its last record (or
// the run stops).
func (r *Runner) feed(ctx context.Context, units iter.Seq[Unit], work chan<- Unit) {
	fresh := make(chan Unit)
	go func() {
		defer close(fresh)
		for u := range units {
			select {
			case fresh <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	q := r.retries
	in := fresh
	for {
		u, ok := q.pop()
		if !ok {
			if in == nil {
				if q.outstanding.Load() == 0 {
					return
				}
				select {
				case <-q.wake:
				case <-ctx.Done():
					return
				}
				continue
			}
			select {
			case u, ok = <-in:
				if !ok {
					in = nil
					continue
				}
				q.outstanding.Add(1)
			case <-q.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case work <- u:
		case <-ctx.Done():
			return
		}
	}
}

// agent is one running agent process and its connection.
type agent struct {
	proc   *acp.Process
	client *acp.Client
	init   *acp.InitializeResponse
	dead   bool

	// gone is closed once the agent has retired and its process is gone.
	gone       chan struct{}
	retireOnce sync.Once
	// open counts the finished cases on it still collecting late
	// updates; an agent let go while some are open retires when the last
	// closes (guarded by the worker's mutex).
	open          int
	retireOnClose bool
	// perCase says it was started in its unit's own directory (workspace
	// copy in a sandbox, or layer), which outlives it.
	perCase bool
	// scratch is the empty directory the agent that checked the start
	// was started in, in a sandbox, while it has served no unit: a unit
	// that needs an agent of its own gets one started in its copy, and
	// this one is stopped without a grace (see worker.setup).
	scratch string

	netMu   sync.Mutex
	netLeft []egress.Connection // taken, but made after the case that took them

	// route is the agent's way through the run's model gateway (nil:
	// none).
	route *modelgateway.Route
}

// connectionsUntil returns the agent's network connections made up to end
// (accept time), not yet given to a case; later ones wait for their case.
func (a *agent) connectionsUntil(end time.Time) []egress.Connection {
	a.netMu.Lock()
	defer a.netMu.Unlock()
	all := append(a.netLeft, a.proc.Connections()...)
	a.netLeft = nil
	var mine []egress.Connection
	for _, c := range all {
		if c.At.After(end) {
			a.netLeft = append(a.netLeft, c)
		} else {
			mine = append(mine, c)
		}
	}
	return mine
}

func (a *agent) kill() {
	a.dead = true
	a.proc.Kill()
	a.client.Close()
}

// reap cleans up after an agent whose process has exited: the reader first
// drains what the agent wrote before it died (it gets end of file once
// every writer is gone), then the group is killed and the pipes closed.
func (a *agent) reap() {
	select {
	case <-a.client.Done():
	case <-time.After(2 * time.Second): // a child still holds stdout
	}
	a.kill()
}

func (a *agent) shutdown(grace time.Duration) {
	a.client.Close()
	a.proc.Shutdown(grace)
}

// Stray is a message of the agent's that belongs to no case.
type Stray struct {
	At time.Time
	// SessionID is the session the message named ("" for none).
	SessionID string
	// What says what it was: "session/update agent_message_chunk", a
	// notification's method, or "stdout junk".
	What string
	// Late says it is an update for the session of a case that is over:
	// the agent sent it after the case's record was sealed (after the
	// settle time), such as a session title made after the turn. It
	// belongs to that case, not to no case, and is on no record; a front
	// end need not show it.
	Late bool
}

// retire shuts an agent down in the background (stdin closed, then
// SIGTERM, then SIGKILL, each after a short grace) and reports to the
// run's log what it sent that no case took. Every record it served is
// complete before it is retired; Run waits for it before returning.
func (r *Runner) retire(a *agent) {
	a.retireOnce.Do(func() {
		a.dead = true
		grace := min(r.cfg.CancelGrace, retireGrace)
		if a.scratch != "" {
			grace = 0 // it served nothing: nothing to let it finish
		}
		r.retiring.start(func() {
			a.shutdown(grace)
			r.logStrays(a)
			r.dropRoute(a.route)
		}, func() { close(a.gone) })
	})
}

// dropRoute removes an agent's route from the run's model gateway once
// the agent is gone (its calls were taken by the cases it served), so a
// long run's gateway holds only the routes of the agents still running.
func (r *Runner) dropRoute(route *modelgateway.Route) {
	if route != nil && r.cfg.Gateway != nil {
		r.cfg.Gateway.Remove(route)
	}
}

// logStrays tells the run's log what the agent sent that no case took.
func (r *Runner) logStrays(a *agent) {
	strays, dropped := a.client.TakeStrays()
	if r.cfg.Log == nil {
		return
	}
	for _, s := range strays {
		ev := Stray{At: s.At, SessionID: s.SessionID, Late: s.Over}
		switch {
		case s.Update != nil:
			ev.What = "session/update " + s.Update.Kind
		case s.Junk != nil:
			ev.What = "stdout junk"
		default:
			ev.What = s.Method
		}
		r.cfg.Log(ev)
	}
	for range dropped {
		r.cfg.Log(Stray{What: "more messages for no case (not kept)"})
	}
}

// exited reports whether the process has ended, waiting up to d for it.
func (a *agent) exited(d time.Duration) bool {
	select {
	case <-a.proc.Exited():
		return true
	case <-time.After(d):
		return false
	}
}

func (a *agent) exitInfo(class, msg string) *schemas.ErrorInfo {
	if hit := a.proc.LimitHit(); hit != "" {
		// The sandbox ended the agent at a resource cap.
		return &schemas.ErrorInfo{Class: schemas.ErrResourceLimit, Message: hit + ": the sandbox ended the agent", Stderr: a.proc.StderrTail()}
	}
	info := &schemas.ErrorInfo{Class: class, Message: msg, Stderr: a.proc.StderrTail()}
	select {
	case <-a.proc.Exited():
		code, sig := a.proc.ExitStatus()
		if sig != "" {
			info.Signal = sig
			info.Message += fmt.Sprintf(" (killed by %s)", sig)
		} else {
			info.ExitCode = &code
			info.Message += fmt.Sprintf(" (exit status %d)", code)
		}
	default:
	}
	return info
}

// startAgent starts the agent and initializes it.
func (r *Runner) startAgent(ctx context.Context, dir string) (*agent, *schemas.ErrorInfo) {
	return r.startAgentWith(ctx, dir, r.cfg.Sandbox)
}

// startAgentWith starts the agent in the given sandbox and initializes it.
func (r *Runner) startAgentWith(ctx context.Context, dir string, sb sandbox.Runner) (*agent, *schemas.ErrorInfo) {
	copts := r.cfg.Client
	var firstJunk atomic.Pointer[string]
	copts.OnJunk = func(j acp.Junk) {
		line := strings.TrimSpace(string(j.Line))
		if len(line) > 200 {
			line = line[:200] + "…"
		}
		firstJunk.CompareAndSwap(nil, &line)
		if r.cfg.Log != nil && r.junkShown.Add(1) <= 3 {
			r.cfg.Log(Stray{At: j.At, What: "stdout: " + line})
		}
		if r.cfg.Client.OnJunk != nil {
			r.cfg.Client.OnJunk(j)
		}
	}
	// The agent's directory is the one it may write (in a sandbox): its
	// case's copy, a scratch directory, or the directory the user gave.
	var disk []string
	if dir != r.cfg.AgentDir {
		disk = []string{dir} // a copy or scratch directory, not the user's
	}
	argv, env := r.cfg.Agent, r.cfg.AgentEnv
	var route *modelgateway.Route
	if r.cfg.Gateway != nil {
		route = r.cfg.Gateway.NewRoute(argv, env)
		argv, env = route.Argv, route.Env
	}
	proc, err := acp.StartProcess(argv, acp.ProcessOptions{
		Dir: dir, Env: env, StderrCopy: r.cfg.StderrCopy, Sandbox: sb, RW: []string{dir}, Disk: disk,
	})
	if err != nil {
		r.dropRoute(route)
		return nil, &schemas.ErrorInfo{Class: schemas.ErrAgentStart, Message: err.Error()}
	}
	ag := &agent{proc: proc, client: acp.Connect(context.Background(), proc.Stdout(), proc.Stdin(), copts), gone: make(chan struct{}), route: route}
	ictx, cancel := context.WithTimeout(ctx, r.cfg.StartupTimeout)
	defer cancel()
	init, err := ag.client.Initialize(ictx)
	if err != nil {
		var info *schemas.ErrorInfo
		var perr *acp.ProtocolError
		switch {
		case ctx.Err() != nil:
			info = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted while the agent was starting"}
		case errors.As(err, &perr):
			info = ag.exitInfo(schemas.ErrProtocol, fmt.Sprintf("agent %q: %v", r.cfg.Agent[0], perr))
		case ag.exited(2 * time.Second):
			info = ag.exitInfo(schemas.ErrAgentStart, fmt.Sprintf("agent %q exited before answering initialize", r.cfg.Agent[0]))
		case ictx.Err() != nil:
			info = ag.exitInfo(schemas.ErrAgentStart, fmt.Sprintf("agent %q did not answer initialize within %s", r.cfg.Agent[0], r.cfg.StartupTimeout))
			if j := firstJunk.Load(); j != nil {
				info.Message += fmt.Sprintf("; it writes non-protocol output to stdout, such as %q (an ACP agent writes only JSON-RPC there; is this the agent's ACP mode?)", *j)
			}
		default:
			info = rpcErrorInfo(ag, schemas.ErrAgentStart, err)
			info.Message = fmt.Sprintf("agent %q: %s", r.cfg.Agent[0], info.Message)
		}
		r.explainKey(ag, info)
		ag.kill()
		r.dropRoute(route)
		return nil, info
	}
	ag.init = init
	if r.cfg.Auth != "" {
		if err := ag.client.Authenticate(ictx, r.cfg.Auth); err != nil {
			info := rpcErrorInfo(ag, schemas.ErrAuthRequired, err)
			info.Message = fmt.Sprintf("agent %q: authenticate with method %q: %s", r.cfg.Agent[0], r.cfg.Auth, info.Message)
			r.explainKey(ag, info)
			ag.kill()
			r.dropRoute(route)
			return nil, info
		}
	}
	return ag, nil
}

// rpcErrorInfo classifies an error returned by a call to the agent.
func rpcErrorInfo(ag *agent, class string, err error) *schemas.ErrorInfo {
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		code := rpcErr.Code
		info := &schemas.ErrorInfo{Class: class, Code: &code,
			Message: fmt.Sprintf("%s (JSON-RPC error %d)", rpcErr.Message, rpcErr.Code)}
		if rpcErr.Data != nil {
			info.Data = *rpcErr.Data
		}
		if code == acp.CodeAuthRequired {
			info.Class = schemas.ErrAuthRequired
			info.Message += authHint(ag)
		}
		return info
	}
	if errors.Is(err, acp.ErrConnectionClosed) {
		ag.exited(5 * time.Second)
		return ag.exitInfo(schemas.ErrAgentCrash, "the agent closed the connection")
	}
	return &schemas.ErrorInfo{Class: class, Message: err.Error()}
}

// decideGraders puts an owner on the grader results that failed (a
// task's verifier's too).
func decideGraders(rec *schemas.CaptureRecord) {
	if rec.Score != nil {
		failure.Decide(rec.Score.Error, schemas.StageGrading)
	}
	for i := range rec.Scores {
		failure.Decide(rec.Scores[i].Error, schemas.StageGrading)
	}
}

func authHint(ag *agent) string {
	if ag == nil || ag.init == nil || len(ag.init.AuthMethods) == 0 {
		return ""
	}
	var ids []string
	for _, m := range ag.init.AuthMethods {
		ids = append(ids, m.ID)
	}
	return fmt.Sprintf("; the agent offers auth methods %s (authenticate with one of them)", strings.Join(ids, ", "))
}

// timeTrial sets how long a unit's trial took as -j counts it: its agent's
// part and what ran after it in the worker's slot, a task's verification,
// and its grading when grading is part of the trial.
func (r *Runner) timeTrial(run *caseRun) {
	if run.start.IsZero() || run.concludedAt.IsZero() {
		return
	}
	end := run.concludedAt
	if r.cfg.GradeInTrial && r.cfg.Grade != nil {
		end = time.Now()
	}
	run.record.Timing.Trial = max(end.Sub(run.start).Milliseconds(), run.record.Timing.Total)
}

// grade puts the graders' verdict on a record whose run got far enough to
// be graded.
//
// A unit whose agent a limit ended (its turn's time limit, a cap) is
// graded as it stands: the graders judge what the agent left.
func (r *Runner) grade(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) {
	defer decideGraders(rec)
	if r.cfg.Grade == nil || (rec.Error != nil && rec.Error.Class != schemas.ErrAgentError && rec.Error.Limit == "") {
		return
	}
	r.judging.Add(1)
	defer r.judging.Add(-1)
	rec.Score, rec.Scores = r.cfg.Grade(ctx, rec, c)
	if rec.Score != nil && rec.Score.Error == nil && len(rec.Score.Outcome) > 0 {
		rec.Outcome = rec.Score.Outcome
	}
}
