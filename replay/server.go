package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"harness/acp"
	"harness/schemas"
	"harness/workspace"
)

// Options configures Serve.
type Options struct {
	// Timing sends every message at its recorded time (relative to the
	// start of its turn), so the replay takes as long as the recording;
	// without it everything goes out at once.
	Timing bool
	// Log gets warnings (nil: none).
	Log io.Writer
	// Version is the agentInfo version the replay reports.
	Version string
	// ApplyChanges makes each session's workspace what the recorded one
	// was at the end: before the last answer, the record's workspace
	// changes are applied to the session's cwd (which must be a fresh
	// copy of the same template: capture --workspace).
	ApplyChanges bool
}

// Serve speaks ACP as an agent on in and out, serving the library's
// recorded trials, until in ends or ctx is cancelled. It returns nil at
// the end of the input.
func Serve(ctx context.Context, lib *Library, in io.Reader, out io.Writer, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{
		ctx:      ctx,
		lib:      lib,
		opts:     opts,
		out:      out,
		sessions: map[string]*session{},
		pending:  map[int64]chan response{},
	}
	err := s.readLoop(in)
	cancel()
	s.wg.Wait()
	return err
}

type server struct {
	ctx  context.Context
	lib  *Library
	opts Options

	outMu sync.Mutex
	out   io.Writer
	wErr  error

	mu          sync.Mutex
	sessions    map[string]*session
	nextSession int
	nextReq     int64
	pending     map[int64]chan response
	wg          sync.WaitGroup
}

// session is one ACP session: the trial it replays once its first prompt
// has named it.
type session struct {
	id     string
	script *script
	// sentSetup is what went out before session/new answered: the setup
	// steps of the record the session was expected to replay.
	sentSetup []schemas.Step
	// unitErr answers the first prompt of a session whose client named a
	// trial the results do not hold.
	unitErr error
	turn    int           // prompts started
	busy    bool          // a turn is running
	cancel  chan struct{} // closed by session/cancel of the running turn
	// terminals maps the terminal ids of the record to the ones the
	// client gave this replay.
	terminals map[string]string
	// cwd is the session's working directory.
	cwd string
	// written holds the files the replay had the client write (through
	// fs/write_text_file, with placeholder text) as they were before,
	// nil for a file that did not exist; they are put back before the
	// last answer.
	written map[string]*original
}

// response is the client's answer to one of the replay's requests.
type response struct {
	Result json.RawMessage
	Error  *rpcError
}

// message is any JSON-RPC message from the client.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

func (s *server) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, format+"\n", args...)
	}
}

// writeLine writes one line; the first write error stops the replay.
func (s *server) writeLine(b []byte) error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.wErr != nil {
		return s.wErr
	}
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	if _, err := s.out.Write(line); err != nil {
		s.wErr = fmt.Errorf("replay: write: %w", err)
	}
	return s.wErr
}

func (s *server) send(v any) error { return s.writeLine(mustMarshal(v)) }

func (s *server) reply(id json.RawMessage, result any) error {
	return s.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
}

func (s *server) replyErr(id json.RawMessage, e *rpcError) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return s.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *rpcError       `json:"error"`
	}{"2.0", id, e})
}

func (s *server) notify(method string, params json.RawMessage) error {
	return s.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", method, params})
}

func (s *server) update(sessionID string, u json.RawMessage) error {
	return s.notify(acp.MethodSessionUpdate, mustMarshal(struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}{sessionID, u}))
}

// call sends a request and, with wait, waits for its answer.
func (s *server) call(method string, params json.RawMessage, wait bool) (response, error) {
	s.mu.Lock()
	s.nextReq++
	id := s.nextReq
	ch := make(chan response, 1)
	if wait {
		s.pending[id] = ch
	}
	s.mu.Unlock()
	err := s.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int64           `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", id, method, params})
	if err != nil || !wait {
		return response{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-s.ctx.Done():
		return response{}, s.ctx.Err()
	}
}

func (s *server) readLoop(in io.Reader) error {
	br := bufio.NewReaderSize(in, 1<<16)
	for {
		line, size, cut, err := acp.ReadLine(br, acp.MaxLineBytes)
		if size > 0 && !cut {
			if t := bytes.TrimSpace(line); len(t) > 0 {
				s.handle(append([]byte(nil), t...))
			}
		} else if cut {
			s.replyErr(nil, &rpcError{Code: acp.CodeParseError, Message: "Parse error: line too long"})
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("replay: read: %w", err)
		}
		if s.ctx.Err() != nil {
			return nil
		}
	}
}

func (s *server) handle(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.replyErr(nil, &rpcError{Code: acp.CodeParseError, Message: "Parse error: " + err.Error()})
		return
	}
	isNotif := len(m.ID) == 0 || string(m.ID) == "null"
	switch {
	case m.Method != nil && isNotif:
		if *m.Method == acp.MethodSessionCancel {
			var p acp.CancelNotification
			json.Unmarshal(m.Params, &p)
			s.mu.Lock()
			if ss := s.sessions[p.SessionID]; ss != nil && ss.busy {
				select {
				case <-ss.cancel:
				default:
					close(ss.cancel)
				}
			}
			s.mu.Unlock()
		}
	case m.Method != nil:
		s.request(m)
	default:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		s.mu.Lock()
		ch, ok := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if err != nil || !ok {
			s.logf("replay: an answer to request %s, which is not waiting", m.ID)
			return
		}
		ch <- response{Result: m.Result, Error: m.Error}
	}
}

func (s *server) request(m message) {
	switch *m.Method {
	case acp.MethodInitialize:
		var p acp.InitializeRequest
		if err := json.Unmarshal(m.Params, &p); err != nil {
			s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidParams, Message: "Invalid params: " + err.Error()})
			return
		}
		s.reply(m.ID, acp.InitializeResponse{
			ProtocolVersion:   acp.ProtocolVersion,
			AgentCapabilities: mustMarshal(map[string]any{"loadSession": false, "_meta": map[string]bool{acp.UnitMetaKey: true}}),
			AgentInfo:         &acp.Implementation{Name: "harness-replay", Title: "harness replay", Version: s.opts.Version},
		})
	case acp.MethodAuthenticate:
		s.reply(m.ID, struct{}{})
	case acp.MethodSessionNew:
		var p acp.NewSessionRequest
		if err := json.Unmarshal(m.Params, &p); err != nil {
			s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidParams, Message: "Invalid params: " + err.Error()})
			return
		}
		s.mu.Lock()
		s.nextSession++
		ss := &session{id: "replay-" + strconv.Itoa(s.nextSession), terminals: map[string]string{},
			cwd: p.Cwd, written: map[string]*original{}}
		var meta json.RawMessage
		if u, ok := acp.ReadUnitMeta(p.Meta); ok {
			// The client said which trial this is (harness does, as the
			// replay asks in initialize).
			rec, err := s.lib.takeUnit(u)
			if err != nil {
				ss.unitErr = err
			} else {
				ss.sentSetup = setupSteps(rec)
				ss.script = buildScript(rec, ss.sentSetup)
				if o := rec.SimulatedUser; o != nil {
					// The simulated user's turns come back with the
					// session: the client plays them, asking no user.
					meta = acp.SessionUserMeta(acp.UserMeta{Turns: rec.Input.List, Ended: o.Ended, Reason: o.Reason})
				}
			}
		} else if rec := s.lib.expected(s.nextSession - 1); rec != nil {
			// What the agent sent before the first prompt (phase setup)
			// has to go out before the prompt says which record the
			// session is: it is the setup of the record expected next,
			// in the order the recorded run made its sessions.
			ss.sentSetup = setupSteps(rec)
		}
		s.sessions[ss.id] = ss
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if len(ss.sentSetup) > 0 {
				if err := s.play(ss, blockActions(ss.sentSetup, 0), time.Now(), nil); err != nil {
					return
				}
			}
			s.reply(m.ID, acp.NewSessionResponse{SessionID: ss.id, Meta: meta})
		}()
	case acp.MethodSessionPrompt:
		s.prompt(m)
	default:
		s.replyErr(m.ID, &rpcError{Code: acp.CodeMethodNotFound, Message: "Method not found: " + *m.Method})
	}
}

// prompt starts a turn: the first prompt of a session picks its record.
func (s *server) prompt(m message) {
	var p acp.PromptRequest
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidParams, Message: "Invalid params: " + err.Error()})
		return
	}
	text := ""
	for _, b := range p.Prompt {
		if b.Type == "text" {
			text = b.Text
			break
		}
	}
	s.mu.Lock()
	ss := s.sessions[p.SessionID]
	switch {
	case ss == nil:
		s.mu.Unlock()
		s.replyErr(m.ID, &rpcError{Code: acp.CodeResourceNotFound, Message: fmt.Sprintf("Resource not found: session %q", p.SessionID)})
		return
	case ss.busy:
		s.mu.Unlock()
		s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidRequest, Message: "a prompt turn is already running in session " + ss.id})
		return
	}
	if ss.unitErr != nil {
		s.mu.Unlock()
		s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidParams, Message: ss.unitErr.Error()})
		return
	}
	if ss.script == nil {
		rec, err := s.lib.take(text)
		if err != nil {
			s.mu.Unlock()
			s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidParams, Message: err.Error()})
			return
		}
		ss.script = buildScript(rec, ss.sentSetup)
	}
	ss.turn++
	n := ss.turn
	sc := ss.script
	if n > len(sc.turns) {
		s.mu.Unlock()
		s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidRequest, Message: fmt.Sprintf(
			"replay: case %q trial %d has %d recorded turns; this is turn %d", sc.rec.ID, sc.rec.Trial, len(sc.turns), n)})
		return
	}
	ts := &sc.turns[n-1]
	if text != ts.prompt {
		s.mu.Unlock()
		s.replyErr(m.ID, &rpcError{Code: acp.CodeInvalidParams, Message: fmt.Sprintf(
			"replay: turn %d of case %q trial %d was %.200q, not %.200q", n, sc.rec.ID, sc.rec.Trial, ts.prompt, text)})
		return
	}
	ss.busy = true
	ss.cancel = make(chan struct{})
	cancelCh := ss.cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.playTurn(ss, ts, m.ID, cancelCh, n == len(sc.turns))
	}()
}

// playTurn sends a turn's messages and its answer.
func (s *server) playTurn(ss *session, ts *turnScript, id json.RawMessage, cancelCh chan struct{}, last bool) {
	start := time.Now()
	finish := func() {
		s.mu.Lock()
		ss.busy = false
		s.mu.Unlock()
	}
	err := s.play(ss, ts.main, start, cancelCh)
	cancelled := errors.Is(err, errCancelled)
	if err != nil && !cancelled {
		finish()
		return
	}
	if ts.waitCancel && !cancelled {
		select {
		case <-cancelCh:
			cancelled = true
		case <-s.ctx.Done():
			finish()
			return
		}
	}
	if cancelled {
		if s.play(ss, ts.cancel, time.Now(), nil) != nil {
			finish()
			return
		}
	}
	if s.opts.Timing && !cancelled {
		s.sleep(start.Add(ts.answerDue), nil)
	}
	if last || ts.rpcErr != nil || ts.waitCancel {
		s.finishWorkspace(ss)
	}
	finish()
	switch {
	case cancelled && !ts.waitCancel:
		err = s.reply(id, acp.PromptResponse{StopReason: acp.StopCancelled})
	case ts.rpcErr != nil:
		err = s.replyErr(id, ts.rpcErr)
	default:
		err = s.reply(id, acp.PromptResponse{StopReason: ts.stop, Usage: ts.usage})
	}
	if err != nil {
		return
	}
	s.play(ss, ts.late, start, nil)
}

// errCancelled stops a block at session/cancel.
var errCancelled = errors.New("cancelled")

// sleep waits until t (with --timing); it reports false when cancelCh
// closed or the replay ended first.
func (s *server) sleep(t time.Time, cancelCh chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-cancelCh:
		return false
	case <-s.ctx.Done():
		return false
	}
}

// play sends a block's actions; with --timing each at start plus its
// offset. A closed cancelCh stops it with errCancelled.
func (s *server) play(ss *session, acts []action, start time.Time, cancelCh chan struct{}) error {
	for i := range acts {
		a := &acts[i]
		if s.opts.Timing && !s.sleep(start.Add(a.due), cancelCh) {
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			return errCancelled
		}
		if cancelCh != nil {
			select {
			case <-cancelCh:
				return errCancelled
			default:
			}
		}
		var err error
		switch a.kind {
		case actUpdate:
			err = s.update(ss.id, a.update)
		case actNotify:
			err = s.notify(a.method, a.params)
		case actJunk:
			err = s.writeLine(a.line)
		case actRequest:
			err = s.request1(ss, a)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// request1 sends one recorded request of the agent's, with the session's
// id, and waits for the answer when the record has one.
func (s *server) request1(ss *session, a *action) error {
	st := a.step
	var params json.RawMessage
	switch a.method {
	case acp.MethodRequestPermission:
		params = mustMarshal(struct {
			SessionID string          `json:"sessionId"`
			ToolCall  json.RawMessage `json:"toolCall"`
			Options   json.RawMessage `json:"options"`
		}{ss.id, st.ToolCall, st.Options})
	case acp.MethodReadTextFile:
		params = mustMarshal(acp.ReadTextFileRequest{SessionID: ss.id, Path: ss.rebase(st.Path)})
	case acp.MethodWriteTextFile:
		// The record keeps the size of what was written, not the text.
		n := 0
		if st.Bytes != nil {
			n = int(*st.Bytes)
		}
		path := ss.rebase(st.Path)
		s.keepOriginal(ss, path)
		params = mustMarshal(acp.WriteTextFileRequest{SessionID: ss.id, Path: path, Content: strings.Repeat(" ", n)})
	case acp.MethodTerminalCreate:
		p := acp.CreateTerminalRequest{SessionID: ss.id, Command: st.Command, Args: st.Args}
		if st.Cwd != "" {
			cwd := ss.rebase(st.Cwd)
			p.Cwd = &cwd
		}
		params = mustMarshal(p)
	case acp.MethodTerminalOutput, acp.MethodTerminalWaitForExit, acp.MethodTerminalKill, acp.MethodTerminalRelease:
		id := st.TerminalID
		s.mu.Lock()
		if mapped, ok := ss.terminals[id]; ok {
			id = mapped
		}
		s.mu.Unlock()
		params = mustMarshal(acp.TerminalRequest{SessionID: ss.id, TerminalID: id})
	default:
		params = a.params
	}
	resp, err := s.call(a.method, params, a.wait)
	if err != nil {
		return err
	}
	if a.method == acp.MethodTerminalCreate && resp.Error == nil && st.TerminalID != "" {
		var r acp.CreateTerminalResponse
		if json.Unmarshal(resp.Result, &r) == nil && r.TerminalID != "" {
			s.mu.Lock()
			ss.terminals[st.TerminalID] = r.TerminalID
			s.mu.Unlock()
		}
	}
	return nil
}

// recordedCwd is where the recorded session ran: its workspace copy, else
// its cwd.
func recordedCwd(rec *schemas.CaptureRecord) string {
	if rec.Workspace != nil && rec.Workspace.Path != "" {
		return rec.Workspace.Path
	}
	return rec.Cwd
}

// rebase moves a path of the recorded session's directory to the same
// place in this session's: a run with workspace copies has a new copy
// every time.
func (ss *session) rebase(p string) string {
	if ss.script == nil { // setup steps of a client that named no trial
		return p
	}
	from := recordedCwd(ss.script.rec)
	if from == "" || ss.cwd == "" || from == ss.cwd || !filepath.IsAbs(p) {
		return p
	}
	rel, err := filepath.Rel(from, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return filepath.Join(ss.cwd, rel)
}

// original is a file's content and mode before the replay wrote it.
type original struct {
	content []byte
	mode    os.FileMode
}

// keepOriginal remembers a file inside the session's cwd before the
// replay has the client write placeholder text to it.
func (s *server) keepOriginal(ss *session, path string) {
	if ss.cwd == "" {
		return
	}
	if rel, err := filepath.Rel(ss.cwd, path); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return
	}
	s.mu.Lock()
	_, seen := ss.written[path]
	s.mu.Unlock()
	if seen {
		return
	}
	var o *original
	if info, err := os.Lstat(path); err == nil && info.Mode().IsRegular() {
		if b, err := os.ReadFile(path); err == nil {
			o = &original{content: b, mode: info.Mode().Perm()}
		}
	}
	s.mu.Lock()
	ss.written[path] = o
	s.mu.Unlock()
}

// finishWorkspace puts back the files the replay wrote placeholders to
// and, with ApplyChanges, applies the record's workspace changes.
func (s *server) finishWorkspace(ss *session) {
	s.mu.Lock()
	written := ss.written
	ss.written = map[string]*original{}
	s.mu.Unlock()
	for path, o := range written {
		var err error
		if o == nil {
			err = os.Remove(path)
		} else {
			err = os.WriteFile(path, o.content, o.mode)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			s.logf("replay: putting back %s: %v", path, err)
		}
	}
	rec := ss.script.rec
	if !s.opts.ApplyChanges || ss.cwd == "" || rec.Workspace == nil || len(rec.Workspace.FileChanges) == 0 {
		return
	}
	if err := workspace.ApplyChanges(rec.Workspace, ss.cwd); err != nil {
		s.logf("replay: case %q trial %d: the recorded workspace changes do not apply to %s: %v", rec.ID, rec.Trial, ss.cwd, err)
	}
}
