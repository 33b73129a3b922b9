// Package fakeagent is a scriptable fixture agent that speaks the Agent Client
// Protocol (ACP v1: JSON-RPC 2.0, one JSON object per line on stdin/stdout).
// The harness's own tests launch it (see testdata/fakeagent) to exercise the
// client against a deterministic agent. It deliberately does not import the
// harness's acp package: it must stay independent of the client under test.
//
// # Protocol behaviour
//
//   - initialize: answers protocolVersion 1 (or --protocol N),
//     agentCapabilities {loadSession:false, promptCapabilities
//     {image:true, audio:false, embeddedContext:true}, mcpCapabilities
//     {http:false, sse:false}}, authMethods [{id:"test-key", name:"Test key"}]
//     and agentInfo {name:"fakeagent", version:"1.2.3"} (--name, --version).
//     The client's clientCapabilities and clientInfo are remembered (see the
//     "caps" scenario). Any other request before initialize gets -32600.
//   - authenticate {methodId:"test-key"}: {} ; any other methodId: -32602.
//   - session/new: {sessionId:"sess-N"} (N = 1, 2, ... per process). cwd must
//     be an absolute path, else -32602. With --auth-required it answers
//     -32000 "Authentication required" until authenticate succeeded.
//   - session/prompt: plays the scenario chosen by the first text block of the
//     prompt (see below) and answers {stopReason}. Unknown sessionId: -32002.
//     A second prompt while a turn of the same session is still running: -32600.
//   - session/cancel (notification): stops the running scenario of that
//     session at its next cancellation point (every sleep and every step) and
//     answers the pending prompt with stopReason "cancelled". Pending requests of
//     the agent (permission, fs, terminal) are still waited for: the client must
//     answer them. `hang` ignores cancel.
//   - Any other request: -32601 "Method not found". Unknown notifications
//     (including $/cancel_request) are ignored. A line that is not JSON gets a
//     -32700 error response with id null; a JSON value that is not an object
//     gets -32600 with id null.
//   - Responses from the client are routed to the agent's own pending requests
//     by id. A message with a "method" is always a client request or
//     notification, so the two id spaces may overlap freely. The agent's request
//     ids are integers 1, 2, 3... (per process) or, with --string-ids, strings
//     "req-1", "req-2"... A response to an id the agent never used is logged to
//     stderr and ignored.
//   - stdin EOF: exit 0 (unless --ignore-eof). Lines of any length are accepted.
//
// # Flags (argv)
//
//	--exit-before-init  write "fatal: cannot start" to stderr and exit 3 before reading stdin
//	--hang-init         never answer initialize (and ignore every later message)
//	--protocol N        answer initialize with protocolVersion N (default 1)
//	--auth-required     session/new fails with -32000 until authenticate {methodId:"test-key"}
//	--banner            print the non-JSON line "fakeagent starting..." on stdout first
//	--session-delay MS  answer session/new after MS milliseconds, reading on
//	--early-updates     during session/new, before answering it, send an
//	                    available_commands_update for the new session id
//	--name NAME         agentInfo.name (default "fakeagent")
//	--version V         agentInfo.version (default "1.2.3")
//	--string-ids        the agent's own request ids are strings "req-N"
//	--ignore-eof        do not exit on stdin EOF; sleep until killed by a signal
//	--stderr-spam N     write N lines "fakeagent: stderr spam line I/N" to stderr at start
//	--log FILE          append every line received on stdin to FILE
//	--usage             report usage with every end_turn answer: inputTokens = the
//	                    prompt's bytes, outputTokens = 10
//	--modes A,B         session/new lists the session modes A and B (the
//	                    first current); session/set_mode to a listed one sends
//	                    current_mode_update and answers {}, to another -32602
//
// Order at start: --stderr-spam, --banner, --exit-before-init, then reading.
//
// # Scenarios
//
// The first text block of the prompt selects the scenario by its first word;
// the rest of the text (after one separating whitespace character) is the
// argument. Ids are turn-scoped: in the first turn of a session message ids
// are "m1", "m2"... and tool call ids are as listed; in turn N>1 every such id
// gets the prefix "tN-" (for example "t2-m1", "t2-call-1"). "cwd" below is the
// session's cwd from session/new.
//
//	scenario                  what the agent does (u: = session/update with that sessionUpdate)
//	echo TEXT                 u:agent_message_chunk pieces of TEXT of at most 3 bytes (split
//	                          on rune boundaries; a 4-byte rune is its own piece), all with
//	                          messageId "m1"; end_turn. Empty TEXT: no chunk.
//	full                      u:agent_thought_chunk "Let me look " + "at the file.";
//	                          u:tool_call call-1 pending kind read, title "Read README.md",
//	                          rawInput {path}, locations [{path:cwd/README.md,line:1}];
//	                          u:tool_call_update call-1 in_progress;
//	                          u:tool_call_update call-1 completed, content [{type:content,
//	                          content:{type:text,text:"# Readme"}}], rawOutput {bytes:8};
//	                          u:tool_call call-2 pending kind execute "Run tests";
//	                          u:tool_call_update call-2 failed (content "exit status 1",
//	                          rawOutput {exitCode:1}); u:plan (2 entries); u:plan (3 entries);
//	                          u:agent_message_chunk "The file " + "looks fine." (no messageId);
//	                          u:user_message_chunk "(user interjection)";
//	                          u:usage_update {used:1234,size:200000,cost:{amount:0.01,currency:USD}};
//	                          u:current_mode_update "code"; u:session_info_update;
//	                          u:config_option_update; u:notice; u:available_commands_update;
//	                          u:{"sessionUpdate":"future_thing","x":1} (not in the schema);
//	                          end_turn. 3 ms sleeps between updates (19 updates).
//	permission                u:tool_call call-1 pending kind edit "Edit main.go"; request
//	                          session/request_permission with options, in this order,
//	                          always/allow_always, once/allow_once, reject/reject_once,
//	                          never/reject_always; then message (messageId m1)
//	                          "permission outcome=selected optionId=ID" or
//	                          "permission outcome=cancelled" or
//	                          "permission error CODE: MESSAGE"; then u:tool_call_update
//	                          call-1 completed (an allow_* option) or failed (anything
//	                          else). stopReason cancelled if the outcome was cancelled
//	                          or the turn was cancelled, else end_turn.
//	slow-permission           like permission, but the tool call is "call-1" kind execute
//	                          "Run rm -rf build"; waits (no timeout) for the answer; meant
//	                          for cancel tests.
//	fs-read PATH              request fs/read_text_file {sessionId, path}; message
//	                          "fs-read ok: CONTENT" or "fs-read error CODE: MESSAGE".
//	fs-write PATH CONTENT     request fs/write_text_file {sessionId, path, content}; message
//	                          "fs-write ok" or "fs-write error CODE: MESSAGE".
//	                          (PATH: absolute as given, else cwd + "/" + PATH, uncleaned,
//	                          so "../x" reaches the client verbatim.)
//	terminal CMD...           u:tool_call call-1 kind execute title CMD in_progress; request
//	                          terminal/create {sessionId, command: CMD (whole string, no
//	                          args), cwd}; u:tool_call_update call-1 with content
//	                          [{type:terminal,terminalId}]; terminal/wait_for_exit;
//	                          terminal/output; terminal/release; message
//	                          "terminal exit=CODE truncated=BOOL output=OUTPUT" (CODE is
//	                          the exitCode, or "signal:SIG", or "none"); u:tool_call_update
//	                          completed (exit 0) or failed. On any error: message
//	                          "METHOD error CODE: MESSAGE", tool call failed, end_turn.
//	slow MS                   message "working", then waits MS ms; cancel -> cancelled,
//	                          else end_turn.
//	sleep MS                  waits MS ms (cancel -> cancelled), then message "done", end_turn.
//	await-session N MS        waits until the process has answered N session/new requests
//	                          (in all, counting the turn's own session), then MS ms
//	                          (cancel -> cancelled), then message "done", end_turn.
//	hang                      message "hanging", then never answers; ignores cancel.
//	crash                     u:agent_thought_chunk "thinking", message "about to crash",
//	                          stderr "panic: simulated crash", exit code 3 (no answer).
//	error                     JSON-RPC error -32603 "simulated failure" data {"detail":"x"}.
//	flaky FILE N KIND TEXT    appends a line to FILE; while FILE has at most N lines, fails
//	                          as a model provider would: KIND 503 (JSON-RPC error -32603
//	                          data {"error":"API Error: 503 Service Unavailable"}), 429
//	                          (data {"error":"429 Too Many Requests","retry-after":"0.01"})
//	                          or drop (message "working", stderr "Error: read ECONNRESET",
//	                          exit 1); then as echo TEXT.
//	auth                      JSON-RPC error -32000 "Authentication required".
//	junk                      message "before junk"; then raw lines: `this is not json`,
//	                          `{"hello":1}`, a session/update without params.update,
//	                          `[1,2]`, a response to unknown id 987654; then message "ok";
//	                          end_turn.
//	big BYTES                 one agent_message_chunk whose text is BYTES bytes of 'x'.
//	late                      message "main" (m1), end_turn answer, then after 20 ms
//	                          message " tail" (m1) and u:tool_call_update for the new id
//	                          "late-1" (status completed).
//	unknown-session           u:agent_message_chunk "stray" for sessionId "nope", then
//	                          message "ok", end_turn.
//	dup-tool                  u:tool_call t1 "First title", u:tool_call t1 "Second title",
//	                          u:tool_call_update t9 completed (never announced), end_turn.
//	refusal / max-tokens      stopReason refusal / max_tokens, no updates.
//	empty-chunks              message chunks "", "a", "", "b" (m1); end_turn.
//	messages                  message m1 "Hel", thought "thinking" (no id), message m1
//	                          "lo", message m2 "World"; end_turn.
//	usage                     message "ok"; result {stopReason:"end_turn", usage:
//	                          {inputTokens:10, outputTokens:5, totalTokens:15}}.
//	fs-flood N PATH           sends N fs/read_text_file requests for PATH at
//	                          once; message "flood ok=A busy=B bytes=C
//	                          denied=D other=E" (how they were answered)
//	write-file NAME CONTENT   writes CONTENT to cwd/NAME itself; u:tool_call call-1 kind
//	                          edit in_progress with locations; u:tool_call_update
//	                          completed with content [{type:diff,path,oldText?,newText}]
//	                          (failed with the error text if writing failed); message
//	                          "wrote NAME"; end_turn.
//	write-here                writes "turn N\n" (N as for turn) to turn-SESSIONID.txt in the
//	                          process's working directory (not the session cwd), as an
//	                          agent's own tools do; message "wrote turn-SESSIONID.txt".
//	caps                      message = the client's clientCapabilities JSON (compact).
//	cwd                       message = the session cwd.
//	env NAME                  message = value of environment variable NAME.
//	mcp                       message = the session/new mcpServers JSON (compact).
//	turn                      message "turn N" (N = 1-based turn count of the session).
//	(anything else)           one agent_message_chunk (m1) with the whole prompt text.
//
// # Script mode
//
// If the prompt text is a JSON object with a "script" array, the steps are
// played in order (an invalid script is answered -32602):
//
//	{"update":{...}}                   session/update with the session id; add "sessionId":"x" to override
//	{"message":"text"} / {"thought":"text"}   a chunk (optional "messageId")
//	{"raw":"any text"}                 written verbatim as one stdout line
//	{"stderr":"text"}                  written as one stderr line
//	{"touch":"PATH"}                   create the empty file PATH (relative: in the session cwd)
//	{"sleep":MS}                       sleep, cancel-aware (cancel -> stopReason cancelled)
//	{"ignoreCancel":true}              later steps ignore session/cancel
//	{"waitCancel":true}                wait until session/cancel arrives
//	{"request":{"method":M,"params":P}}  send a request and wait for the answer. If P
//	                                   is an object without "sessionId" and M is one of
//	                                   session/request_permission, fs/*, terminal/*,
//	                                   the session id is added. Add "expectAnswer":false
//	                                   to send without waiting.
//	{"reportLastAnswer":true}          message chunk with the last answer as compact JSON:
//	                                   {"result":...} or {"error":{...}}
//	{"stop":"end_turn"}                answer the prompt (optional "usage":{...})
//	{"result":{...}}                   answer the prompt with this exact result object
//	{"error":{"code":C,"message":M,"data":D}}  answer the prompt with a JSON-RPC error
//	{"exit":N}                         exit with code N immediately
//	{"hang":true}                      never answer; stop playing
//	{"after":[steps]}                  steps played after the prompt answer; an
//	                                   exit first among them quits at once
//	                                   (nothing sent after the answer is read)
//
// Steps after a stop/result/error step keep playing (late updates). A script
// that ends without answering answers end_turn.
package fakeagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Run is the entry point of the fixture binary: Main with the process's
// arguments and standard streams, then os.Exit with its result.
func Run() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type options struct {
	exitBeforeInit bool
	sessionDelay   int
	hangInit       bool
	protocol       int
	authRequired   bool
	banner         bool
	earlyUpdates   bool
	name           string
	version        string
	stringIDs      bool
	ignoreEOF      bool
	stderrSpam     int
	logFile        string
	usage          bool
	onStart        string
	modes          string
}

// Main runs the agent: args are the command-line arguments without the
// program name. It returns the process exit code: 0 on stdin EOF, 2 on bad
// flags, 3 for --exit-before-init and the crash scenario, or the code of a
// script {"exit":N} step.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("fakeagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.exitBeforeInit, "exit-before-init", false, "write an error to stderr and exit 3 before reading anything")
	fs.BoolVar(&o.hangInit, "hang-init", false, "never answer initialize")
	fs.IntVar(&o.protocol, "protocol", 1, "protocolVersion to answer initialize with")
	fs.BoolVar(&o.authRequired, "auth-required", false, "session/new needs authenticate {methodId:\"test-key\"} first")
	fs.BoolVar(&o.banner, "banner", false, "print a non-JSON banner line on stdout first")
	fs.BoolVar(&o.earlyUpdates, "early-updates", false, "send available_commands_update before answering session/new")
	fs.StringVar(&o.name, "name", "fakeagent", "agentInfo.name")
	fs.StringVar(&o.version, "version", "1.2.3", "agentInfo.version")
	fs.BoolVar(&o.stringIDs, "string-ids", false, "use string ids (\"req-N\") for the agent's own requests")
	fs.BoolVar(&o.ignoreEOF, "ignore-eof", false, "do not exit on stdin EOF")
	fs.IntVar(&o.stderrSpam, "stderr-spam", 0, "write N lines to stderr at start")
	fs.StringVar(&o.logFile, "log", "", "append every received line to this file")
	fs.BoolVar(&o.usage, "usage", false, "report token usage with every end_turn answer: inputTokens = prompt bytes, outputTokens = 10")
	fs.StringVar(&o.onStart, "on-start", "", "run this shell `command` (sh -c, in the agent's directory, output to stderr) before serving: what an agent's start script could do")
	fs.StringVar(&o.modes, "modes", "", "session/new lists these session `modes` (comma-separated, the first current); session/set_mode switches among them")
	fs.IntVar(&o.sessionDelay, "session-delay", 0, "answer session/new after `ms` milliseconds (other messages are read meanwhile)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fakeagent: unexpected arguments %q\n", fs.Args())
		return 2
	}

	a := &agent{
		opts:     o,
		stdout:   stdout,
		stderr:   stderr,
		sessions: map[string]*session{},
		madeCh:   make(chan struct{}),
		pending:  map[string]chan response{},
		exitCh:   make(chan int, 1),
		done:     make(chan struct{}),
	}
	defer a.shutdown()

	for i := 1; i <= o.stderrSpam; i++ {
		a.errorf("fakeagent: stderr spam line %d/%d", i, o.stderrSpam)
	}
	if o.banner {
		a.writeLine([]byte("fakeagent starting..."))
	}
	if o.exitBeforeInit {
		a.errorf("fatal: cannot start")
		return 3
	}
	if o.onStart != "" {
		cmd := exec.Command("/bin/sh", "-c", o.onStart)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			a.errorf("fakeagent: --on-start: %v", err)
		}
	}
	if o.logFile != "" {
		f, err := os.OpenFile(o.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			a.errorf("fakeagent: %v", err)
			return 2
		}
		a.logf = f
	}

	go a.readLoop(stdin)
	return <-a.exitCh
}

// agent is the state of one fixture process.
type agent struct {
	opts   options
	stdout io.Writer
	stderr io.Writer
	logf   *os.File

	outMu  sync.Mutex // serializes stdout writes; guards closed
	errMu  sync.Mutex // serializes stderr writes
	closed bool

	mu            sync.Mutex // guards everything below
	initialized   bool
	hung          bool
	authenticated bool
	clientCaps    json.RawMessage
	sessions      map[string]*session
	nextSession   int
	// madeSessions counts the session/new requests answered; madeCh is
	// closed (and replaced) at each, for turns waiting on it.
	madeSessions int
	madeCh       chan struct{}
	nextReq      int
	pending      map[string]chan response

	// quitting is set when a turn's answer is to be followed at once by
	// an exit: from then on nothing more is read, as from a process
	// that has already quit, so the exit never races the next request.
	quitting atomic.Bool

	exitCh chan int      // first value ends Main
	done   chan struct{} // closed when Main returns
	once   sync.Once
}

type session struct {
	id   string
	cwd  string
	mcp  json.RawMessage
	turn int   // number of prompts started
	cur  *turn // running (unanswered) turn, if any
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// response is the client's answer to one of the agent's requests.
type response struct {
	Result json.RawMessage
	Error  *rpcError
}

// inMsg is any JSON-RPC message received from the client.
type inMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type obj = map[string]any

func (a *agent) shutdown() {
	a.once.Do(func() {
		a.outMu.Lock()
		a.closed = true
		a.outMu.Unlock()
		close(a.done)
		if a.logf != nil {
			a.logf.Close()
		}
	})
}

// exit makes Main return code (the first call wins).
func (a *agent) exit(code int) {
	select {
	case a.exitCh <- code:
	default:
	}
}

// writeLine writes one line to stdout (a newline is appended).
func (a *agent) writeLine(b []byte) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if a.closed {
		return
	}
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	a.stdout.Write(line) //nolint:errcheck // a dead client is noticed on stdin
}

// send marshals v as one line of JSON.
func (a *agent) send(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		a.errorf("fakeagent: marshal: %v", err)
		return
	}
	a.writeLine(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func (a *agent) errorf(format string, args ...any) {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	fmt.Fprintf(a.stderr, format+"\n", args...)
}

func (a *agent) notify(method string, params any) {
	a.send(obj{"jsonrpc": "2.0", "method": method, "params": params})
}

func (a *agent) reply(id json.RawMessage, result any) {
	if result == nil {
		result = obj{}
	}
	a.send(obj{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *agent) replyErr(id json.RawMessage, code int, msg string, data any) {
	e := obj{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	a.send(obj{"jsonrpc": "2.0", "id": id, "error": e})
}

// call sends a request to the client and waits for its answer. If the agent
// shuts down first, the answer is a synthetic error with code -1.
func (a *agent) call(method string, params any) response {
	ch, id := a.startCall(method, params)
	select {
	case r := <-ch:
		return r
	case <-a.done:
		a.mu.Lock()
		delete(a.pending, idKey(id))
		a.mu.Unlock()
		return response{Error: &rpcError{Code: -1, Message: "agent stopped"}}
	}
}

// startCall sends a request and returns the channel its answer arrives on.
func (a *agent) startCall(method string, params any) (chan response, json.RawMessage) {
	a.mu.Lock()
	a.nextReq++
	var id json.RawMessage
	if a.opts.stringIDs {
		id, _ = json.Marshal("req-" + strconv.Itoa(a.nextReq))
	} else {
		id = json.RawMessage(strconv.Itoa(a.nextReq))
	}
	ch := make(chan response, 1)
	a.pending[idKey(id)] = ch
	a.mu.Unlock()
	a.send(obj{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return ch, id
}

// idKey canonicalizes a JSON id for the pending map.
func idKey(id json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, id); err != nil {
		return string(id)
	}
	return buf.String()
}

func (a *agent) readLoop(stdin io.Reader) {
	r := bufio.NewReaderSize(stdin, 64*1024)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if a.logf != nil {
				l := line
				if l[len(l)-1] != '\n' {
					l = append(l[:len(l):len(l)], '\n')
				}
				a.logf.Write(l) //nolint:errcheck // best effort test aid
			}
			a.handleLine(bytes.TrimRight(line, "\r\n"))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				a.errorf("fakeagent: read stdin: %v", err)
			}
			if a.opts.ignoreEOF {
				// Keep a timer pending so the runtime never sees a deadlock:
				// only a signal (or a scenario's exit) ends the process.
				for {
					select {
					case <-a.done:
						return
					case <-time.After(time.Hour):
					}
				}
			}
			a.exit(0)
			return
		}
	}
}

func (a *agent) handleLine(line []byte) {
	if a.quitting.Load() || len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if !json.Valid(line) {
		a.errorf("fakeagent: ignoring non-JSON line: %.200q", line)
		a.replyErr(nil, -32700, "Parse error", nil)
		return
	}
	var m inMsg
	if t := bytes.TrimSpace(line); t[0] != '{' || json.Unmarshal(line, &m) != nil {
		a.replyErr(nil, -32600, "Invalid Request", nil)
		return
	}
	a.mu.Lock()
	hung := a.hung
	a.mu.Unlock()
	if hung {
		return
	}
	switch {
	case m.Method != "" && m.ID != nil:
		a.handleRequest(m)
	case m.Method != "":
		a.handleNotification(m)
	case m.ID != nil:
		a.handleResponse(m)
	default:
		a.errorf("fakeagent: ignoring message without method or id: %.200s", line)
	}
}

func (a *agent) handleResponse(m inMsg) {
	k := idKey(m.ID)
	a.mu.Lock()
	ch, ok := a.pending[k]
	delete(a.pending, k)
	a.mu.Unlock()
	if !ok {
		a.errorf("fakeagent: response to unknown request id %s", m.ID)
		return
	}
	ch <- response{Result: m.Result, Error: m.Error}
}

func (a *agent) handleNotification(m inMsg) {
	switch m.Method {
	case "session/cancel":
		var p struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(m.Params, &p) //nolint:errcheck // a bad cancel just cancels nothing
		a.mu.Lock()
		s := a.sessions[p.SessionID]
		var t *turn
		if s != nil {
			t = s.cur
		}
		a.mu.Unlock()
		if t != nil {
			t.cancel()
		}
	default:
		// $/cancel_request and unknown notifications are ignored.
	}
}

func (a *agent) handleRequest(m inMsg) {
	a.mu.Lock()
	initialized := a.initialized
	a.mu.Unlock()
	if m.Method != "initialize" && !initialized {
		a.replyErr(m.ID, -32600, fmt.Sprintf("ACP connection must be initialized before '%s'", m.Method), nil)
		return
	}
	switch m.Method {
	case "initialize":
		a.handleInitialize(m)
	case "authenticate":
		var p struct {
			MethodID string `json:"methodId"`
		}
		json.Unmarshal(m.Params, &p) //nolint:errcheck // checked below
		if p.MethodID != "test-key" {
			a.replyErr(m.ID, -32602, fmt.Sprintf("Invalid params: unknown auth methodId %q", p.MethodID), nil)
			return
		}
		a.mu.Lock()
		a.authenticated = true
		a.mu.Unlock()
		a.reply(m.ID, obj{})
	case "session/new":
		if d := a.opts.sessionDelay; d > 0 {
			go func() {
				time.Sleep(time.Duration(d) * time.Millisecond)
				a.handleNewSession(m)
			}()
			return
		}
		a.handleNewSession(m)
	case "session/prompt":
		a.handlePrompt(m)
	case "session/set_mode":
		a.handleSetMode(m)
	default:
		a.replyErr(m.ID, -32601, "Method not found: "+m.Method, nil)
	}
}

func (a *agent) handleInitialize(m inMsg) {
	if a.opts.hangInit {
		a.mu.Lock()
		a.hung = true
		a.mu.Unlock()
		return
	}
	var p struct {
		ClientCapabilities json.RawMessage `json:"clientCapabilities"`
	}
	json.Unmarshal(m.Params, &p) //nolint:errcheck // capabilities are optional
	a.mu.Lock()
	a.initialized = true
	a.clientCaps = p.ClientCapabilities
	a.mu.Unlock()
	a.reply(m.ID, obj{
		"protocolVersion": a.opts.protocol,
		"agentCapabilities": obj{
			"loadSession":        false,
			"promptCapabilities": obj{"image": true, "audio": false, "embeddedContext": true},
			"mcpCapabilities":    obj{"http": false, "sse": false},
		},
		"authMethods": []any{obj{"id": "test-key", "name": "Test key", "description": "Any client may use this fake key"}},
		"agentInfo":   obj{"name": a.opts.name, "version": a.opts.version},
	})
}

func (a *agent) handleNewSession(m inMsg) {
	var p struct {
		Cwd        string          `json:"cwd"`
		McpServers json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		a.replyErr(m.ID, -32602, "Invalid params: "+err.Error(), nil)
		return
	}
	if !filepath.IsAbs(p.Cwd) {
		a.replyErr(m.ID, -32602, fmt.Sprintf("Invalid params: cwd must be an absolute path, got %q", p.Cwd), nil)
		return
	}
	a.mu.Lock()
	if a.opts.authRequired && !a.authenticated {
		a.mu.Unlock()
		a.replyErr(m.ID, -32000, "Authentication required", nil)
		return
	}
	a.nextSession++
	s := &session{id: "sess-" + strconv.Itoa(a.nextSession), cwd: p.Cwd, mcp: p.McpServers}
	a.sessions[s.id] = s
	a.mu.Unlock()
	if a.opts.earlyUpdates {
		a.notify("session/update", obj{"sessionId": s.id, "update": availableCommands()})
	}
	res := obj{"sessionId": s.id}
	if ids := a.modeIDs(); len(ids) > 0 {
		var avail []any
		for _, id := range ids {
			avail = append(avail, obj{"id": id, "name": id})
		}
		res["modes"] = obj{"currentModeId": ids[0], "availableModes": avail}
	}
	a.reply(m.ID, res)
	a.mu.Lock()
	a.madeSessions++
	close(a.madeCh)
	a.madeCh = make(chan struct{})
	a.mu.Unlock()
}

// modeIDs are the session modes of --modes.
func (a *agent) modeIDs() []string {
	if a.opts.modes == "" {
		return nil
	}
	return strings.Split(a.opts.modes, ",")
}

// handleSetMode switches a session to a mode --modes listed, telling the
// client with current_mode_update before it answers.
func (a *agent) handleSetMode(m inMsg) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	json.Unmarshal(m.Params, &p) //nolint:errcheck // checked below
	a.mu.Lock()
	_, ok := a.sessions[p.SessionID]
	a.mu.Unlock()
	if !ok {
		a.replyErr(m.ID, -32602, fmt.Sprintf("Invalid params: no session %q", p.SessionID), nil)
		return
	}
	if !slices.Contains(a.modeIDs(), p.ModeID) {
		a.replyErr(m.ID, -32602, fmt.Sprintf("Invalid params: mode %q is not available", p.ModeID), nil)
		return
	}
	a.notify("session/update", obj{"sessionId": p.SessionID, "update": obj{"sessionUpdate": "current_mode_update", "currentModeId": p.ModeID}})
	a.reply(m.ID, obj{})
}

// awaitSessions waits until n session/new requests were answered, and
// reports whether the turn was cancelled (or the agent stopped) first.
func (t *turn) awaitSessions(n int) bool {
	for {
		t.a.mu.Lock()
		made, ch := t.a.madeSessions, t.a.madeCh
		t.a.mu.Unlock()
		if made >= n {
			return t.cancelled()
		}
		cancelCh := t.cancelCh
		if t.ignoreCancel {
			cancelCh = nil
		}
		select {
		case <-ch:
		case <-cancelCh:
			return true
		case <-t.a.done:
			return true
		}
	}
}

func availableCommands() obj {
	return obj{
		"sessionUpdate": "available_commands_update",
		"availableCommands": []any{
			obj{"name": "test", "description": "Run the tests", "input": obj{"hint": "package pattern"}},
			obj{"name": "plan", "description": "Write a plan"},
		},
	}
}

func (a *agent) handlePrompt(m inMsg) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		a.replyErr(m.ID, -32602, "Invalid params: "+err.Error(), nil)
		return
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	if s == nil {
		a.mu.Unlock()
		a.replyErr(m.ID, -32002, "Resource not found: session "+strconv.Quote(p.SessionID), nil)
		return
	}
	if s.cur != nil {
		a.mu.Unlock()
		a.replyErr(m.ID, -32600, "Invalid request: a prompt turn is already running in session "+s.id, nil)
		return
	}
	s.turn++
	t := &turn{a: a, s: s, reqID: m.ID, n: s.turn, cancelCh: make(chan struct{})}
	s.cur = t
	a.mu.Unlock()

	text := ""
	for _, b := range p.Prompt {
		if b.Type == "text" {
			text = b.Text
			break
		}
	}
	t.prompt = text
	go t.play(text)
}

// turn is one running session/prompt.
type turn struct {
	a     *agent
	s     *session
	reqID json.RawMessage
	n     int

	prompt       string
	cancelCh     chan struct{}
	cancelOnce   sync.Once
	ignoreCancel bool
	answered     bool // only touched by the turn's goroutine
	noAnswer     bool // hang/exit: the deferred default answer is suppressed
}

func (t *turn) cancel() { t.cancelOnce.Do(func() { close(t.cancelCh) }) }

// cancelled reports whether session/cancel arrived (and is not ignored).
func (t *turn) cancelled() bool {
	if t.ignoreCancel {
		return false
	}
	select {
	case <-t.cancelCh:
		return true
	default:
		return false
	}
}

// sleep waits ms milliseconds and reports whether the turn was cancelled
// (or the agent stopped) meanwhile.
func (t *turn) sleep(ms int) bool {
	timer := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer timer.Stop()
	cancelCh := t.cancelCh
	if t.ignoreCancel {
		cancelCh = nil
	}
	select {
	case <-timer.C:
		return t.cancelled()
	case <-cancelCh:
		return true
	case <-t.a.done:
		return true
	}
}

// id scopes an id to the turn: base in turn 1, "tN-base" later.
func (t *turn) id(base string) string {
	if t.n == 1 {
		return base
	}
	return "t" + strconv.Itoa(t.n) + "-" + base
}

func (t *turn) update(u obj) {
	t.a.notify("session/update", obj{"sessionId": t.s.id, "update": u})
}

func chunk(kind, text, messageID string) obj {
	u := obj{"sessionUpdate": kind, "content": obj{"type": "text", "text": text}}
	if messageID != "" {
		u["messageId"] = messageID
	}
	return u
}

// msg sends an agent_message_chunk; mid is turn-scoped unless empty.
func (t *turn) msg(text, mid string) {
	if mid != "" {
		mid = t.id(mid)
	}
	t.update(chunk("agent_message_chunk", text, mid))
}

func (t *turn) thought(text, mid string) {
	if mid != "" {
		mid = t.id(mid)
	}
	t.update(chunk("agent_thought_chunk", text, mid))
}

func (t *turn) finish() {
	t.answered = true
	t.a.mu.Lock()
	if t.s.cur == t {
		t.s.cur = nil
	}
	t.a.mu.Unlock()
}

// answerResult answers the prompt with result (once).
func (t *turn) answerResult(result any) {
	if t.answered {
		return
	}
	t.finish()
	t.a.reply(t.reqID, result)
}

func (t *turn) answer(stopReason string) {
	res := obj{"stopReason": stopReason}
	if t.a.opts.usage && stopReason == "end_turn" {
		res["usage"] = obj{"inputTokens": len(t.prompt), "outputTokens": 10, "totalTokens": len(t.prompt) + 10}
	}
	t.answerResult(res)
}

func (t *turn) answerErr(code int, msg string, data any) {
	if t.answered {
		return
	}
	t.finish()
	t.a.replyErr(t.reqID, code, msg, data)
}

// exit ends the process with code and blocks until Main has returned.
func (t *turn) exit(code int) {
	t.noAnswer = true
	t.a.exit(code)
	<-t.a.done
}

// hang blocks until Main has returned, never answering.
func (t *turn) hang() {
	t.noAnswer = true
	<-t.a.done
}

func (t *turn) play(text string) {
	defer func() {
		if t.noAnswer {
			return
		}
		if t.cancelled() {
			t.answer("cancelled")
		} else {
			t.answer("end_turn")
		}
	}()
	if isScript(text) {
		t.playScript(text)
		return
	}
	name, arg := splitWord(text)
	if fn, ok := scenarios[name]; ok {
		fn(t, arg)
		return
	}
	t.msg(text, "m1")
}
