package capture

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"harness/acp"
	"harness/headless"
	"harness/schemas"
)

// maxHeadlessLine caps one line of a headless agent's output; a longer
// line is recorded as junk, cut.
const maxHeadlessLine = 16 << 20

// headlessPreflight checks that a headless agent's command can be run,
// and describes the agent as far as it is known before a turn runs.
func (r *Runner) headlessPreflight() (*acp.InitializeResponse, error) {
	prog := r.cfg.Agent[0]
	if filepath.Base(prog) == prog {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, &AgentError{Info: schemas.ErrorInfo{Class: schemas.ErrAgentStart,
				Message: fmt.Sprintf("agent %q (headless, adapter %s): %v", prog, r.cfg.Adapter.Name, err)}}
		}
	}
	return &acp.InitializeResponse{AgentInfo: &acp.Implementation{Name: r.cfg.Adapter.Agent}}, nil
}

// headlessLoop runs units with a headless agent: one process per turn, in
// the case's workspace, its output mapped to session updates the case's
// recorder turns into the trajectory an ACP agent would give.
func (w *worker) headlessLoop(ctx context.Context, work <-chan Unit) {
	for u := range work {
		if u.Record != nil {
			if w.regrade(ctx, u) {
				continue
			}
			u.Record = nil // its workspace is gone: the unit runs again
		}
		if ctx.Err() != nil || w.r.stopped() {
			continue // never started: no record, and --resume runs it
		}
		w.await(w.playHeadless(ctx, u))
	}
}

func (w *worker) playHeadless(ctx context.Context, u Unit) *caseRun {
	cfg := &w.r.cfg
	run := w.newRun(u)
	rec := run.record
	rec.Provenance.AgentName = cfg.Adapter.Agent
	cwd, err := w.workspace(ctx, run)
	if err != nil {
		w.fail(run, workspaceErr(err))
		return run
	}
	timeout := cfg.TurnTimeout
	if u.Case.Timeout > 0 {
		timeout = time.Duration(u.Case.Timeout)
	}
	session := ""
	agentArgv, agentEnv := cfg.Agent, cfg.AgentEnv
	if cfg.Gateway != nil {
		// One route for the unit: every turn's process goes through it.
		run.route = cfg.Gateway.NewRoute(cfg.Agent, cfg.AgentEnv)
		run.route.Begin(unitName(u), []string{cwd})
		w.watchCalls(run, run.route)
		defer cfg.Gateway.Remove(run.route)
		agentArgv, agentEnv = run.route.Argv, run.route.Env
	}
	w.r.turning.Add(1)
	run.stage = schemas.StageTurn
	for i, text := range u.Case.Input.List {
		run.rec.BeginTurn(i+1, time.Now())
		run.turnStarts = append(run.turnStarts, time.Now().UnixMilli())
		turn, info := w.headlessTurn(ctx, run, i+1, agentArgv, agentEnv, cwd, text, session, timeout)
		var resp *acp.PromptResponse
		if end := turn.End(); end != nil {
			resp = &acp.PromptResponse{StopReason: end.StopReason, Usage: end.Usage}
			run.stops = append(run.stops, end.StopReason)
		}
		run.rec.EndTurn(resp)
		w.answered(run, info)
		if turn.AgentVersion != "" {
			rec.Provenance.AgentVersion = turn.AgentVersion
		}
		if turn.Session != "" && plainID(turn.Session) {
			session = turn.Session
			rec.Session = &schemas.Session{ID: session}
		}
		if info != nil {
			run.err = info
			break
		}
		if turn.Session != "" && !plainID(turn.Session) {
			// It would go on the next turn's command line: an id that
			// could pass for a flag is refused.
			run.err = &schemas.ErrorInfo{Class: schemas.ErrProtocol,
				Message: fmt.Sprintf("turn %d: the agent named a session id that is not a plain id: %.80q", i+1, turn.Session)}
			break
		}
		if session == "" && i+1 < len(u.Case.Input.List) {
			run.err = &schemas.ErrorInfo{Class: schemas.ErrProtocol,
				Message: fmt.Sprintf("turn %d: the agent's output named no session to continue in turn %d", i+1, i+2)}
			break
		}
	}
	w.r.turning.Add(-1)
	run.end = time.Now()
	w.finish(run)
	return run
}

// headlessTurn runs turn n's process and maps its output. The returned
// error info says why the turn failed, if it did.
func (w *worker) headlessTurn(ctx context.Context, run *caseRun, n int, agentArgv, agentEnv []string, cwd, text, session string, timeout time.Duration) (*headless.Turn, *schemas.ErrorInfo) {
	cfg := &w.r.cfg
	turn := cfg.Adapter.NewTurn()
	argv := cfg.Adapter.Command(agentArgv, text, session)
	// The turn's directory is the one it may write: its workspace copy,
	// or the directory the user gave.
	proc, err := acp.StartProcess(argv, acp.ProcessOptions{Dir: cwd, Env: agentEnv, StderrCopy: cfg.StderrCopy, Sandbox: cfg.Sandbox, RW: []string{cwd}, Disk: headlessDisk(cfg, cwd)})
	if err != nil {
		return turn, &schemas.ErrorInfo{Class: schemas.ErrAgentStart, Message: err.Error()}
	}
	ag := &agent{proc: proc}
	// Once the turn's process is gone, its connections are all reported.
	defer func() { run.rec.Network(proc.Connections()) }()
	defer proc.Kill()    // and whatever it left running in its group
	proc.Stdin().Close() // the prompt is on the command line
	type outLine struct {
		at   time.Time
		line []byte
		size int
		cut  bool
	}
	lines := make(chan outLine, 4) // each up to maxHeadlessLine: little is held
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(proc.Stdout(), 64<<10)
		for {
			line, size, cut, err := acp.ReadLine(br, maxHeadlessLine)
			if size > 0 {
				// The line is the reader's buffer: it is copied to cross.
				lines <- outLine{time.Now(), append([]byte(nil), line...), size, cut}
			}
			if err != nil {
				return
			}
		}
	}()
	clock := w.clock(run, timeout)
	defer clock.stop()
	var info *schemas.ErrorInfo
	handle := func(l outLine) {
		if len(bytes.TrimSpace(l.line)) == 0 && !l.cut {
			return
		}
		if l.cut {
			run.rec.Junk(acp.Junk{At: l.at, Line: l.line[:min(len(l.line), 1024)], Size: l.size,
				Reason: fmt.Sprintf("line longer than %d bytes", maxHeadlessLine)})
			return
		}
		updates, err := turn.Line(l.line)
		if err != nil {
			run.rec.Junk(acp.Junk{At: l.at, Line: l.line, Size: l.size, Reason: err.Error()})
			return
		}
		for _, raw := range updates {
			u, derr := acp.DecodeUpdate(raw)
			run.rec.Update(l.at, u, derr)
		}
	}
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break read
			}
			handle(l)
		case now := <-clock.C():
			if clock.expired(now) {
				info = &schemas.ErrorInfo{Class: schemas.ErrTimeout}
				break read
			}
		case <-ctx.Done():
			info = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted"}
			break read
		case <-cfg.Kill:
			info = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted"}
			break read
		}
	}
	if info != nil {
		proc.Shutdown(cfg.CancelGrace)
		run.rec.MarkCancelled()
		for l := range lines { // what it wrote before it stopped
			handle(l)
		}
		if info.Class == schemas.ErrTimeout {
			info = ag.exitInfo(schemas.ErrTimeout, clock.exceeded(n))
		}
		return turn, info
	}
	// Its output is closed: the process is ending.
	select {
	case <-proc.Exited():
	case <-time.After(cfg.CancelGrace):
		proc.Shutdown(cfg.CancelGrace)
	}
	code, sig := proc.ExitStatus()
	end := turn.End()
	switch {
	case end != nil && end.Error != "":
		return turn, ag.exitInfo(schemas.ErrAgentError, end.Error)
	case end == nil && (code != 0 || sig != ""):
		return turn, ag.exitInfo(schemas.ErrAgentCrash, fmt.Sprintf("the agent exited during turn without a result (%s)", cfg.Adapter.Name))
	case end == nil:
		return turn, ag.exitInfo(schemas.ErrProtocol, fmt.Sprintf("the agent's output ended without the result event of %s", cfg.Adapter.Name))
	}
	return turn, nil
}

// plainID reports whether a session id is letters, digits and . _ : -
// (not first), at most 200 bytes: safe as a command-line argument.
func plainID(s string) bool {
	if s == "" || len(s) > 200 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-') {
			return false
		}
	}
	return true
}

// headlessDisk is what the disk cap covers for a turn run in cwd: the
// workspace copy, never the user's directory.
func headlessDisk(cfg *Config, cwd string) []string {
	if cwd == cfg.AgentDir || cwd == cfg.Cwd {
		return nil
	}
	return []string{cwd}
}
