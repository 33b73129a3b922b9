package capture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"harness/acp"
	"harness/failure"
	"harness/harbor"
	"harness/ledger"
	"harness/modelgateway"
	"harness/sandbox"
	"harness/sandbox/egress"
	"harness/schemas"
	"harness/simuser"
	"harness/workspace"
)

// worker owns one agent process at a time and runs units on it, one after
// another, each in a fresh session.
type worker struct {
	r  *Runner
	ag *agent
	// emit hands a finished unit on to be graded and written.
	emit func(run *caseRun)

	// open holds finished cases whose sessions stay attached for late
	// updates until their settle time is up, while later cases run.
	mu       sync.Mutex
	open     map[*caseRun]bool
	lastOpen time.Time // when the last of them closes
	// closing counts the open cases not yet sealed; closeAll waits for it.
	closing sync.WaitGroup
}

// caseRun is one unit in progress.
type caseRun struct {
	unit      Unit
	rec       *Recorder
	record    *schemas.CaptureRecord
	start     time.Time
	end       time.Time
	sessionID string
	ws        *workspace.Workspace
	layer     *caseLayer // with an image: the case's layer
	ag        *agent
	// turnStarts are when each turn's prompt was sent (epoch ms).
	turnStarts []int64
	// route is a headless unit's way through the model gateway (an ACP
	// unit's is its agent's).
	route *modelgateway.Route
	// callRoute is the route whose calls since callsFrom (epoch ms) are
	// the unit's, once a Control watches them; userModel its model
	// user, if any.
	callRoute  *modelgateway.Route
	callsFrom  int64
	userModel  *simuser.Model
	stops      []string
	prefetched bool // its session was made while the case before it ran
	err        *schemas.ErrorInfo
	settle     *time.Timer
	closeOnce  sync.Once
	sessionDur time.Duration

	// What the agent left, taken once when its turn ended (conclude),
	// before anything else ran in its workspace or layer.
	concluded  bool
	changes    []schemas.FileChange
	gitChanges []schemas.FileChange
	outside    []schemas.PathChange
	// artifacts are a task's artifacts copied out of the layer.
	artifacts *schemas.Artifacts
	changeErr error
	// verdict is a Harbor task's verifier result.
	verdict *schemas.GraderResult
	// concludedAt is when the agent's part ended and what it left was
	// taken (and a task's verifier ran).
	concludedAt time.Time
	// taskSteps plays a multi-step task's steps (nil for other units).
	taskSteps *taskSteps
	// judged is closed once the unit is graded and its record is out.
	judged chan struct{}
	// stage is where the unit is: the agent's start and session until
	// its first turn.
	stage string
}

func (w *worker) loop(ctx context.Context, work <-chan Unit) {
	// ahead holds the units prepared while the current one runs, in the
	// order they were taken.
	var ahead []*prepared
	defer func() {
		// Units prepared but never played leave nothing behind: no
		// record (--resume runs them), no agent, no workspace.
		for _, p := range ahead {
			w.discard(p)
		}
		// Give the last cases their settle time for late updates.
		w.mu.Lock()
		wait := time.Until(w.lastOpen)
		w.mu.Unlock()
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			case <-w.r.cfg.Kill:
			}
		}
		w.closeAll()
		if w.ag != nil {
			w.release(w.ag)
			w.ag = nil
		}
	}()
	closed := false
	for {
		var p *prepared
		var u Unit
		if len(ahead) > 0 {
			p, ahead = ahead[0], ahead[1:]
			u = p.run.unit
		} else {
			if closed {
				return
			}
			var ok bool
			if u, ok = <-work; !ok {
				return
			}
		}
		if u.Record != nil {
			if p != nil {
				w.discard(p)
				p = nil
			}
			if w.regrade(ctx, u) {
				continue
			}
			u.Record = nil // its workspace is gone: the unit runs again
		}
		var run *caseRun
		if p != nil {
			run = w.take(ctx, p)
		}
		if run == nil {
			run = w.setup(ctx, u)
		}
		if run == nil {
			continue
		}
		// While this case's turns run, the next ones get their workspace,
		// agent (when each unit has its own) and session, so the next
		// prompt goes out as soon as this case ends.
	fill:
		for !closed && ctx.Err() == nil && !w.r.stopped() && len(ahead) < w.depth() {
			select {
			case u, ok := <-work:
				if !ok {
					closed = true
					break fill
				}
				ahead = append(ahead, w.prefetch(ctx, u))
			default:
				break fill
			}
		}
		if w.play(ctx, run) {
			// The agent quit between the last case's answer and this
			// case's prompt, before this case saw anything: it starts
			// over on a fresh agent.
			if run = w.setup(ctx, run.unit); run == nil {
				continue
			}
			w.play(ctx, run)
		}
		w.await(run)
	}
}

// await holds the worker's slot until run is graded when grading is part
// of the trial (Config.GradeInTrial): -j then bounds trials with their
// graders, not only their agents. The units prepared ahead go on being
// prepared meanwhile.
func (w *worker) await(run *caseRun) {
	if run != nil && w.r.cfg.GradeInTrial && w.r.cfg.Grade != nil {
		<-run.judged
	}
}

// prepared is a unit whose workspace and session (and, when it needs one
// of its own, agent) are being made ahead of its turn.
type prepared struct {
	run  *caseRun
	ag   *agent // the agent its session is on
	own  bool   // ag was started for this unit alone
	cold bool   // nothing was prepared: the unit is set up when its turn comes
	done chan struct{}
	err  error              // from the workspace or session/new
	info *schemas.ErrorInfo // from starting the agent
}

// depth is how many units the worker prepares ahead: none with warm start
// off, one on a shared agent, Warm when every unit has an agent of its own.
func (w *worker) depth() int {
	d := w.r.cfg.warmDepth()
	if d == 0 || w.ag == nil || w.ag.dead {
		return 0
	}
	if w.sharedAgents() {
		return 1
	}
	if cfg := &w.r.cfg; cfg.FreshProcess && cfg.Workspace == "" && !cfg.AnyCaseWorkspace && cfg.Image == nil {
		// A fresh agent per unit in the one working directory they
		// share: the next one starts when this one is done, not while it
		// is still changing the directory the next one starts in.
		return 0
	}
	return d
}

// sharedAgents says whether units share the worker's agent: no sandbox
// with workspaces, no image, no FreshProcess.
func (w *worker) sharedAgents() bool {
	cfg := &w.r.cfg
	return !cfg.FreshProcess && !w.r.ownDirs() && cfg.Image == nil
}

// ownAgent says whether u needs an agent process of its own.
func (w *worker) ownAgent(u Unit) bool {
	return w.r.cfg.FreshProcess || w.perCase(u)
}

// perCase says whether u's agent starts in the unit's own directory (its
// workspace copy in a sandbox, or its layer), the only place it can write.
func (w *worker) perCase(u Unit) bool {
	cfg := &w.r.cfg
	return cfg.Sandbox != nil && w.hasTemplate(u) || cfg.Image != nil
}

// hasTemplate says whether the unit runs in a workspace copy.
func (w *worker) hasTemplate(u Unit) bool {
	return w.r.cfg.Workspace != "" || u.Case.Workspace != ""
}

// prefetch starts preparing u while the current unit runs. On a shared
// agent that is its workspace copy and session; when u needs an agent of
// its own, that agent is started too, in the unit's copy or layer, and
// initialized. The session is registered at once, so updates the agent
// sends for it go to its own record, but on a shared agent it becomes the
// active session only when its turn comes.
func (w *worker) prefetch(ctx context.Context, u Unit) *prepared {
	run := w.newRun(u)
	p := &prepared{run: run, done: make(chan struct{})}
	switch {
	case u.Record != nil:
		// Only its grading is left (regrade): nothing to prepare.
		p.cold = true
		close(p.done)
	case w.ownAgent(u):
		p.own = true
		go func() {
			defer close(p.done)
			w.prepareOwn(ctx, p)
		}()
	case w.sharedAgents():
		p.ag = w.ag
		run.ag = w.ag
		setProvenance(run.record, w.ag)
		go func() {
			defer close(p.done)
			cwd, err := w.workspace(ctx, run)
			if err != nil {
				p.err = err
				return
			}
			w.newSession(ctx, p, cwd, false)
		}()
	default:
		// A unit without a workspace in a sandboxed run whose other
		// units have one: it is set up when its turn comes.
		p.cold = true
		close(p.done)
	}
	return p
}

// prepareOwn makes a unit's workspace copy (or layer), starts its agent
// there and creates its session.
func (w *worker) prepareOwn(ctx context.Context, p *prepared) {
	cfg := &w.r.cfg
	run := p.run
	cwd, err := w.workspace(ctx, run)
	if err != nil {
		p.err = err
		return
	}
	dir := cfg.AgentDir
	if w.perCase(run.unit) {
		dir = cwd
	}
	ag, info := w.startAgentFor(ctx, run, dir)
	if info != nil {
		p.info = info
		return
	}
	ag.perCase = w.perCase(run.unit)
	p.ag, run.ag = ag, ag
	setProvenance(run.record, ag)
	w.newSession(ctx, p, cwd, true)
}

// newSession creates a prepared unit's session on p.ag and routes its
// messages to the unit's recorder (attach: also as the active session).
func (w *worker) newSession(ctx context.Context, p *prepared, cwd string, attach bool) {
	run := p.run
	sctx, cancel := context.WithTimeout(ctx, w.r.cfg.StartupTimeout)
	defer cancel()
	sess, err := p.ag.client.NewSessionMeta(sctx, cwd, w.mcpServers(run, p.ag), unitMeta(p.ag, run.unit))
	if err != nil {
		p.err = err
		return
	}
	run.sessionID = sess.SessionID
	run.record.Session = &schemas.Session{ID: sess.SessionID, Meta: sess.Meta}
	if attach {
		p.ag.client.Attach(sess.SessionID, cwd, run.rec)
	} else {
		p.ag.client.Register(sess.SessionID, cwd, run.rec)
	}
	if info := w.setMode(ctx, p.ag, sess); info != nil {
		// Set up again from the start, where the failure is recorded.
		p.err = errors.New(info.Message)
		return
	}
	run.sessionDur = time.Since(run.start)
}

// setMode switches a new session to the run's SessionMode (when one is
// set and the session is not in it already): an error when the agent did
// not list the mode or refused it.
func (w *worker) setMode(ctx context.Context, ag *agent, sess *acp.NewSessionResponse) *schemas.ErrorInfo {
	mode := w.r.cfg.SessionMode
	if mode == "" {
		return nil
	}
	modes, err := sess.SessionModes()
	if err != nil {
		return &schemas.ErrorInfo{Class: schemas.ErrProtocol, Message: err.Error()}
	}
	if modes.CurrentModeID == mode {
		return nil
	}
	if !modes.Has(mode) {
		offered := "no modes"
		if ids := modes.IDs(); len(ids) > 0 {
			offered = "only " + strings.Join(ids, ", ")
		}
		return &schemas.ErrorInfo{Class: schemas.ErrAgentStart, Message: fmt.Sprintf("session mode %q: the agent's session/new listed %s", mode, offered)}
	}
	sctx, cancel := context.WithTimeout(ctx, w.r.cfg.StartupTimeout)
	defer cancel()
	if err := ag.client.SetSessionMode(sctx, sess.SessionID, mode); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return &schemas.ErrorInfo{Class: schemas.ErrTimeout, Message: fmt.Sprintf("session/set_mode did not answer within %s", w.r.cfg.StartupTimeout)}
		}
		if ctx.Err() != nil {
			return &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted during session/set_mode"}
		}
		info := rpcErrorInfo(ag, schemas.ErrAgentError, err)
		info.Message = fmt.Sprintf("session/set_mode %s: %s", mode, info.Message)
		return info
	}
	return nil
}

// take waits for a prepared unit and returns it ready to play, or nil when
// it must be set up again from the start (nothing was prepared, its
// preparation failed, the run is stopping, or the agent it was made on is
// gone); the half-made parts are dropped.
func (w *worker) take(ctx context.Context, p *prepared) *caseRun {
	<-p.done
	run := p.run
	usable := !p.cold && p.err == nil && p.info == nil && ctx.Err() == nil && !w.r.stopped() && p.ag != nil && !p.ag.dead
	if usable && !p.own && p.ag != w.ag {
		usable = false
	}
	if usable {
		select {
		case <-p.ag.proc.Exited():
			usable = false
		default:
		}
	}
	if !usable {
		w.discard(p)
		return nil
	}
	if p.own {
		// The unit's own agent takes over; the one before retires once
		// its last case has had its settle time.
		if w.ag != nil {
			w.release(w.ag)
		}
		w.ag = p.ag
	} else {
		w.ag.client.Activate(run.sessionID)
	}
	// The case's clock starts when its preparation would have, had it
	// started now: the wait for the case before it is not its time, and
	// sessionCreation stays what making its workspace, agent and
	// session took.
	now := time.Now()
	run.start = now.Add(-run.sessionDur)
	run.record.Timing.Start = run.start.UnixMilli()
	run.rec.Restart(run.start, now) // the steps' timestamps count from it too
	run.prefetched = true
	return run
}

// discard drops a prepared unit that will not be played as prepared: its
// session, its agent if it had its own (retired in the background), and
// its workspace copy or layer once that agent is gone.
func (w *worker) discard(p *prepared) {
	<-p.done
	run := p.run
	if p.ag != nil && run.sessionID != "" && !p.ag.dead {
		p.ag.client.Detach(run.sessionID)
	}
	remove := func() {
		if run.ws != nil {
			run.ws.Remove()
		}
		w.r.removeLayer(run, false)
	}
	if p.own && p.ag != nil {
		w.r.retire(p.ag)
		w.r.retiring.after(p.ag.gone, remove)
		return
	}
	remove()
}

// unitMeta tells an agent that asked for it (harness replay) which case
// and trial a session is for; other agents get no _meta.
func unitMeta(ag *agent, u Unit) json.RawMessage {
	if ag == nil || !ag.init.WantsUnit() {
		return nil
	}
	return acp.SessionUnitMeta(u.Case.ID, u.Trial)
}

// newRun starts the bookkeeping of a unit.
func (w *worker) newRun(u Unit) *caseRun {
	run := &caseRun{unit: u, start: time.Now(), judged: make(chan struct{}), stage: schemas.StageAgentStart}
	run.rec = NewRecorder(run.start)
	run.record = newRecord(&w.r.cfg, u, run.start)
	return run
}

// workspace makes the unit's workspace copy, if the run has a template,
// and returns the session's cwd.
func (w *worker) workspace(ctx context.Context, run *caseRun) (string, error) {
	cfg := &w.r.cfg
	if cfg.Image != nil {
		return w.imageWorkspace(ctx, run)
	}
	c := run.unit.Case
	cwd := cfg.Cwd
	template := cfg.Workspace
	if c.Workspace != "" {
		template = c.Workspace
	}
	if template != "" {
		src, err := w.r.template(template)
		if err != nil {
			return "", err
		}
		ws, err := workspace.New(src, cfg.WorkspaceTmp, fmt.Sprintf("%s-t%d", c.ID, run.unit.Trial))
		if err != nil {
			return "", &setupError{msg: err.Error()}
		}
		ws.Template = template
		run.ws, cwd = ws, ws.Path
		if cfg.WorkspaceSetup != "" {
			if err := w.r.runSetup(ws.Path, cfg.WorkspaceSetup, "workspace setup"); err != nil {
				return "", err
			}
		}
		if cfg.WorkspaceSetup == "" {
			base, err := w.r.sourceTree(src)
			if err != nil {
				return "", &setupError{msg: err.Error()}
			}
			ws.BaselineListed(base)
		} else if err := ws.BaselineSnapshot(cfg.WorkspaceTmp); err != nil {
			return "", &setupError{msg: err.Error()}
		}
	}
	run.record.Cwd = cwd
	return cwd, nil
}

// keepOpen leaves a finished case's session attached for its settle time;
// then its record is sealed.
func (w *worker) keepOpen(run *caseRun) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		w.open = map[*caseRun]bool{}
	}
	w.open[run] = true
	run.ag.open++
	w.lastOpen = time.Now().Add(w.r.cfg.Settle)
	w.closing.Add(1) // done when close has sealed it (and retired its agent)
	run.settle = time.AfterFunc(w.r.cfg.Settle, func() { w.close(run) })
}

// close seals an open case, once.
func (w *worker) close(run *caseRun) {
	run.closeOnce.Do(func() {
		defer w.closing.Done()
		w.finish(run)
		w.mu.Lock()
		delete(w.open, run)
		ag := run.ag
		ag.open--
		last := ag.open == 0 && ag.retireOnClose
		w.mu.Unlock()
		if last {
			w.r.retire(ag)
		}
	})
}

// release lets go of an agent the worker no longer runs units on: it
// retires in the background, at once or, while finished cases on it are
// still collecting late updates, when the last of them closes.
func (w *worker) release(ag *agent) {
	w.mu.Lock()
	wait := ag.open > 0
	if wait {
		ag.retireOnClose = true
	}
	w.mu.Unlock()
	if !wait {
		w.r.retire(ag)
	}
}

// closeAll seals every open case now: before their agent goes away, and at
// the end. When it returns, every record is out.
func (w *worker) closeAll() {
	w.mu.Lock()
	runs := make([]*caseRun, 0, len(w.open))
	for r := range w.open {
		runs = append(runs, r)
	}
	w.mu.Unlock()
	for _, r := range runs {
		r.settle.Stop()
		w.close(r)
	}
	// A case whose settle timer fired just before the snapshot may still
	// be retiring its agent: wait for it, so that nothing starts retiring
	// after the run waits for the retiring agents.
	w.closing.Wait()
}

// setup starts a unit: an agent if there is none (or a fresh one), its
// workspace and its session. It returns nil when the unit did not start
// (its record, if any, is out).
func (w *worker) setup(ctx context.Context, u Unit) *caseRun {
	cfg := &w.r.cfg
	run := w.newRun(u)
	if ctx.Err() != nil || w.r.stopped() {
		return nil // never started: no record, and --resume runs it
	}
	if w.ag != nil && !w.ag.dead {
		select {
		case <-w.ag.proc.Exited(): // it died while idle
			w.ag.reap()
		default:
		}
	}
	// A sandboxed agent can write only its own case's workspace: it gets
	// a process of its own, started in the copy (its working directory,
	// where its own tools write, is the copy whose changes the record
	// takes). The agent before it retires in the background once its last
	// case has settled; the agent that checked the start, started in an
	// empty scratch directory, has served nothing and is stopped at once.
	perCase := w.perCase(u)
	if w.ag != nil && (w.ag.dead || cfg.FreshProcess || perCase || w.ag.perCase) {
		w.release(w.ag)
		w.ag = nil
	}
	var cwd string
	if perCase {
		var err error
		if cwd, err = w.workspace(ctx, run); err != nil {
			w.fail(run, workspaceErr(err))
			return nil
		}
	}
	if w.ag == nil {
		dir := cfg.AgentDir
		if perCase {
			dir = cwd
		}
		ag, info := w.startAgentFor(ctx, run, dir)
		if info != nil {
			if run.ws != nil {
				defer run.ws.Remove()
			}
			w.fail(run, info)
			return nil
		}
		ag.perCase = perCase
		w.ag = ag
	}
	run.ag = w.ag
	w.ag.scratch = "" // it serves a unit now
	setProvenance(run.record, w.ag)

	if !perCase {
		var err error
		if cwd, err = w.workspace(ctx, run); err != nil {
			w.fail(run, workspaceErr(err))
			return nil
		}
	}

	sctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	sess, err := w.ag.client.NewSessionMeta(sctx, cwd, w.mcpServers(run, w.ag), unitMeta(w.ag, u))
	cancel()
	if errors.Is(err, acp.ErrConnectionClosed) {
		// The agent died before this case began (it may exit after its
		// last answer): the case gets a fresh one.
		w.ag.reap()
		w.closeAll()
		dir := cfg.AgentDir
		if perCase {
			dir = cwd
		}
		ag, info := w.startAgentFor(ctx, run, dir)
		if info != nil {
			w.fail(run, info)
			return nil
		}
		ag.perCase = perCase
		w.release(w.ag)
		w.ag, run.ag = ag, ag
		setProvenance(run.record, ag)
		sctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
		sess, err = w.ag.client.NewSessionMeta(sctx, cwd, w.mcpServers(run, w.ag), unitMeta(w.ag, u))
		cancel()
	}
	run.sessionDur = time.Since(run.start)
	if err != nil {
		w.closeAll()
		var info *schemas.ErrorInfo
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			if ctx.Err() != nil {
				info = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted during session/new"}
			} else {
				info = &schemas.ErrorInfo{Class: schemas.ErrTimeout, Message: fmt.Sprintf("session/new did not answer within %s", cfg.StartupTimeout)}
			}
			w.ag.kill()
		default:
			var perr *acp.ProtocolError
			if errors.As(err, &perr) {
				info = &schemas.ErrorInfo{Class: schemas.ErrProtocol, Message: perr.Error()}
			} else {
				info = rpcErrorInfo(w.ag, schemas.ErrAgentError, err)
				info.Message = "session/new: " + info.Message
			}
			if errors.Is(err, acp.ErrConnectionClosed) {
				w.ag.kill()
			}
		}
		w.r.explainKey(w.ag, info)
		w.fail(run, info)
		return nil
	}
	run.sessionID = sess.SessionID
	run.record.Session = &schemas.Session{ID: sess.SessionID, Meta: sess.Meta}
	// Updates the agent sent for the new session before answering are
	// handed over here; earlier cases stay attached for their late updates.
	w.ag.client.Attach(sess.SessionID, cwd, run.rec)
	if info := w.setMode(ctx, w.ag, sess); info != nil {
		w.closeAll()
		if info.Class == schemas.ErrTimeout {
			w.ag.kill()
		}
		w.fail(run, info)
		return nil
	}
	run.sessionDur = time.Since(run.start)
	return run
}

// play runs a started unit's turns, then seals its record, or keeps its
// session open for late updates while the next case runs. It reports
// retry, with nothing recorded, when a prefetched case found its agent
// gone before the agent answered anything.
func (w *worker) play(ctx context.Context, run *caseRun) (retry bool) {
	cfg := &w.r.cfg
	c := run.unit.Case
	timeout := cfg.TurnTimeout
	if c.Timeout > 0 {
		timeout = time.Duration(c.Timeout)
	}
	w.r.turning.Add(1)
	run.stage = schemas.StageTurn
	turns := slices.Clone(c.Input.List)
	steps := w.taskStepsOf(run)
	if steps != nil {
		turns = steps.prompts(turns)
	}
	talk, uerr := userTalkOf(run, timeout, cfg.Getenv)
	if uerr != nil {
		turns, run.err = nil, uerr
	}
	if talk != nil && talk.model != nil {
		// The user's calls count in the run's budget as each ends.
		run.userModel = talk.model
		talk.model.Ended = func(schemas.ModelCall) { w.called(run) }
	}
	for i := 0; i < len(turns); i++ {
		text := turns[i]
		if steps != nil {
			var info *schemas.ErrorInfo
			if timeout, info = steps.begin(ctx, i); info != nil {
				run.err = info
				break
			}
		}
		run.rec.BeginTurn(i+1, time.Now())
		if talk != nil {
			talk.sent(run, i, text)
		}
		resp, info := w.turn(ctx, run, i+1, text, timeout)
		if i == 0 && run.prefetched && info != nil && info.Class == schemas.ErrAgentCrash && !run.rec.Responded() && ctx.Err() == nil {
			w.r.turning.Add(-1)
			run.ag.client.Detach(run.sessionID)
			if run.ws != nil {
				run.ws.Remove()
			}
			w.r.removeLayer(run, false)
			return true
		}
		run.rec.EndTurn(resp)
		w.answered(run, info)
		if resp != nil {
			run.stops = append(run.stops, resp.StopReason)
		}
		if steps != nil && !steps.end(i, info) && info == nil {
			break
		}
		if info != nil {
			run.err = info
			break
		}
		if talk != nil {
			stop := ""
			if resp != nil {
				stop = resp.StopReason
			}
			next, more, uerr := talk.answered(ctx, run, i, i == len(turns)-1, stop)
			if uerr != nil {
				run.err = uerr
				break
			}
			if !more {
				break
			}
			if w.r.stopped() {
				// The user's calls spent the budget: the turn it wrote is
				// not sent.
				run.err = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: fmt.Sprintf("interrupted before turn %d", i+2)}
				break
			}
			if i == len(turns)-1 {
				turns = append(turns, next)
			}
		}
	}
	if talk != nil {
		talk.seal(run, w.r.prices())
	}
	w.r.turning.Add(-1)
	run.end = time.Now()
	// What the agent changed is taken now, and a task's verifier runs,
	// while the session stays attached for late updates.
	w.conclude(run)
	if w.ag.dead {
		w.closeAll()
	}
	if w.ag.dead || run.err != nil && run.err.Class != schemas.ErrAgentError && run.err.Class != schemas.ErrAuthRequired {
		w.finish(run)
		return false
	}
	w.keepOpen(run)
	return false
}

// turn runs one prompt turn with its timeout. On timeout or interrupt it
// sends session/cancel and waits the grace period for the answer, then
// kills the agent's process group.
func (w *worker) turn(ctx context.Context, run *caseRun, n int, text string, timeout time.Duration) (*acp.PromptResponse, *schemas.ErrorInfo) {
	type result struct {
		resp *acp.PromptResponse
		err  error
	}
	ag := w.ag
	if route := run.modelRoute(); route != nil && n == 1 {
		route.Begin(unitName(run.unit), []string{run.record.Cwd})
		w.watchCalls(run, route)
	}
	run.turnStarts = append(run.turnStarts, time.Now().UnixMilli())
	done := make(chan result, 1)
	go func() {
		resp, err := ag.client.Prompt(context.Background(), run.sessionID, []acp.ContentBlock{acp.TextBlock(text)})
		done <- result{resp, err}
	}()
	clock := w.clock(run, timeout)
	defer clock.stop()
	var why *schemas.ErrorInfo
	for why == nil {
		select {
		case res := <-done:
			if res.err != nil {
				return nil, w.turnError(run, n, res.err)
			}
			return res.resp, nil
		case <-ag.proc.Exited():
			ag.reap()
			if res := <-done; res.err == nil {
				return res.resp, nil // it answered, then exited
			}
			return nil, ag.exitInfo(schemas.ErrAgentCrash, fmt.Sprintf("the agent exited during turn %d", n))
		case now := <-clock.C():
			if clock.expired(now) {
				why = &schemas.ErrorInfo{Class: schemas.ErrTimeout, Message: clock.exceeded(n)}
			}
		case <-ctx.Done():
			why = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: fmt.Sprintf("interrupted during turn %d", n)}
		case <-w.r.cfg.Kill:
			ag.kill()
			<-done
			return nil, &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: fmt.Sprintf("killed during turn %d", n)}
		}
	}
	run.rec.MarkCancelled()
	// Cancel may block behind a prompt write the agent is not reading; the
	// grace period runs regardless, and a kill closes the pipe.
	go ag.client.Cancel(context.Background(), run.sessionID)
	grace := time.NewTimer(w.r.cfg.CancelGrace)
	defer grace.Stop()
	select {
	case res := <-done:
		if res.err != nil {
			why.Message += "; after session/cancel: " + w.turnError(run, n, res.err).Message
			return nil, why
		}
		why.Message += fmt.Sprintf("; the agent stopped with %q after session/cancel", res.resp.StopReason)
		return res.resp, why
	case <-ag.proc.Exited():
		why.Message += "; the agent exited after session/cancel"
		ag.reap()
	case <-grace.C:
		why.Message += fmt.Sprintf("; the agent did not answer session/cancel within %s and was killed", w.r.cfg.CancelGrace)
	case <-w.r.cfg.Kill:
		why.Message += "; killed"
	}
	ag.kill()
	<-done
	why.Stderr = ag.proc.StderrTail()
	return nil, why
}

func (w *worker) turnError(run *caseRun, n int, err error) *schemas.ErrorInfo {
	info := rpcErrorInfo(w.ag, schemas.ErrAgentError, err)
	if info.Class == schemas.ErrResourceLimit {
		info.Message += fmt.Sprintf(" during turn %d", n)
		w.ag.kill()
		return info
	}
	if info.Class == schemas.ErrAgentCrash {
		w.ag.kill()
		info.Message = fmt.Sprintf("the agent exited during turn %d", n) + strings.TrimPrefix(info.Message, "the agent closed the connection")
	} else {
		info.Message = fmt.Sprintf("turn %d: session/prompt: %s", n, info.Message)
	}
	if info.Class == schemas.ErrAuthRequired {
		w.r.explainKey(w.ag, info)
	}
	return info
}

// fail emits a record for a unit that could not run.
func (w *worker) fail(run *caseRun, info *schemas.ErrorInfo) {
	run.err = info
	run.end = time.Now()
	w.answered(run, info)
	w.finish(run)
}

// finish seals a case: the trajectory, the workspace changes taken when
// its turn ended, a task's verdict, and hands the record on.
func (w *worker) finish(run *caseRun) {
	cfg := &w.r.cfg
	w.conclude(run)
	if run.ag != nil && run.sessionID != "" {
		run.ag.client.Detach(run.sessionID)
	}
	if run.ag != nil && run.ag.client != nil {
		run.rec.Network(run.ag.connectionsUntil(run.end))
	}
	var calls []schemas.ModelCall
	if route := run.modelRoute(); route != nil {
		calls = route.Take(run.end)
		ledger.Annotate(calls, run.turnStarts, w.r.prices())
	}
	res := run.rec.Seal(fmt.Sprintf("%s-t%d", run.unit.Case.ID, run.unit.Trial))
	netCounts := countNetwork(res.Steps)
	rec := run.record
	rec.Provenance.Sandbox = sandboxInfo(cfg.Sandbox) // what was bound, now that the agent ran
	rec.Network = netCounts
	rec.Trajectory = res.Steps
	rec.Output = res.Output
	rec.Plan = res.Plan
	rec.Usage = res.Usage
	if len(calls) > 0 {
		// An agent that made no call through the gateway keeps its own
		// report as its usage.
		rec.ModelCalls, rec.AgentUsage = calls, res.Usage
		rec.Usage = schemas.ModelCallsUsage(calls)
		rec.ProviderFailure = ledger.Failure(calls)
		if i := ledger.Miss(calls); i >= 0 {
			// A replay without the call's recording: not the agent's
			// failure, whatever it made of the refusal.
			c := calls[i]
			run.err = &schemas.ErrorInfo{Class: schemas.ErrReplayMiss,
				Message: fmt.Sprintf("model call %d (turn %d, %s %s): %s\n%s", i+1, c.Turn, c.Provider, c.API, c.Error.Message, c.Error.Diff)}
		}
	}
	rec.ToolErrors = res.ToolErrors
	if len(run.stops) > 0 {
		rec.StopReason = run.stops[len(run.stops)-1]
		if len(run.unit.Case.Input.List) > 1 || run.taskSteps != nil || run.unit.Case.User != nil {
			rec.StopReasons = run.stops
		}
	}
	rec.Timing.End = run.end.UnixMilli()
	rec.Timing.Total = run.end.Sub(run.start).Milliseconds()
	rec.Timing.SessionCreation = run.sessionDur.Milliseconds()
	rec.Timing.Waited = ledger.Waited(calls, 0, rec.Timing.End, 0)
	if res.FirstResponse != nil {
		d := res.FirstResponse.Milliseconds()
		rec.Timing.FirstResponse = &d
	}
	if run.ag != nil && (run.err == nil || run.err.Class != schemas.ErrResourceLimit) {
		if hit := run.ag.proc.LimitHit(); hit != "" {
			// The agent answered, but the sandbox ended it (or what it
			// ran) at a resource cap.
			msg := hit
			if run.err != nil {
				msg += "; " + run.err.Message
			}
			run.err = &schemas.ErrorInfo{Class: schemas.ErrResourceLimit, Message: msg}
		}
	}
	if run.err != nil {
		rec.Error = run.err
		rec.Errors = []string{run.err.Message}
	}
	if run.ag != nil && rec.Error != nil && rec.Error.Stderr == "" && rec.Error.Class != schemas.ErrAgentError {
		rec.Error.Stderr = run.ag.proc.StderrTail()
	}
	failure.DecideRecord(rec, run.stage)
	if run.ws != nil {
		changes, git := run.changes, run.gitChanges
		if run.changeErr != nil {
			changes, git = nil, nil
			rec.Errors = append(rec.Errors, "workspace changes: "+run.changeErr.Error())
		}
		rec.Workspace = &schemas.Workspace{Path: run.ws.Path, Template: run.ws.Template, Kept: cfg.KeepWorkspaces, FileChanges: changes, GitChanges: git}
		if rec.Workspace.FileChanges == nil {
			rec.Workspace.FileChanges = []schemas.FileChange{}
		}
	}
	if run.layer != nil {
		w.finishLayer(run, rec)
	}
	capRecord(rec, cfg.MaxRecordBytes)
	// Grading goes on beside the next case (or, when it is part of the
	// trial, while the worker waits); it may read the workspace, which is
	// removed once it is done.
	w.emit(run)
}

// conclude ends the agent's part of a unit, once: what the agent changed
// is taken now, before anything else runs in its workspace or layer, and a
// Harbor task's verifier runs in the layer the agent left (whether the
// agent finished, failed or ran out of time; not when the run's stop cut
// its turn short, which is no verdict). It runs on the worker, so the
// verifier is part of the trial: -j bounds it.
func (w *worker) conclude(run *caseRun) {
	if run.concluded {
		return
	}
	run.concluded = true
	defer func() { run.concludedAt = time.Now() }()
	switch {
	case run.ws != nil:
		run.changes, run.gitChanges, run.changeErr = run.ws.Changes()
		// The baseline has served: a kept copy needs none.
		run.ws.DropBaseline()
	case run.layer != nil:
		run.changes, run.gitChanges, run.outside, run.changeErr = workspace.LayerChanges(run.layer.layer, run.layer.workdir, isVerifierPath)
		switch {
		case run.taskSteps != nil:
			// Each step's tests ran after its turn; a trial the run's
			// stop cut short has no verdict.
			if run.err == nil || run.err.Class != schemas.ErrInterrupted {
				run.verdict = run.taskSteps.verdict()
			}
		case run.layer.task != nil && (run.err == nil || run.err.Class != schemas.ErrInterrupted):
			run.verdict = w.verify(run.layer, run.verifierConn)
		}
		w.collectArtifacts(run)
	}
}

// verifierConn puts a connection of the unit's verifier on its record: a
// network step of phase verifier.
func (run *caseRun) verifierConn(c egress.Connection) {
	run.rec.PhaseNetwork(schemas.PhaseVerifier, []egress.Connection{c})
}

// setupConn puts a connection of a task step's setup on the unit's
// record: a network step of phase task_setup.
func (run *caseRun) setupConn(c egress.Connection) {
	run.rec.PhaseNetwork(schemas.PhaseTaskSetup, []egress.Connection{c})
}

// collectArtifacts copies a Harbor task's artifacts out of the unit's
// layer, after its verifier, into the run's artifacts directory.
func (w *worker) collectArtifacts(run *caseRun) {
	cfg := w.r.cfg.Image
	if cfg == nil || cfg.ArtifactsDir == "" || run.layer.task == nil || len(run.layer.task.Config.Artifacts) == 0 {
		return
	}
	dir := filepath.Join(cfg.ArtifactsDir, fmt.Sprintf("%s-t%d", safeName(run.unit.Case.ID), run.unit.Trial))
	copied, missing, err := harbor.CollectArtifacts(context.Background(), run.layer.layer, run.layer.task, dir)
	if err != nil {
		missing = append(missing, err.Error())
	}
	run.artifacts = &schemas.Artifacts{Dir: dir, Paths: copied, Missing: missing}
}

// safeName is a case id as one path element.
func safeName(id string) string {
	r := strings.NewReplacer("/", "_", "\\", "_", "\x00", "_")
	s := r.Replace(id)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// cleanup removes a graded unit's workspace copy or layer, unless it is to
// be kept: by the user's choice, or because its grading is still to do
// (an ungraded record, which --resume grades in it).
func (r *Runner) cleanup(run *caseRun) {
	keep := run.record.Ungraded()
	remove := func() {
		if run.ws != nil && !r.cfg.KeepWorkspaces && !keep {
			run.ws.Remove()
		}
		r.removeLayer(run, keep)
	}
	if run.ag != nil && run.ag.perCase {
		// The agent runs in the copy or layer until it has retired.
		r.retiring.after(run.ag.gone, remove)
		return
	}
	remove()
}

// countNetwork sums a trajectory's network steps of the agent (nil when
// it has none): a verifier's and a step setup's are on the trajectory,
// not in the counts.
func countNetwork(steps []schemas.Step) *schemas.NetworkCounts {
	var n *schemas.NetworkCounts
	for _, st := range steps {
		if st.Type != schemas.StepNetwork || st.Phase == schemas.PhaseVerifier || st.Phase == schemas.PhaseTaskSetup {
			continue
		}
		if n == nil {
			n = &schemas.NetworkCounts{}
		}
		if st.Allowed != nil && *st.Allowed {
			n.Allowed++
		} else {
			n.Denied++
		}
		if st.BytesOut != nil {
			n.BytesOut += *st.BytesOut
		}
		if st.BytesIn != nil {
			n.BytesIn += *st.BytesIn
		}
	}
	return n
}

// newRecord starts the record of a unit with what is known up front.
func newRecord(cfg *Config, u Unit, start time.Time) *schemas.CaptureRecord {
	c := u.Case
	meta := map[string]any{}
	maps.Copy(meta, c.Metadata)
	for k, raw := range c.Extra {
		if _, ok := meta[k]; !ok {
			var v any
			if json.Unmarshal(raw, &v) == nil {
				meta[k] = v
			}
		}
	}
	meta["agent"] = strings.Join(cfg.Agent, " ")
	rec := &schemas.CaptureRecord{
		ID:                c.ID,
		Trial:             u.Trial,
		Input:             c.Input,
		Expected:          c.Expected,
		Hint:              c.Hint,
		Reference:         c.Reference,
		NegativeReference: c.NegativeReference,
		Trajectory:        []schemas.Step{},
		Metadata:          meta,
		Timing:            schemas.Timing{Start: start.UnixMilli()},
		CaseHash:          c.ContentHash(),
		Provenance: schemas.Provenance{
			Harness:         cfg.Build.Version,
			HarnessRevision: cfg.Build.Revision,
			HarnessDirty:    cfg.Build.Dirty,
			Command:         cfg.Agent,
			Graders:         cfg.GraderNames,
			Sandbox:         sandboxInfo(cfg.Sandbox),
		},
	}
	if len(c.Input.List) > 1 {
		rec.TurnCount = len(c.Input.List)
	}
	rec.Attempts = u.Attempts
	return rec
}

func setProvenance(rec *schemas.CaptureRecord, ag *agent) {
	if ag == nil || ag.init == nil {
		return
	}
	rec.Provenance.ProtocolVersion = ag.init.ProtocolVersion
	if info := ag.init.AgentInfo; info != nil {
		rec.Provenance.AgentName = info.Name
		rec.Provenance.AgentTitle = info.Title
		rec.Provenance.AgentVersion = info.Version
	}
}

// sandboxInfo says how agents run, for provenance.
func sandboxInfo(sb sandbox.Runner) *schemas.SandboxInfo {
	if sb == nil {
		return &schemas.SandboxInfo{Backend: "none"}
	}
	i := sb.Info()
	info := &schemas.SandboxInfo{Backend: i.Backend, Network: i.Network, Version: i.Version, Allow: i.Allow,
		Hidden: i.Hidden, Bound: i.Bound, Protected: i.Protected}
	for _, c := range i.Caps {
		info.Caps = append(info.Caps, schemas.SandboxCap{Cap: c.Cap, Value: c.Value, How: c.How, Note: c.Note})
	}
	return info
}

// workspaceErr is the error of a case whose workspace could not be made.
func workspaceErr(err error) *schemas.ErrorInfo {
	info := &schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: err.Error()}
	var se *setupError
	if errors.As(err, &se) {
		info.Stderr = se.output
		info.Signal = se.signal
		info.Evidence = se.evidence
		if se.exitCode >= 0 {
			code := se.exitCode
			info.ExitCode = &code
		}
	}
	return info
}

// modelRoute is the unit's way through the run's model gateway (nil: none).
func (run *caseRun) modelRoute() *modelgateway.Route {
	if run.route != nil {
		return run.route
	}
	if run.ag != nil {
		return run.ag.route
	}
	return nil
}

// unitName names a unit to the model gateway: its case id and trial,
// "ID-tN".
func unitName(u Unit) string {
	return fmt.Sprintf("%s-t%d", u.Case.ID, u.Trial)
}
