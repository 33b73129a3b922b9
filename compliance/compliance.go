// Package compliance probes an agent's Agent Client Protocol (ACP v1)
// support: it starts the agent, initializes it, opens a session, runs a
// prompt turn and a cancelled turn, closes stdin, and reports what it saw
// as a checklist. It judges agents by the specification, not by what one
// implementation happens to do: a spec-compliant agent passes.
//
// Checks are required or advisory. An agent is usable (Report.Usable) when
// every required check passed: it started, answered initialize with
// protocol version 1, accepted session/new with an absolute cwd (after
// authenticate, when asked for), and ended a prompt turn. Advisory checks
// (junk on stdout, cancel handling, exit on stdin EOF...) report what may
// cost records or time but does not stop the harness from working.
package compliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"harness/acp"
	"harness/sandbox"
)

// Status is the outcome of one check.
type Status string

// Check outcomes. Skip and Warn print as "–": the check did not run, or
// saw something worth knowing that is not a failure.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Symbol is the checklist mark of a status: ✓, ✗ or –.
func (s Status) Symbol() string {
	switch s {
	case Pass:
		return "✓"
	case Fail:
		return "✗"
	}
	return "–"
}

// Check ids, in the order they are reported.
const (
	CheckStart        = "start"
	CheckInitialize   = "initialize"
	CheckProtocol     = "protocol"
	CheckAgentInfo    = "agent_info"
	CheckCapabilities = "capabilities"
	CheckAuthenticate = "authenticate"
	CheckSessionNew   = "session_new"
	CheckSetupUpdates = "setup_updates"
	CheckPrompt       = "prompt"
	CheckStopReason   = "stop_reason"
	CheckLateUpdates  = "late_updates"
	CheckCancel       = "cancel"
	CheckStdout       = "stdout"
	CheckStderr       = "stderr"
	CheckEOF          = "exit_on_eof"
)

// Check is one line of the checklist.
type Check struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status Status `json:"status"`
	// Required checks decide whether the agent is usable.
	Required bool `json:"required"`
	// Detail says what was seen; for a failure, why it failed.
	Detail string `json:"detail,omitempty"`
	// Hint says what to do about a failure.
	Hint string `json:"hint,omitempty"`
	// DurationMs is how long the step took, where it is a step.
	DurationMs *int64 `json:"durationMs,omitempty"`
}

// Options configure a probe.
type Options struct {
	// Agent is the agent command line.
	Agent []string
	// Env is the agent's whole environment.
	Env []string
	// Dir is the agent process's working directory ("" = inherit).
	Dir string
	// Sandbox, when set, runs the agent in it.
	Sandbox sandbox.Runner
	// Cwd is the absolute session directory sent with session/new.
	Cwd string
	// Prompt is the text of the prompt turn.
	Prompt string
	// CancelPrompt is the text of the turn that gets session/cancel.
	CancelPrompt string
	// CancelAfter is how long into the cancel turn session/cancel is sent
	// at the latest; it goes out sooner, as soon as the turn's first update
	// arrives. 0 means 500ms.
	CancelAfter time.Duration
	// Auth, if set, is the method id sent with authenticate.
	Auth string
	// Timeout bounds initialize, authenticate, session/new and each turn.
	Timeout time.Duration
	// CancelGrace is how long a cancelled turn may take to answer.
	CancelGrace time.Duration
	// Settle is how long updates are watched for after a turn answered.
	Settle time.Duration
	// EOFGrace is how long the agent may take to exit once stdin closed.
	EOFGrace time.Duration
	// SkipCancel leaves out the cancel turn.
	SkipCancel bool
	// Client configures the protocol client (client info, permission policy).
	Client acp.Options
	// Wire, if set, receives every protocol line in both directions.
	Wire io.Writer
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = 5 * time.Second
	}
	if o.EOFGrace <= 0 {
		o.EOFGrace = 5 * time.Second
	}
	if o.CancelAfter <= 0 {
		o.CancelAfter = 500 * time.Millisecond
	}
	if o.Settle < 0 {
		o.Settle = 0
	}
	if o.Prompt == "" {
		o.Prompt = DefaultPrompt
	}
	if o.CancelPrompt == "" {
		o.CancelPrompt = o.Prompt
	}
}

// DefaultPrompt is the prompt of the probe's turns: harmless for any agent.
const DefaultPrompt = "Say hello."

// JunkLine is a line on the agent's stdout that is not a protocol message.
type JunkLine struct {
	Text   string `json:"text"`
	Size   int    `json:"size"`
	Reason string `json:"reason"`
}

// Turn is what one prompt turn produced.
type Turn struct {
	Prompt     string `json:"prompt"`
	StopReason string `json:"stopReason,omitempty"`
	// Error is the JSON-RPC error (or the failure) instead of an answer.
	Error string `json:"error,omitempty"`
	// Output is the agent's message text, chunks concatenated.
	Output string `json:"output,omitempty"`
	// Updates counts session/update notifications before the answer.
	Updates int `json:"updates"`
	// LateUpdates counts those after the answer.
	LateUpdates int `json:"lateUpdates"`
	// LateKinds lists the kinds of the late updates.
	LateKinds  []string `json:"lateKinds,omitempty"`
	DurationMs int64    `json:"durationMs"`
	// CancelSent says whether session/cancel went out before the answer,
	// and CancelToAnswerMs how long the agent then took to answer.
	CancelSent       bool   `json:"cancelSent,omitempty"`
	CancelToAnswerMs *int64 `json:"cancelToAnswerMs,omitempty"`
}

// Report is everything a probe found.
type Report struct {
	Agent []string `json:"agent"`
	// Usable is true when every required check passed.
	Usable bool `json:"usable"`
	// AgentInfo, ProtocolVersion, AgentCapabilities and AuthMethods are
	// from the initialize answer.
	AgentInfo         *acp.Implementation `json:"agentInfo,omitempty"`
	ProtocolVersion   *int                `json:"protocolVersion,omitempty"`
	AgentCapabilities json.RawMessage     `json:"agentCapabilities,omitempty"`
	AuthMethods       []acp.AuthMethod    `json:"authMethods,omitempty"`
	// AuthRequired is true when session/new asked for authentication.
	AuthRequired bool   `json:"authRequired,omitempty"`
	Cwd          string `json:"cwd"`
	SessionID    string `json:"sessionId,omitempty"`
	// SetupUpdates counts updates that arrived before session/new answered.
	SetupUpdates int      `json:"setupUpdates"`
	SetupKinds   []string `json:"setupKinds,omitempty"`
	Prompt       *Turn    `json:"prompt,omitempty"`
	Cancel       *Turn    `json:"cancel,omitempty"`
	// Junk holds the first lines on stdout that were not protocol messages;
	// JunkCount counts them all.
	Junk      []JunkLine `json:"junk,omitempty"`
	JunkCount int        `json:"junkCount"`
	// StderrTail is the end of what the agent wrote to stderr.
	StderrTail string `json:"stderrTail,omitempty"`
	// ExitedOnEOF says whether the agent exited after its stdin closed;
	// ExitCode and ExitSignal say how it ended.
	ExitedOnEOF *bool   `json:"exitedOnEOF,omitempty"`
	ExitCode    *int    `json:"exitCode,omitempty"`
	ExitSignal  string  `json:"exitSignal,omitempty"`
	Checks      []Check `json:"checks"`
}

// Failed returns the checks that failed; required ones first.
func (r *Report) Failed() []Check {
	var req, adv []Check
	for _, c := range r.Checks {
		if c.Status != Fail {
			continue
		}
		if c.Required {
			req = append(req, c)
		} else {
			adv = append(adv, c)
		}
	}
	return append(req, adv...)
}

// maxJunk bounds the junk lines kept on the report.
const maxJunk = 10

// probe is one run of Run.
type probe struct {
	opts   Options
	rep    *Report
	proc   *acp.Process
	client *acp.Client
	wire   *wireLog
	obs    *observer
	gone   bool // the agent process is known to have exited or been killed
}

// Run probes the agent and returns the report. It never fails: whatever
// went wrong is on the report. Cancelling ctx stops the probe early; the
// checks not reached are skipped.
func Run(ctx context.Context, opts Options) *Report {
	opts.defaults()
	p := &probe{
		opts: opts,
		rep:  &Report{Agent: opts.Agent, Cwd: opts.Cwd, Checks: []Check{}},
		wire: &wireLog{out: opts.Wire},
		obs:  &observer{},
	}
	p.run(ctx)
	p.rep.Usable = true
	for _, c := range p.rep.Checks {
		if c.Required && c.Status != Pass {
			p.rep.Usable = false
		}
	}
	return p.rep
}

func (p *probe) add(c Check) { p.rep.Checks = append(p.rep.Checks, c) }

// skipRest reports every check from id on as skipped, for why.
func (p *probe) skipRest(from string, why string) {
	started := false
	for _, d := range checkOrder() {
		if d.id == from {
			started = true
		}
		if !started || d.id == CheckStdout || d.id == CheckStderr || d.id == CheckEOF {
			continue
		}
		p.add(Check{ID: d.id, Title: d.title, Status: Skip, Required: d.required, Detail: why})
	}
}

type checkDef struct {
	id, title string
	required  bool
}

// checkOrder lists the checks with their titles and whether they decide
// usability. authenticate is required only when asked for.
func checkOrder() []checkDef {
	return []checkDef{
		{CheckStart, "agent process starts", true},
		{CheckInitialize, "initialize answered", true},
		{CheckProtocol, "protocol version 1", true},
		{CheckAgentInfo, "agentInfo (name, version)", false},
		{CheckCapabilities, "capabilities", false},
		{CheckAuthenticate, "authenticate", false},
		{CheckSessionNew, "session/new with an absolute cwd", true},
		{CheckSetupUpdates, "updates before session/new answered", false},
		{CheckPrompt, "prompt turn ends", true},
		{CheckStopReason, "stopReason is a v1 value", false},
		{CheckLateUpdates, "updates after the prompt answered", false},
		{CheckCancel, "session/cancel during a turn", false},
		{CheckStdout, "stdout holds only protocol messages", false},
		{CheckStderr, "stderr", false},
		{CheckEOF, "exits when stdin closes", false},
	}
}

func def(id string) checkDef {
	for _, d := range checkOrder() {
		if d.id == id {
			return d
		}
	}
	return checkDef{id: id, title: id}
}

func mkCheck(id string, st Status, detail string) Check {
	d := def(id)
	return Check{ID: id, Title: d.title, Status: st, Required: d.required, Detail: detail}
}

func ms(d time.Duration) *int64 {
	v := d.Milliseconds()
	return &v
}

func (p *probe) run(ctx context.Context) {
	if !p.start() {
		p.finishChecks(ctx)
		return
	}
	defer func() {
		if !p.gone {
			p.proc.Kill()
		}
		p.client.Close()
	}()
	if !p.initialize(ctx) || !p.authenticate(ctx) || !p.newSession(ctx) {
		p.finishChecks(ctx)
		return
	}
	if !p.prompt(ctx) {
		p.skipRest(CheckCancel, "skipped: the prompt turn did not end")
		p.finishChecks(ctx)
		return
	}
	p.cancel(ctx)
	p.finishChecks(ctx)
}

// start starts the agent process.
func (p *probe) start() bool {
	proc, err := acp.StartProcess(p.opts.Agent, acp.ProcessOptions{Dir: p.opts.Dir, Env: p.opts.Env, Sandbox: p.opts.Sandbox})
	if err != nil {
		c := mkCheck(CheckStart, Fail, err.Error())
		c.Hint = "check the command after --: it must be an executable on PATH or a path"
		p.add(c)
		p.skipRest(CheckInitialize, "skipped: the agent did not start")
		p.gone = true
		return false
	}
	p.proc = proc
	opts := p.opts.Client
	opts.Tap = p.wire.tap
	p.client = acp.Connect(context.Background(), proc.Stdout(), proc.Stdin(), opts)
	p.add(mkCheck(CheckStart, Pass, fmt.Sprintf("pid %d", proc.Pid())))
	return true
}

// exited waits up to d for the agent to exit and says whether it did.
func (p *probe) exited(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.proc.Exited():
			p.gone = true
			return true
		default:
			return false
		}
	}
	select {
	case <-p.proc.Exited():
		p.gone = true
		return true
	case <-time.After(d):
		return false
	}
}

// exitText says how the agent ended, once it has.
func (p *probe) exitText() string {
	code, sig := p.proc.ExitStatus()
	if sig != "" {
		return "killed by " + sig
	}
	return fmt.Sprintf("exit status %d", code)
}

// callFailure explains a failed request: the JSON-RPC error, a timeout, or
// the agent's exit.
func (p *probe) callFailure(method string, err error, ctx context.Context, timeout time.Duration) string {
	var rpcErr *jsonrpc2.Error
	var perr *acp.ProtocolError
	switch {
	case errors.As(err, &rpcErr):
		s := fmt.Sprintf("%s answered JSON-RPC error %d: %s", method, rpcErr.Code, rpcErr.Message)
		if rpcErr.Data != nil && len(*rpcErr.Data) > 0 && len(*rpcErr.Data) < 200 {
			s += " (data " + string(*rpcErr.Data) + ")"
		}
		return s
	case errors.As(err, &perr):
		return perr.Error()
	case errors.Is(err, acp.ErrConnectionClosed) || p.exited(0):
		if p.exited(2 * time.Second) {
			return fmt.Sprintf("the agent exited before answering %s (%s)", method, p.exitText())
		}
		return fmt.Sprintf("the agent closed its stdout before answering %s", method)
	case ctx.Err() != nil:
		return fmt.Sprintf("no answer to %s within %s", method, timeout)
	}
	return fmt.Sprintf("%s: %v", method, err)
}

func (p *probe) initialize(ctx context.Context) bool {
	start := time.Now()
	ictx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	res, err := p.client.Initialize(ictx)
	took := time.Since(start)
	var perr *acp.ProtocolError
	if err != nil && !(errors.As(err, &perr) && res != nil) {
		c := mkCheck(CheckInitialize, Fail, p.callFailure("initialize", err, ictx, p.opts.Timeout))
		c.DurationMs = ms(took)
		if ictx.Err() != nil && ctx.Err() == nil {
			c.Hint = "a slow agent may need a longer timeout; an agent that waits for something else first (a login, a prompt on stdin) never answers"
		}
		p.add(c)
		p.skipRest(CheckProtocol, "skipped: initialize was not answered")
		return false
	}
	c := mkCheck(CheckInitialize, Pass, "answered")
	c.DurationMs = ms(took)
	p.add(c)
	p.rep.AgentInfo = res.AgentInfo
	v := res.ProtocolVersion
	p.rep.ProtocolVersion = &v
	p.rep.AgentCapabilities = res.AgentCapabilities
	p.rep.AuthMethods = res.AuthMethods
	if perr != nil {
		c := mkCheck(CheckProtocol, Fail, fmt.Sprintf("the agent answered protocolVersion %d; harness speaks ACP version %d", v, acp.ProtocolVersion))
		if v > acp.ProtocolVersion {
			c.Hint = "the agent must also speak v1 and answer 1 when the client asks for 1 (version negotiation, ACP §initialize)"
		}
		p.add(c)
	} else {
		p.add(mkCheck(CheckProtocol, Pass, "1"))
	}
	switch info := res.AgentInfo; {
	case info == nil:
		c := mkCheck(CheckAgentInfo, Warn, "initialize sent no agentInfo (a SHOULD today): records will not name the agent")
		p.add(c)
	case info.Name == "" || info.Version == "":
		p.add(mkCheck(CheckAgentInfo, Warn, fmt.Sprintf("incomplete agentInfo: name %q, version %q", info.Name, info.Version)))
	default:
		s := info.Name + " " + info.Version
		if info.Title != "" {
			s += " (" + info.Title + ")"
		}
		p.add(mkCheck(CheckAgentInfo, Pass, s))
	}
	p.add(capabilitiesCheck(res))
	if perr != nil {
		p.skipRest(CheckAuthenticate, "skipped: the agent does not speak ACP version 1")
		return false
	}
	return true
}

// capabilitiesCheck describes what the agent advertised.
func capabilitiesCheck(res *acp.InitializeResponse) Check {
	var caps struct {
		LoadSession        *bool                      `json:"loadSession"`
		PromptCapabilities map[string]json.RawMessage `json:"promptCapabilities"`
		MCPCapabilities    map[string]json.RawMessage `json:"mcpCapabilities"`
		SessionCaps        map[string]json.RawMessage `json:"sessionCapabilities"`
	}
	if len(res.AgentCapabilities) > 0 && string(res.AgentCapabilities) != "null" {
		if err := json.Unmarshal(res.AgentCapabilities, &caps); err != nil {
			return mkCheck(CheckCapabilities, Fail, "agentCapabilities do not decode: "+err.Error())
		}
	}
	var parts []string
	parts = append(parts, "loadSession "+boolText(caps.LoadSession != nil && *caps.LoadSession))
	parts = append(parts, "prompt: text, resource_link"+extraList(caps.PromptCapabilities, "image", "audio", "embeddedContext"))
	parts = append(parts, "mcp: "+flagList(caps.MCPCapabilities, "http", "sse"))
	if len(caps.SessionCaps) > 0 {
		parts = append(parts, "session: "+strings.Join(sortedKeys(caps.SessionCaps), ", "))
	}
	var auth []string
	for _, m := range res.AuthMethods {
		s := m.ID
		if m.Type != "" && m.Type != "agent" {
			s += " (" + m.Type + ")"
		}
		auth = append(auth, s)
	}
	if len(auth) == 0 {
		parts = append(parts, "auth methods: none")
	} else {
		parts = append(parts, "auth methods: "+strings.Join(auth, ", "))
	}
	return mkCheck(CheckCapabilities, Pass, strings.Join(parts, "; "))
}

// extraList is flagList for additions to a baseline: ", image, audio" or "".
func extraList(m map[string]json.RawMessage, known ...string) string {
	if s := flagList(m, known...); s != "none" {
		return ", " + s
	}
	return ""
}

func boolText(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// flagList names the capability flags that are on (true, or an object),
// and says "none" when none is; keys beyond the listed ones are added.
func flagList(m map[string]json.RawMessage, known ...string) string {
	var on []string
	seen := map[string]bool{}
	for _, k := range append(known, sortedKeys(m)...) {
		if seen[k] || k == "_meta" {
			continue
		}
		seen[k] = true
		v, ok := m[k]
		if !ok {
			continue
		}
		s := strings.TrimSpace(string(v))
		if s != "false" && s != "null" {
			on = append(on, k)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ", ")
}

func (p *probe) authenticate(ctx context.Context) bool {
	if p.opts.Auth == "" {
		detail := "not asked for (no auth method chosen)"
		if len(p.rep.AuthMethods) == 0 {
			detail = "not asked for; the agent offers no auth method"
		}
		p.add(mkCheck(CheckAuthenticate, Skip, detail))
		return true
	}
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	err := p.client.Authenticate(actx, p.opts.Auth)
	c := mkCheck(CheckAuthenticate, Pass, fmt.Sprintf("method %q accepted", p.opts.Auth))
	c.Required = true
	c.DurationMs = ms(time.Since(start))
	if err != nil {
		c.Status = Fail
		c.Detail = fmt.Sprintf("method %q: %s", p.opts.Auth, p.callFailure("authenticate", err, actx, p.opts.Timeout))
		if ids := p.authIDs(); ids != "" {
			c.Hint = "the agent offers: " + ids
		}
		p.add(c)
		p.skipRest(CheckSessionNew, "skipped: authenticate failed")
		return false
	}
	p.add(c)
	return true
}

func (p *probe) authIDs() string {
	var ids []string
	for _, m := range p.rep.AuthMethods {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ", ")
}

func (p *probe) newSession(ctx context.Context) bool {
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	mark := p.wire.mark()
	res, err := p.client.NewSession(sctx, p.opts.Cwd, nil)
	took := time.Since(start)
	if err != nil {
		c := mkCheck(CheckSessionNew, Fail, fmt.Sprintf("cwd %s: %s", p.opts.Cwd, p.callFailure("session/new", err, sctx, p.opts.Timeout)))
		c.DurationMs = ms(took)
		var rpcErr *jsonrpc2.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == acp.CodeAuthRequired {
			p.rep.AuthRequired = true
			c.Detail = "authentication required: " + c.Detail
			if ids := p.authIDs(); ids != "" {
				c.Hint = "rerun with one of the agent's auth methods; it offers: " + ids
			} else {
				c.Hint = "the agent asks for authentication but offers no auth method in initialize"
			}
		}
		p.add(c)
		p.skipRest(CheckSetupUpdates, "skipped: no session")
		return false
	}
	p.rep.SessionID = res.SessionID
	c := mkCheck(CheckSessionNew, Pass, fmt.Sprintf("sessionId %q", res.SessionID))
	c.DurationMs = ms(took)
	p.add(c)
	p.client.Attach(res.SessionID, p.opts.Cwd, p.obs)
	setup := p.wire.updatesBetween(mark, p.wire.answerOf("session/new", mark))
	p.rep.SetupUpdates = len(setup)
	p.rep.SetupKinds = setup
	if len(setup) == 0 {
		p.add(mkCheck(CheckSetupUpdates, Pass, "none"))
	} else {
		p.add(mkCheck(CheckSetupUpdates, Pass, fmt.Sprintf("%d (%s): allowed by ACP; harness records them with phase setup", len(setup), kindSummary(setup))))
	}
	return true
}

type turnEnd struct {
	resp *acp.PromptResponse
	err  error
	at   time.Time
}

// runTurn sends a prompt and waits for its answer. With cancel set it sends
// session/cancel once the first update of the turn arrives or CancelAfter
// has passed, whichever is first, and then waits CancelGrace. ok is false
// when the turn did not end (no answer; the agent is then killed).
func (p *probe) runTurn(ctx context.Context, text string, cancel bool) (t *Turn, end turnEnd, ok bool) {
	t = &Turn{Prompt: text}
	first := p.obs.beginTurn()
	mark := p.wire.mark()
	start := time.Now()
	done := make(chan turnEnd, 1)
	go func() {
		resp, err := p.client.Prompt(context.Background(), p.rep.SessionID, []acp.ContentBlock{acp.TextBlock(text)})
		done <- turnEnd{resp, err, time.Now()}
	}()
	timeout := time.NewTimer(p.opts.Timeout)
	defer timeout.Stop()
	var cancelAt time.Time
	var cancelTimer <-chan time.Time
	if cancel {
		cancelTimer = time.After(p.opts.CancelAfter)
	} else {
		first = nil
	}
	sendCancel := func() {
		cancelAt = time.Now()
		t.CancelSent = true
		p.client.Cancel(context.Background(), p.rep.SessionID)
		timeout.Reset(p.opts.CancelGrace)
		cancelTimer, first = nil, nil
	}
	finish := func(e turnEnd) (*Turn, turnEnd, bool) {
		t.DurationMs = e.at.Sub(start).Milliseconds()
		t.Output = p.obs.output()
		t.Updates = len(p.wire.updatesBetween(mark, p.wire.answerOf("session/prompt", mark)))
		if e.resp != nil {
			t.StopReason = e.resp.StopReason
		}
		if !cancelAt.IsZero() {
			t.CancelToAnswerMs = ms(e.at.Sub(cancelAt))
		}
		return t, e, true
	}
	for {
		select {
		case e := <-done:
			if e.err != nil {
				t.Error = p.callFailure("session/prompt", e.err, context.Background(), p.opts.Timeout)
				if errors.Is(e.err, acp.ErrConnectionClosed) {
					_, e, _ := finish(e)
					return t, e, false
				}
			}
			return finish(e)
		case <-p.proc.Exited():
			p.gone = true
			e := <-done
			t.Error = fmt.Sprintf("the agent exited during the turn (%s)", p.exitText())
			_, e, _ = finish(e)
			return t, e, false
		case <-first:
			sendCancel()
		case <-cancelTimer:
			sendCancel()
		case <-timeout.C:
			if cancel && !t.CancelSent {
				sendCancel()
				continue
			}
			if t.CancelSent {
				t.Error = fmt.Sprintf("no answer within %s of session/cancel; the agent was killed", p.opts.CancelGrace)
			} else {
				t.Error = fmt.Sprintf("no answer within %s", p.opts.Timeout)
				// Ask it to stop, as the harness would, before killing it.
				p.client.Cancel(context.Background(), p.rep.SessionID)
				select {
				case e := <-done:
					t.Error += "; after session/cancel it answered"
					if e.resp != nil {
						t.Error += fmt.Sprintf(" stopReason %q", e.resp.StopReason)
					}
					finish(e)
					return t, e, false
				case <-time.After(p.opts.CancelGrace):
					t.Error += fmt.Sprintf(", nor within %s of session/cancel; the agent was killed", p.opts.CancelGrace)
				}
			}
			p.proc.Kill()
			p.gone = true
			e := <-done
			finish(e)
			return t, e, false
		case <-ctx.Done():
			t.Error = "interrupted"
			p.proc.Kill()
			p.gone = true
			e := <-done
			finish(e)
			return t, e, false
		}
	}
}

// settle waits for late updates after a turn and counts them.
func (p *probe) settle(t *Turn, from int) {
	if p.opts.Settle > 0 && !p.gone {
		time.Sleep(p.opts.Settle)
	}
	late := p.wire.updatesBetween(from, -1)
	t.LateUpdates = len(late)
	t.LateKinds = late
}

// isV1StopReason says whether s is one of the stop reasons of ACP v1.
func isV1StopReason(s string) bool {
	switch s {
	case acp.StopEndTurn, acp.StopMaxTokens, acp.StopMaxTurnRequests, acp.StopRefusal, acp.StopCancelled:
		return true
	}
	return false
}

func (p *probe) prompt(ctx context.Context) bool {
	mark := p.wire.mark()
	t, end, ok := p.runTurn(ctx, p.opts.Prompt, false)
	p.rep.Prompt = t
	c := mkCheck(CheckPrompt, Pass, "")
	c.DurationMs = &t.DurationMs
	if !ok || end.err != nil {
		c.Status, c.Detail = Fail, t.Error
		if t.Error == "" && end.err != nil {
			c.Detail = end.err.Error()
		}
		var rpcErr *jsonrpc2.Error
		if errors.As(end.err, &rpcErr) && rpcErr.Code == acp.CodeAuthRequired {
			p.rep.AuthRequired = true
			c.Hint = "the agent wants authentication: rerun with one of its auth methods"
			if ids := p.authIDs(); ids != "" {
				c.Hint += "; it offers: " + ids
			}
		}
		p.add(c)
		return false
	}
	c.Detail = fmt.Sprintf("stopReason %q after %d update(s)", t.StopReason, t.Updates)
	if out := oneLine(t.Output, 80); out != "" {
		c.Detail += fmt.Sprintf("; said %q", out)
	}
	p.add(c)
	p.add(stopReasonCheck(t.StopReason))
	p.settle(t, p.wire.answerOf("session/prompt", mark)+1)
	if t.LateUpdates == 0 {
		p.add(mkCheck(CheckLateUpdates, Pass, fmt.Sprintf("none within %s", p.opts.Settle)))
	} else {
		p.add(mkCheck(CheckLateUpdates, Pass, fmt.Sprintf("%d within %s (%s): allowed by ACP; harness keeps them for its settle time and records them with phase late",
			t.LateUpdates, p.opts.Settle, kindSummary(t.LateKinds))))
	}
	return true
}

func stopReasonCheck(s string) Check {
	switch {
	case s == "":
		c := mkCheck(CheckStopReason, Fail, "the prompt answer has no stopReason")
		c.Hint = "session/prompt must answer {stopReason: end_turn|max_tokens|max_turn_requests|refusal|cancelled}"
		return c
	case !isV1StopReason(s):
		return mkCheck(CheckStopReason, Fail, fmt.Sprintf("%q is not one of end_turn, max_tokens, max_turn_requests, refusal, cancelled", s))
	}
	return mkCheck(CheckStopReason, Pass, s)
}

func (p *probe) cancel(ctx context.Context) {
	if p.opts.SkipCancel {
		p.add(mkCheck(CheckCancel, Skip, "skipped (not asked for)"))
		return
	}
	t, end, ok := p.runTurn(ctx, p.opts.CancelPrompt, true)
	p.rep.Cancel = t
	c := mkCheck(CheckCancel, Pass, "")
	c.DurationMs = &t.DurationMs
	switch {
	case !ok:
		c.Status, c.Detail = Fail, t.Error
		c.Hint = "on session/cancel an agent must stop and answer the prompt with stopReason \"cancelled\""
	case !t.CancelSent:
		c.Status = Skip
		c.Detail = fmt.Sprintf("not exercised: the turn ended (stopReason %q) before session/cancel was sent; that is not a failure", t.StopReason)
		c.Hint = "give a longer cancel prompt to see cancel handling"
	case end.err != nil:
		c.Status, c.Detail = Fail, "after session/cancel: "+t.Error
		c.Hint = "an agent must catch its abort and answer stopReason \"cancelled\", not an error (ACP prompt-turn cancellation)"
	case t.StopReason == acp.StopCancelled:
		c.Detail = fmt.Sprintf("answered stopReason \"cancelled\" %d ms after session/cancel", *t.CancelToAnswerMs)
	default:
		c.Status = Warn
		c.Detail = fmt.Sprintf("answered stopReason %q %d ms after session/cancel: the turn may have ended before the cancel landed; that is not a failure",
			t.StopReason, *t.CancelToAnswerMs)
		c.Hint = "give a longer cancel prompt to see cancel handling"
	}
	p.add(c)
}

// finishChecks collects stdout junk and stderr, then closes stdin and sees
// whether the agent exits.
func (p *probe) finishChecks(ctx context.Context) {
	if p.proc == nil {
		p.add(mkCheck(CheckStdout, Skip, "skipped: the agent did not start"))
		p.add(mkCheck(CheckStderr, Skip, "skipped: the agent did not start"))
		p.add(mkCheck(CheckEOF, Skip, "skipped: the agent did not start"))
		return
	}
	eof := p.eof()
	// Junk arriving outside a session is kept as strays.
	if strays, _ := p.client.TakeStrays(); len(strays) > 0 {
		for _, s := range strays {
			if s.Junk != nil {
				p.obs.Junk(*s.Junk)
			}
		}
	}
	junk, n := p.obs.junk()
	p.rep.Junk, p.rep.JunkCount = junk, n
	echoes, first := p.wire.echoed()
	switch {
	case echoes > 0:
		c := mkCheck(CheckStdout, Fail, fmt.Sprintf("the agent writes non-protocol output to stdout: %d line(s) are the probe's own messages sent back, first: %q", echoes, oneLine(first, 80)))
		c.Hint = "an ACP agent answers the client's requests; this one echoes its input (is the command a shell or cat rather than the agent's ACP mode?)"
		p.add(c)
	case n == 0:
		p.add(mkCheck(CheckStdout, Pass, "no junk lines"))
	default:
		c := mkCheck(CheckStdout, Fail, fmt.Sprintf("the agent writes non-protocol output to stdout: %d line(s), first: %q (%s)", n, oneLine(junk[0].Text, 80), junk[0].Reason))
		c.Hint = "ACP agents must write only protocol messages to stdout (logs go to stderr); harness records such lines as stdout_junk events and goes on"
		p.add(c)
	}
	p.rep.StderrTail = p.proc.StderrTail()
	if s := strings.TrimSpace(p.rep.StderrTail); s == "" {
		p.add(mkCheck(CheckStderr, Pass, "empty"))
	} else {
		lines := strings.Split(s, "\n")
		p.add(mkCheck(CheckStderr, Pass, fmt.Sprintf("%d line(s), last: %s", len(lines), oneLine(lines[len(lines)-1], 100))))
	}
	p.add(eof)
}

// eof closes the agent's stdin and waits EOFGrace for it to exit.
func (p *probe) eof() Check {
	if p.exited(0) {
		p.exitFacts()
		return mkCheck(CheckEOF, Skip, fmt.Sprintf("not seen: the agent had already ended (%s)", p.exitText()))
	}
	start := time.Now()
	p.proc.Stdin().Close()
	if p.exited(p.opts.EOFGrace) {
		p.exitFacts()
		yes := true
		p.rep.ExitedOnEOF = &yes
		c := mkCheck(CheckEOF, Pass, fmt.Sprintf("exited %d ms after stdin closed (%s)", time.Since(start).Milliseconds(), p.exitText()))
		return c
	}
	no := false
	p.rep.ExitedOnEOF = &no
	p.proc.Kill()
	p.gone = true
	p.exitFacts()
	c := mkCheck(CheckEOF, Fail, fmt.Sprintf("still running %s after its stdin closed; killed", p.opts.EOFGrace))
	c.Hint = "an agent should exit when its stdin closes; harness kills the process group after the cancel grace time, so this costs time, not records"
	return c
}

func (p *probe) exitFacts() {
	code, sig := p.proc.ExitStatus()
	if sig != "" {
		p.rep.ExitSignal = sig
	} else {
		p.rep.ExitCode = &code
	}
}

// kindSummary counts update kinds: "available_commands_update ×2, plan".
func kindSummary(kinds []string) string {
	counts := map[string]int{}
	var order []string
	for _, k := range kinds {
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	var parts []string
	for _, k := range order {
		if counts[k] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
		} else {
			parts = append(parts, k)
		}
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// observer collects the session's message text, signals a turn's first
// update, and keeps junk lines.
type observer struct {
	mu     sync.Mutex
	first  chan struct{}
	text   strings.Builder
	jlines []JunkLine
	jcount int
}

// beginTurn resets the message text and returns a channel that receives
// once, at the turn's first update.
func (o *observer) beginTurn() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.first = make(chan struct{}, 1)
	o.text.Reset()
	return o.first
}

func (o *observer) output() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.text.String()
}

func (o *observer) junk() ([]JunkLine, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.jlines, o.jcount
}

// Update implements acp.Observer.
func (o *observer) Update(_ time.Time, u acp.Update, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.first != nil {
		select {
		case o.first <- struct{}{}:
		default:
		}
	}
	if u.Kind == acp.UpdateAgentMessageChunk && u.Chunk != nil {
		o.text.WriteString(u.Chunk.Text)
	}
}

// Notify implements acp.Observer.
func (o *observer) Notify(time.Time, string, json.RawMessage) {}

// RequestStarted implements acp.Observer.
func (o *observer) RequestStarted(*acp.Request) {}

// RequestDone implements acp.Observer.
func (o *observer) RequestDone(*acp.Request) {}

// Junk implements acp.Observer.
func (o *observer) Junk(j acp.Junk) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.jcount++
	if len(o.jlines) < maxJunk {
		o.jlines = append(o.jlines, JunkLine{Text: string(j.Line), Size: j.Size, Reason: j.Reason})
	}
}
