package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/sourcegraph/jsonrpc2"
)

// Observer receives what the agent sends for one session. Update, Notify,
// RequestStarted and Junk are called on the connection's read goroutine in
// the order the lines arrived and must return quickly; RequestDone is called
// from the goroutine that answered the request.
type Observer interface {
	// Update is a session/update. err is set when the update's fields do
	// not decode; u.Raw still holds it.
	Update(at time.Time, u Update, err error)
	// Notify is a notification other than session/update.
	Notify(at time.Time, method string, params json.RawMessage)
	// RequestStarted is a request from the agent, as it arrived.
	RequestStarted(r *Request)
	// RequestDone is the same request once it has been answered.
	RequestDone(r *Request)
	// Junk is a line on stdout that is not a JSON-RPC message.
	Junk(j Junk)
}

// Request is a request the agent made of the client and the answer given.
type Request struct {
	ID        jsonrpc2.ID
	Method    string
	SessionID string
	Params    json.RawMessage
	At        time.Time

	// Set before RequestDone.
	DoneAt time.Time
	Result json.RawMessage // the result sent, encoded
	Err    *jsonrpc2.Error // the error sent instead
	Note   string          // why: the policy decision or the denial reason
}

// Options configure a Client.
type Options struct {
	// ClientInfo names this client in initialize.
	ClientInfo Implementation
	// Permission is the policy for session/request_permission.
	Permission PermissionPolicy
	// FS, when set, serves fs/* inside each session's workspace.
	FS *FSOptions
	// Terminal, when set, serves terminal/* inside each session's workspace.
	Terminal *TerminalOptions
	// Logger receives jsonrpc2's own diagnostics; nil discards them.
	Logger jsonrpc2.Logger
	// Tap, if set, sees every line in both directions (out = written to the
	// agent), for wire logs.
	Tap func(out bool, at time.Time, line []byte)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Limits bound what the agent's fs and terminal requests may take.
	Limits Limits
	// OnJunk, when set, is told of every line on the agent's stdout that
	// is not a JSON-RPC message, as it arrives (it is recorded as well).
	OnJunk func(Junk)
}

// Limits bound the agent's fs and terminal requests, so that no agent can
// exhaust the harness: over a limit the agent gets a JSON-RPC error.
type Limits struct {
	// Requests is how many fs and terminal requests of one session run
	// at once; 0 means 8.
	Requests int
	// Bytes is how many bytes of file content the fs requests of all
	// sessions may hold at once; 0 means 64 MiB.
	Bytes int64
	// Timeout is the deadline of each fs and terminal request; 0 means 10
	// minutes. terminal/wait_for_exit waits at most this long.
	Timeout time.Duration
}

func (l Limits) requests() int {
	if l.Requests <= 0 {
		return 8
	}
	return l.Requests
}

func (l Limits) bytes() int64 {
	if l.Bytes <= 0 {
		return 64 << 20
	}
	return l.Bytes
}

func (l Limits) timeout() time.Duration {
	if l.Timeout <= 0 {
		return 10 * time.Minute
	}
	return l.Timeout
}

// byteBudget counts the bytes of file content requests hold.
type byteBudget struct {
	mu    sync.Mutex
	used  int64
	limit int64
}

// take reserves n bytes, or reports that they would pass the limit.
func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Client is one connection to an agent.
type Client struct {
	conn   *jsonrpc2.Conn
	stream *lineStream
	opts   Options
	now    func() time.Time

	mu        sync.Mutex
	sessions  map[string]*session
	active    *session
	unclaimed []Stray
	dropped   int
	// over holds the sessions detached: their cases are over.
	over     map[string]bool
	inflight map[string]context.CancelFunc
	init     *InitializeResponse
	budget   *byteBudget
	// prompts maps the ids of the session/prompt requests out to their
	// sessions, so the read goroutine knows a turn ended the moment its
	// answer is read.
	prompts   map[uint64]string
	promptSeq uint64
}

// promptIDBase is where the ids of session/prompt requests start, far from
// the ids jsonrpc2 numbers the other requests with.
const promptIDBase = 1 << 40

// Answerer is an Observer that wants to know when a prompt turn was
// answered: Answered is called on the read goroutine as the answer is read,
// before any message that follows it on the wire.
type Answerer interface {
	Answered(at time.Time)
}

// Stray is a message for a session no observer was attached to when it
// arrived, or a line that belonged to none.
type Stray struct {
	At        time.Time
	SessionID string
	Update    *Update
	UpdateErr error
	Method    string
	Params    json.RawMessage
	Junk      *Junk
	// Over says the message names a session that was detached: its case
	// is over (an update the agent sent after the case's record was
	// sealed), so it is late, not for no session.
	Over bool
}

// maxUnclaimed bounds the messages kept for sessions nobody observes.
const maxUnclaimed = 10000

type session struct {
	id        string
	cwd       string
	obs       Observer
	cancelled bool
	// prompting is set while a session/prompt is out: permission asked
	// for outside a turn (after it answered) is never granted.
	prompting bool
	busy      int // fs and terminal requests running
	open      map[*Request]context.CancelFunc
	terms     *terminals
}

// Connect starts a client on an agent's stdout (r) and stdin (w). It sends
// nothing; call Initialize first.
func Connect(ctx context.Context, r io.Reader, w io.WriteCloser, opts Options) *Client {
	c := &Client{
		opts:     opts,
		now:      opts.Now,
		sessions: map[string]*session{},
		over:     map[string]bool{},
		inflight: map[string]context.CancelFunc{},
		budget:   &byteBudget{limit: opts.Limits.bytes()},
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.opts.Permission == "" {
		c.opts.Permission = PolicyAllow
	}
	c.stream = newLineStream(r, w, c.now, c.onJunk, opts.Tap)
	c.stream.notify = c.onNotification
	c.stream.response = c.onResponse
	logger := opts.Logger
	if logger == nil {
		logger = discardLogger{}
	}
	c.conn = jsonrpc2.NewConn(ctx, c.stream, handlerFunc(c.handle), jsonrpc2.SetLogger(logger))
	return c
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// Done is closed when the connection has ended (agent exit or Close).
func (c *Client) Done() <-chan struct{} { return c.conn.DisconnectNotify() }

// Close closes the connection and the agent's stdin, and kills the
// terminal commands of every session still attached: none outlives the
// agent that started it.
func (c *Client) Close() error {
	err := c.conn.Close()
	c.mu.Lock()
	var terms []*terminals
	for _, s := range c.sessions {
		if s.terms != nil {
			terms = append(terms, s.terms)
		}
	}
	c.mu.Unlock()
	for _, ts := range terms {
		ts.releaseAll()
	}
	return err
}

// Capabilities returns what this client advertises, from its options.
func (c *Client) Capabilities() ClientCapabilities {
	var caps ClientCapabilities
	if c.opts.FS != nil {
		caps.FS = FileSystemCapability{ReadTextFile: true, WriteTextFile: true}
	}
	caps.Terminal = c.opts.Terminal != nil
	return caps
}

// ProtocolError is an agent that answered in a way this client cannot work
// with, such as another protocol version.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return e.Msg }

// ErrConnectionClosed is returned by calls cut short because the agent went
// away (it exited or closed its stdout).
var ErrConnectionClosed = errors.New("connection to the agent closed")

// Initialize sends initialize and checks the agent's protocol version.
// Nothing else may be sent before it returns.
func (c *Client) Initialize(ctx context.Context) (*InitializeResponse, error) {
	info := c.opts.ClientInfo
	params := InitializeRequest{
		ProtocolVersion:    ProtocolVersion,
		ClientCapabilities: c.Capabilities(),
		ClientInfo:         &info,
	}
	var res InitializeResponse
	if err := c.call(ctx, MethodInitialize, params, &res); err != nil {
		return nil, err
	}
	if res.ProtocolVersion != ProtocolVersion {
		return &res, &ProtocolError{Msg: fmt.Sprintf("agent speaks ACP protocol version %d; this client speaks %d", res.ProtocolVersion, ProtocolVersion)}
	}
	c.mu.Lock()
	c.init = &res
	c.mu.Unlock()
	return &res, nil
}

// Authenticate sends authenticate with the given method id.
func (c *Client) Authenticate(ctx context.Context, methodID string) error {
	return c.call(ctx, MethodAuthenticate, AuthenticateRequest{MethodID: methodID}, nil)
}

// NewSession creates a session whose working directory (and workspace, for
// fs and terminal requests) is cwd, an absolute path. Updates the agent
// sends before it answers are kept and handed to the observer by Attach.
func (c *Client) NewSession(ctx context.Context, cwd string, mcpServers []json.RawMessage) (*NewSessionResponse, error) {
	return c.NewSessionMeta(ctx, cwd, mcpServers, nil)
}

// NewSessionMeta is NewSession with a _meta object in the request (none
// when meta is empty).
func (c *Client) NewSessionMeta(ctx context.Context, cwd string, mcpServers []json.RawMessage, meta json.RawMessage) (*NewSessionResponse, error) {
	if mcpServers == nil {
		mcpServers = []json.RawMessage{}
	}
	var res NewSessionResponse
	if err := c.call(ctx, MethodSessionNew, NewSessionRequest{Cwd: cwd, MCPServers: mcpServers, Meta: meta}, &res); err != nil {
		return nil, err
	}
	if res.SessionID == "" {
		return &res, &ProtocolError{Msg: "session/new answered without a sessionId"}
	}
	return &res, nil
}

// SetSessionMode switches a session to one of the modes its session/new
// answer listed (session/set_mode).
func (c *Client) SetSessionMode(ctx context.Context, sessionID, modeID string) error {
	var res json.RawMessage
	if err := c.call(ctx, MethodSessionSetMode, SetSessionModeRequest{SessionID: sessionID, ModeID: modeID}, &res); err != nil {
		return err
	}
	return nil
}

// Attach registers the session (see Register) and makes it the active one:
// the one that gets what names no session (junk lines, notifications
// without a sessionId).
func (c *Client) Attach(sessionID, cwd string, obs Observer) {
	c.Register(sessionID, cwd, obs)
	c.Activate(sessionID)
}

// Activate makes a registered session the active one.
func (c *Client) Activate(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[sessionID]
	if s == nil {
		return
	}
	c.active = s
	// Extension notifications about the agent as a whole, sent before
	// any session was active (claude-agent-acp's _auth/status_update at
	// startup), go on the first active session's record.
	kept := c.unclaimed[:0]
	for _, m := range c.unclaimed {
		if m.SessionID == "" && strings.HasPrefix(m.Method, "_") && !hasSessionID(m.Params) {
			s.obs.Notify(m.At, m.Method, m.Params)
			continue
		}
		kept = append(kept, m)
	}
	c.unclaimed = kept
}

// hasSessionID says whether a notification's params name a session.
func hasSessionID(params json.RawMessage) bool {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(params, &p)
	return p.SessionID != ""
}

// Register routes the session's messages to obs, first handing it, in
// order, whatever arrived for the session before. The session's fs and
// terminal requests are confined to cwd.
func (c *Client) Register(sessionID, cwd string, obs Observer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &session{id: sessionID, cwd: cwd, obs: obs, open: map[*Request]context.CancelFunc{}}
	if c.opts.Terminal != nil {
		s.terms = newTerminals(*c.opts.Terminal, cwd)
		if no, ok := obs.(NetworkObserver); ok {
			s.terms.onNet = no.Network
		}
	}
	c.sessions[sessionID] = s
	delete(c.over, sessionID)
	kept := c.unclaimed[:0]
	for _, m := range c.unclaimed {
		if m.SessionID == sessionID && m.Update != nil {
			obs.Update(m.At, *m.Update, m.UpdateErr)
			continue
		}
		kept = append(kept, m)
	}
	c.unclaimed = kept
}

// Detach stops routing the session's messages and releases its terminals.
// Later messages for it are kept as strays marked Over.
func (c *Client) Detach(sessionID string) {
	c.mu.Lock()
	s := c.sessions[sessionID]
	delete(c.sessions, sessionID)
	if s != nil {
		c.over[sessionID] = true
	}
	if c.active == s {
		c.active = nil
	}
	c.mu.Unlock()
	if s != nil && s.terms != nil {
		s.terms.releaseAll()
	}
}

// TakeStrays returns and forgets the messages that reached no observer, and
// how many more were dropped because too many were kept.
func (c *Client) TakeStrays() ([]Stray, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, n := c.unclaimed, c.dropped
	c.unclaimed, c.dropped = nil, 0
	return out, n
}

// Prompt runs one prompt turn and returns the agent's answer. Every update
// the agent sent before answering has reached the observer when it
// returns. To stop a turn, call Cancel and keep waiting; cancelling ctx
// only abandons the wait.
func (c *Client) Prompt(ctx context.Context, sessionID string, prompt []ContentBlock) (*PromptResponse, error) {
	c.mu.Lock()
	if s := c.sessions[sessionID]; s != nil {
		s.cancelled, s.prompting = false, true
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if s := c.sessions[sessionID]; s != nil {
			s.prompting = false
		}
		c.mu.Unlock()
	}()
	c.mu.Lock()
	c.promptSeq++
	id := promptIDBase + c.promptSeq
	if c.prompts == nil {
		c.prompts = map[uint64]string{}
	}
	c.prompts[id] = sessionID
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.prompts, id)
		c.mu.Unlock()
	}()
	var res PromptResponse
	if err := c.call(ctx, MethodSessionPrompt, PromptRequest{SessionID: sessionID, Prompt: prompt}, &res, jsonrpc2.PickID(jsonrpc2.ID{Num: id})); err != nil {
		return nil, err
	}
	return &res, nil
}

// onResponse runs on the read goroutine for every response: the answer to
// a session/prompt ends its turn there and then, so updates read after it
// are late and permission asked after it is never granted.
func (c *Client) onResponse(rawID json.RawMessage, at time.Time) {
	id, err := strconv.ParseUint(string(rawID), 10, 64)
	if err != nil || id <= promptIDBase {
		return
	}
	c.mu.Lock()
	var obs Observer
	if sid, ok := c.prompts[id]; ok {
		if s := c.sessions[sid]; s != nil {
			s.prompting = false
			obs = s.obs
		}
	}
	c.mu.Unlock()
	if a, ok := obs.(Answerer); ok {
		a.Answered(at)
	}
}

// Cancel sends session/cancel and answers every permission request still
// open in the session with "cancelled"; later ones are answered the same
// way until the next prompt.
func (c *Client) Cancel(ctx context.Context, sessionID string) error {
	c.mu.Lock()
	if s := c.sessions[sessionID]; s != nil {
		s.cancelled = true
		for _, cancel := range s.open {
			cancel()
		}
	}
	c.mu.Unlock()
	return c.conn.Notify(ctx, MethodSessionCancel, CancelNotification{SessionID: sessionID})
}

// call makes a request and turns transport errors into ErrConnectionClosed.
// JSON-RPC error answers come back as *jsonrpc2.Error.
func (c *Client) call(ctx context.Context, method string, params, result any, opts ...jsonrpc2.CallOption) error {
	err := c.conn.Call(ctx, method, params, result, opts...)
	if err == nil {
		return nil
	}
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		return fmt.Errorf("%s: %w", method, rpcErr)
	}
	if errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("%s: %w", method, ErrConnectionClosed)
	}
	return fmt.Errorf("%s: %w", method, err)
}

// onNotification runs on the read goroutine for every notification, in
// wire order.
func (c *Client) onNotification(in inbound) {
	switch *in.method {
	case MethodSessionUpdate:
		c.onUpdate(in)
	case MethodCancelRequest:
		c.onCancelRequest(in.params)
		c.onNotify(in, *in.method)
	default:
		c.onNotify(in, *in.method)
	}
}

// handle runs for every request jsonrpc2 decoded (notifications never
// reach it: the stream handles them in wire order). It takes the request's
// raw params from the stream by the number the slim request carries.
func (c *Client) handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	in, ok := c.stream.take(req)
	if !ok || req.Notif {
		if !req.Notif {
			conn.ReplyWithError(ctx, req.ID, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "internal error: request params lost"})
		}
		return
	}
	c.onRequest(ctx, conn, req, in)
}

func (c *Client) onUpdate(in inbound) {
	var n SessionNotification
	if err := fastjson.Unmarshal(in.params, &n); err != nil || n.Update == nil {
		reason := "session/update without an update"
		if err != nil {
			reason = "session/update params do not decode: " + shortErr(err)
		}
		c.onJunk(Junk{At: in.at, Line: in.line, Size: len(in.line), Reason: reason})
		return
	}
	u, err := DecodeUpdate(n.Update)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[n.SessionID]; s != nil {
		s.obs.Update(in.at, u, err)
		return
	}
	c.keepStray(Stray{At: in.at, SessionID: n.SessionID, Update: &u, UpdateErr: err, Over: c.over[n.SessionID]})
}

// keepStray stores a message nobody observes; c.mu is held.
func (c *Client) keepStray(m Stray) {
	if len(c.unclaimed) >= maxUnclaimed {
		c.dropped++
		return
	}
	c.unclaimed = append(c.unclaimed, m)
}

func (c *Client) onNotify(in inbound, method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessionFor(in.params); s != nil {
		s.obs.Notify(in.at, method, in.params)
		return
	}
	c.keepStray(Stray{At: in.at, Method: method, Params: in.params})
}

func (c *Client) onJunk(j Junk) {
	if c.opts.OnJunk != nil {
		c.opts.OnJunk(j)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active != nil {
		c.active.obs.Junk(j)
		return
	}
	c.keepStray(Stray{At: j.At, Junk: &j})
}

// sessionFor finds the session a message's params name, else the active
// one; c.mu is held.
func (c *Client) sessionFor(params json.RawMessage) *session {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(params, &p)
	if s := c.sessions[p.SessionID]; s != nil {
		return s
	}
	return c.active
}

func (c *Client) onCancelRequest(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.inflight[string(p.RequestID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *Client) onRequest(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request, in inbound) {
	r := &Request{ID: req.ID, Method: req.Method, Params: in.params, At: in.at}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(in.params, &p)
	r.SessionID = p.SessionID

	rctx, cancel := context.WithCancel(ctx)
	key := string(in.id)
	c.mu.Lock()
	s := c.sessions[r.SessionID]
	target := s
	if target == nil {
		target = c.active
	}
	c.inflight[key] = cancel
	late := false
	if s != nil && r.Method == MethodRequestPermission {
		s.open[r] = cancel
		if s.cancelled {
			cancel()
		}
		late = !s.prompting
	}
	if target != nil {
		target.obs.RequestStarted(r)
	}
	c.mu.Unlock()

	go func() {
		defer cancel()
		result, rpcErr, note := c.serve(rctx, s, r)
		if late {
			// Asked after the turn answered (while the harness still
			// listens for late updates): no turn is running to grant it to.
			result, rpcErr, note = RequestPermissionResponse{Outcome: PermissionOutcome{Outcome: "cancelled"}}, nil, "no turn running (asked after the turn ended)"
		}
		if r.Method == MethodRequestPermission && rpcErr == nil && rctx.Err() != nil {
			// session/cancel came while the policy decided: never approve
			// after a cancel.
			result, note = RequestPermissionResponse{Outcome: PermissionOutcome{Outcome: "cancelled"}}, "turn cancelled"
		}
		r.Note = note
		if rpcErr == nil && rctx.Err() != nil && r.Method != MethodRequestPermission {
			rpcErr = &jsonrpc2.Error{Code: CodeRequestCancelled, Message: "request cancelled"}
		}
		if rpcErr != nil {
			r.Err = rpcErr
			conn.ReplyWithError(ctx, req.ID, rpcErr)
		} else {
			b, err := json.Marshal(result)
			if err != nil {
				r.Err = &jsonrpc2.Error{Code: CodeInternalError, Message: err.Error()}
				conn.ReplyWithError(ctx, req.ID, r.Err)
			} else {
				r.Result = b
				conn.Reply(ctx, req.ID, json.RawMessage(b))
			}
		}
		r.DoneAt = c.now()
		c.mu.Lock()
		delete(c.inflight, key)
		if s != nil {
			delete(s.open, r)
		}
		c.mu.Unlock()
		if target != nil {
			target.obs.RequestDone(r)
		}
	}()
}

// serve answers one agent request: a result, or an error, and a note for
// the record.
func (c *Client) serve(ctx context.Context, s *session, r *Request) (any, *jsonrpc2.Error, string) {
	switch r.Method {
	case MethodRequestPermission:
		var p RequestPermissionRequest
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, invalidParams(err), "invalid params"
		}
		if ctx.Err() != nil {
			return RequestPermissionResponse{Outcome: PermissionOutcome{Outcome: "cancelled"}}, nil, "turn cancelled"
		}
		if s == nil {
			// Nothing may be approved for a session that is over (or was
			// never created).
			return RequestPermissionResponse{Outcome: PermissionOutcome{Outcome: "cancelled"}}, nil, "no such session (over or unknown)"
		}
		out, note := c.opts.Permission.Decide(p.Options)
		return RequestPermissionResponse{Outcome: out}, nil, note
	case MethodReadTextFile, MethodWriteTextFile:
		if c.opts.FS == nil {
			return nil, methodNotFound(r.Method), "fs is off: the client does not serve fs/* methods"
		}
		if s == nil {
			return nil, unknownSession(r.SessionID), "unknown session"
		}
		if e, note := c.admit(s); e != nil {
			return nil, e, note
		}
		type answer struct {
			res  any
			err  *jsonrpc2.Error
			note string
		}
		done := make(chan answer, 1)
		go func() {
			defer c.leave(s) // the slot is held until the work is over
			res, err, note := serveFS(*c.opts.FS, s.cwd, r, c.budget)
			done <- answer{res, err, note}
		}()
		timer := time.NewTimer(c.opts.Limits.timeout())
		defer timer.Stop()
		select {
		case a := <-done:
			return a.res, a.err, a.note
		case <-timer.C:
			msg := fmt.Sprintf("request timed out after %s", c.opts.Limits.timeout())
			return nil, &jsonrpc2.Error{Code: CodeInternalError, Message: msg}, msg
		}
	case MethodTerminalCreate, MethodTerminalOutput, MethodTerminalWaitForExit, MethodTerminalKill, MethodTerminalRelease:
		if c.opts.Terminal == nil {
			return nil, methodNotFound(r.Method), "terminal is off: the client does not serve terminal/* methods"
		}
		if s == nil {
			return nil, unknownSession(r.SessionID), "unknown session"
		}
		if e, note := c.admit(s); e != nil {
			return nil, e, note
		}
		defer c.leave(s)
		ctx, cancel := context.WithTimeout(ctx, c.opts.Limits.timeout())
		defer cancel()
		return s.terms.serve(ctx, r)
	}
	return nil, methodNotFound(r.Method), "method not supported"
}

// admit lets one more fs or terminal request of s run, or refuses it when
// as many as the limit already do.
func (c *Client) admit(s *session) (*jsonrpc2.Error, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.opts.Limits.requests(); s.busy >= n {
		msg := fmt.Sprintf("too many requests at once: at most %d fs and terminal requests of a session run together", n)
		return &jsonrpc2.Error{Code: CodeInternalError, Message: msg}, "refused: " + msg
	}
	s.busy++
	return nil, ""
}

func (c *Client) leave(s *session) {
	c.mu.Lock()
	s.busy--
	c.mu.Unlock()
}

func methodNotFound(method string) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: CodeMethodNotFound, Message: "method not found: " + method}
}

func invalidParams(err error) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: CodeInvalidParams, Message: "invalid params: " + err.Error()}
}

func unknownSession(id string) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: CodeResourceNotFound, Message: fmt.Sprintf("unknown session %q", id)}
}

// handlerFunc adapts a function to jsonrpc2.Handler.
type handlerFunc func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request)

func (f handlerFunc) Handle(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) { f(ctx, c, r) }
