package fakeagent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/acp/acpschema"
	"harness/testkit/fakeagent"
)

// ---------------------------------------------------------------------------
// A tiny hand-written line client.

type rpcErr struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// msg is one line the agent wrote, parsed as far as possible.
type msg struct {
	Raw    []byte
	Bad    bool // not a JSON object
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *rpcErr
	// ForMethod is, for a response, the method of the client request it
	// answered (as known when it arrived).
	ForMethod string
}

func parseMsg(line []byte) msg {
	m := msg{Raw: line}
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *rpcErr         `json:"error"`
	}
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &env) != nil {
		m.Bad = true
		return m
	}
	m.ID, m.Method, m.Params, m.Result, m.Error = env.ID, env.Method, env.Params, env.Result, env.Error
	return m
}

func (m msg) isRequest() bool      { return m.Method != "" && m.ID != nil }
func (m msg) isNotification() bool { return m.Method != "" && m.ID == nil }
func (m msg) isResponse() bool     { return !m.Bad && m.Method == "" && m.ID != nil }

// update returns the params.update object of a session/update.
func (m msg) update() map[string]any {
	var p struct {
		Update map[string]any `json:"update"`
	}
	json.Unmarshal(m.Params, &p)
	return p.Update
}

func (m msg) sessionUpdate() string {
	s, _ := m.update()["sessionUpdate"].(string)
	return s
}

func (m msg) chunkText() string {
	c, _ := m.update()["content"].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type client struct {
	t      *testing.T
	in     *io.PipeWriter
	wmu    sync.Mutex
	lines  chan []byte
	stderr *syncBuf
	exit   chan int
	code   *int
	sent   map[string]string // our request id (canonical) -> method
	log    []msg             // every line read from the agent
}

func start(t *testing.T, args ...string) *client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{t: t, in: inW, lines: make(chan []byte, 100000), stderr: &syncBuf{},
		exit: make(chan int, 1), sent: map[string]string{}}
	go func() {
		code := fakeagent.Main(args, inR, outW, c.stderr)
		outW.Close()
		c.exit <- code
	}()
	go func() {
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- bytes.TrimSuffix(line, []byte("\n"))
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		inR.Close()
		c.wait(5 * time.Second)
	})
	return c
}

func canon(v any) string {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	default:
		raw, _ = json.Marshal(v)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

func (c *client) sendRaw(line string) {
	c.t.Helper()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write to agent: %v", err)
	}
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

func (c *client) request(id any, method string, params any) {
	c.t.Helper()
	c.sent[canon(id)] = method
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

func (c *client) respond(id json.RawMessage, result any) {
	c.t.Helper()
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (c *client) respondErr(id json.RawMessage, code int, message string) {
	c.t.Helper()
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}

// next returns the next agent line, or ok=false on timeout or end of output.
func (c *client) next(timeout time.Duration) (msg, bool) {
	select {
	case line, ok := <-c.lines:
		if !ok {
			return msg{}, false
		}
		m := parseMsg(line)
		if m.isResponse() {
			m.ForMethod = c.sent[canon(m.ID)]
		}
		c.log = append(c.log, m)
		return m, true
	case <-time.After(timeout):
		return msg{}, false
	}
}

// handler answers one agent request; it may call c.respond itself and
// return nil, or return a result to send.
type handler func(m msg) any

// call sends a request and reads until its response, answering agent
// requests with h. It returns the response and the other messages seen.
func (c *client) call(id any, method string, params any, h handler) (msg, []msg) {
	c.t.Helper()
	c.request(id, method, params)
	return c.until(id, h)
}

// until reads until the response to id arrives.
func (c *client) until(id any, h handler) (msg, []msg) {
	c.t.Helper()
	want := canon(id)
	var seen []msg
	for {
		m, ok := c.next(5 * time.Second)
		if !ok {
			c.t.Fatalf("no response to id %s; seen %d messages; stderr: %s", want, len(seen), c.stderr.String())
		}
		if m.isResponse() && canon(m.ID) == want {
			return m, seen
		}
		seen = append(seen, m)
		if m.isRequest() {
			if h == nil {
				c.t.Fatalf("unexpected agent request %s", m.Raw)
			}
			if res := h(m); res != nil {
				c.respond(m.ID, res)
			}
		}
	}
}

// wait waits for Main to return and returns its exit code (-1 on timeout).
func (c *client) wait(d time.Duration) int {
	if c.code != nil {
		return *c.code
	}
	select {
	case code := <-c.exit:
		c.code = &code
		return code
	case <-time.After(d):
		return -1
	}
}

func (c *client) init() {
	c.t.Helper()
	r, _ := c.call("init", "initialize", map[string]any{"protocolVersion": 1,
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": true, "writeTextFile": true}, "terminal": true},
		"clientInfo":         map[string]any{"name": "test", "version": "0"}}, nil)
	if r.Error != nil {
		c.t.Fatalf("initialize: %+v", r.Error)
	}
}

func (c *client) newSession(cwd string) string {
	c.t.Helper()
	r, _ := c.call("new", "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, nil)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.SessionID == "" {
		c.t.Fatalf("session/new: %s", r.Raw)
	}
	return res.SessionID
}

// setup starts an agent, initializes it and opens a session in a temp dir.
func setup(t *testing.T, args ...string) (*client, string, string) {
	t.Helper()
	c := start(t, args...)
	c.init()
	cwd := t.TempDir()
	return c, c.newSession(cwd), cwd
}

func promptParams(sid, text string) map[string]any {
	return map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// prompt runs one turn and returns the prompt response and what came before.
func (c *client) prompt(id any, sid, text string, h handler) (msg, []msg) {
	c.t.Helper()
	return c.call(id, "session/prompt", promptParams(sid, text), h)
}

func stopReason(t *testing.T, r msg) string {
	t.Helper()
	var res struct {
		StopReason string `json:"stopReason"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		t.Fatalf("prompt response is not a result: %s", r.Raw)
	}
	return res.StopReason
}

func kinds(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.Method == "session/update" {
			out = append(out, m.sessionUpdate())
		}
	}
	return out
}

func messageText(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		if m.Method == "session/update" && m.sessionUpdate() == "agent_message_chunk" {
			b.WriteString(m.chunkText())
		}
	}
	return b.String()
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// ---------------------------------------------------------------------------
// Schema validation of agent output.

type validator struct {
	c          *jsonschema.Compiler
	agentMsg   *jsonschema.Schema
	errSchema  *jsonschema.Schema
	reqParams  map[string]string // agent->client request method -> $defs name
	notParams  map[string]string // agent->client notification method -> $defs name
	respResult map[string]string // client->agent request method -> $defs name of the result
	mu         sync.Mutex
	cache      map[string]*jsonschema.Schema
}

var (
	schemaOnce sync.Once
	theSchema  *validator
	schemaErr  error
)

const schemaURL = acpschema.URL

func loadValidator(t *testing.T) *validator {
	t.Helper()
	schemaOnce.Do(func() {
		b := acpschema.V1()
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemaErr = err
			return
		}
		v := &validator{c: jsonschema.NewCompiler(), reqParams: map[string]string{}, notParams: map[string]string{},
			respResult: map[string]string{}, cache: map[string]*jsonschema.Schema{}}
		if err := v.c.AddResource(schemaURL, doc); err != nil {
			schemaErr = err
			return
		}
		var raw struct {
			AnyOf []struct {
				Title string `json:"title"`
			} `json:"anyOf"`
			Defs map[string]struct {
				Side   string `json:"x-side"`
				Method string `json:"x-method"`
			} `json:"$defs"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			schemaErr = err
			return
		}
		// The root is anyOf [Agent, Client, ProtocolLevel]: agent output must
		// match the "Agent" envelope.
		agentIdx := -1
		for i, a := range raw.AnyOf {
			if a.Title == "Agent" {
				agentIdx = i
			}
		}
		if agentIdx < 0 {
			schemaErr = fmt.Errorf("schema root has no Agent branch")
			return
		}
		for name, d := range raw.Defs {
			switch {
			case d.Method == "":
			case d.Side == "client" && strings.HasSuffix(name, "Request"):
				v.reqParams[d.Method] = name
			case d.Side == "client" && strings.HasSuffix(name, "Notification"):
				v.notParams[d.Method] = name
			case d.Side == "agent" && strings.HasSuffix(name, "Response"):
				v.respResult[d.Method] = name
			}
		}
		if v.agentMsg, err = v.c.Compile(fmt.Sprintf("%s#/anyOf/%d", schemaURL, agentIdx)); err != nil {
			schemaErr = err
			return
		}
		if v.errSchema, err = v.c.Compile(schemaURL + "#/$defs/Error"); err != nil {
			schemaErr = err
			return
		}
		theSchema = v
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return theSchema
}

func (v *validator) def(name string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.cache[name]; ok {
		return s, nil
	}
	s, err := v.c.Compile(schemaURL + "#/$defs/" + name)
	if err != nil {
		return nil, err
	}
	v.cache[name] = s
	return s, nil
}

func instance(raw []byte) (any, error) { return jsonschema.UnmarshalJSON(bytes.NewReader(raw)) }

// check validates one agent line: the whole line against the schema's Agent
// envelope, then params/result against the definition of its method.
// sentMethod maps the id of a response to the method of our request.
func (v *validator) check(m msg, sentMethod map[string]string) error {
	if m.Bad {
		return fmt.Errorf("not a JSON object")
	}
	inst, err := instance(m.Raw)
	if err != nil {
		return err
	}
	if err := v.agentMsg.Validate(inst); err != nil {
		return fmt.Errorf("envelope: %v", err)
	}
	var def string
	var part json.RawMessage
	switch {
	case m.isRequest():
		def, part = v.reqParams[m.Method], m.Params
	case m.isNotification():
		def, part = v.notParams[m.Method], m.Params
	case m.isResponse() && m.Error != nil:
		e, _ := json.Marshal(m.Error)
		ie, _ := instance(e)
		return v.errSchema.Validate(ie)
	case m.isResponse():
		method, ok := m.ForMethod, m.ForMethod != ""
		if !ok {
			method, ok = sentMethod[canon(m.ID)]
		}
		if !ok {
			return fmt.Errorf("response to id %s we never sent", m.ID)
		}
		def, part = v.respResult[method], m.Result
	default:
		return fmt.Errorf("neither request, notification nor response")
	}
	if def == "" {
		return fmt.Errorf("no schema definition for method %q", m.Method)
	}
	s, err := v.def(def)
	if err != nil {
		return err
	}
	ip, err := instance(part)
	if err != nil {
		return err
	}
	if err := s.Validate(ip); err != nil {
		return fmt.Errorf("%s: %v", def, err)
	}
	return nil
}

// validateAll validates every line the agent wrote so far, except those
// for which skip returns true.
func (c *client) validateAll(skip func(m msg) bool) int {
	c.t.Helper()
	v := loadValidator(c.t)
	n := 0
	for _, m := range c.log {
		if skip != nil && skip(m) {
			continue
		}
		n++
		if err := v.check(m, c.sent); err != nil {
			c.t.Errorf("schema: %s\n  line: %.300s", err, m.Raw)
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// Tests.

func TestSchemaValidatorRejectsBadMessages(t *testing.T) {
	v := loadValidator(t)
	sent := map[string]string{canon(3): "session/prompt"}
	bad := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"current_mode_update","modeId":"x"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"bored"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s","options":[]}}`,
		`{"id":3,"result":{"stopReason":"end_turn"}}`,
	}
	for _, line := range bad {
		if err := v.check(parseMsg([]byte(line)), sent); err == nil {
			t.Errorf("validator accepted %s", line)
		}
	}
	good := `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`
	if err := v.check(parseMsg([]byte(good)), sent); err != nil {
		t.Errorf("validator rejected %s: %v", good, err)
	}
}

func TestInitializeAndSessions(t *testing.T) {
	c := start(t)
	r, _ := c.call(0, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}, nil)
	if r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("session/new before initialize: %s", r.Raw)
	}
	r, _ = c.call(1, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil)
	var res struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession        *bool           `json:"loadSession"`
			PromptCapabilities json.RawMessage `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
		AuthMethods []struct{ ID, Name string } `json:"authMethods"`
		AgentInfo   struct{ Name, Version string }
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	eq(t, "protocolVersion", res.ProtocolVersion, 1)
	if res.AgentCapabilities.LoadSession == nil || *res.AgentCapabilities.LoadSession {
		t.Errorf("loadSession not false: %s", r.Result)
	}
	if len(res.AgentCapabilities.PromptCapabilities) == 0 {
		t.Errorf("no promptCapabilities: %s", r.Result)
	}
	if len(res.AuthMethods) != 1 || res.AuthMethods[0].ID != "test-key" || res.AuthMethods[0].Name != "Test key" {
		t.Errorf("authMethods: %+v", res.AuthMethods)
	}
	eq(t, "agentInfo.name", res.AgentInfo.Name, "fakeagent")
	eq(t, "agentInfo.version", res.AgentInfo.Version, "1.2.3")

	r, _ = c.call(2, "session/new", map[string]any{"cwd": "relative/dir", "mcpServers": []any{}}, nil)
	if r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("relative cwd: %s", r.Raw)
	}
	eq(t, "first session", c.newSession(t.TempDir()), "sess-1")
	eq(t, "second session", c.newSession(t.TempDir()), "sess-2")
	r, _ = c.call(3, "session/prompt", promptParams("sess-9", "echo x"), nil)
	if r.Error == nil || r.Error.Code != -32002 {
		t.Errorf("prompt for unknown session: %s", r.Raw)
	}
	r, _ = c.call(4, "session/set_model", map[string]any{}, nil)
	if r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("unknown method: %s", r.Raw)
	}
	c.validateAll(nil)
}

func TestFlagsOverrideInitialize(t *testing.T) {
	c := start(t, "--protocol", "7", "--name", "other", "--version", "9.9")
	r, _ := c.call(1, "initialize", map[string]any{"protocolVersion": 1}, nil)
	var res struct {
		ProtocolVersion int
		AgentInfo       struct{ Name, Version string }
	}
	json.Unmarshal(r.Result, &res)
	eq(t, "protocolVersion", res.ProtocolVersion, 7)
	eq(t, "name", res.AgentInfo.Name, "other")
	eq(t, "version", res.AgentInfo.Version, "9.9")
}

func TestFullSequence(t *testing.T) {
	c, sid, _ := setup(t)
	r, seen := c.prompt(10, sid, "full", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	want := []string{"agent_thought_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "tool_call_update",
		"tool_call", "tool_call_update", "plan", "plan", "agent_message_chunk", "agent_message_chunk",
		"user_message_chunk", "usage_update", "current_mode_update", "session_info_update", "config_option_update",
		"notice", "available_commands_update", "future_thing"}
	eq(t, "kinds", strings.Join(kinds(seen), ","), strings.Join(want, ","))
	for _, m := range seen {
		u := m.update()
		switch {
		case u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "call-1":
			if u["kind"] != "read" || u["status"] != "pending" || u["rawInput"] == nil || u["locations"] == nil || u["title"] == "" {
				t.Errorf("first tool_call: %s", m.Raw)
			}
		case u["sessionUpdate"] == "plan":
			if n := len(u["entries"].([]any)); n != 2 && n != 3 {
				t.Errorf("plan entries: %d", n)
			}
		}
	}
	eq(t, "message", messageText(seen), "The file looks fine.")
	var future msg
	n := c.validateAll(func(m msg) bool {
		if m.sessionUpdate() == "future_thing" {
			future = m
			return true
		}
		return false
	})
	if n < 20 {
		t.Errorf("validated only %d lines", n)
	}
	if future.Raw == nil {
		t.Fatal("no future_thing update")
	}
	if err := loadValidator(t).check(future, c.sent); err == nil {
		t.Errorf("future_thing unexpectedly passes the schema: %s", future.Raw)
	}
}

func TestEchoSplitsOnRuneBoundaries(t *testing.T) {
	c, sid, _ := setup(t)
	text := "héllo wörld ✓ 𝄞 end"
	r, seen := c.prompt(5, sid, "echo "+text, nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "echo text", messageText(seen), text)
	if len(seen) < 5 {
		t.Errorf("only %d chunks", len(seen))
	}
	for _, m := range seen {
		s := m.chunkText()
		if !utf8.ValidString(s) || (len(s) > 3 && utf8.RuneCountInString(s) != 1) || s == "" {
			t.Errorf("bad piece %q", s)
		}
		if m.update()["messageId"] != "m1" {
			t.Errorf("messageId: %s", m.Raw)
		}
	}
	c.validateAll(nil)
}

func permissionHandler(t *testing.T, outcome map[string]any, gotOptions *[]string, gotID *json.RawMessage) handler {
	return func(m msg) any {
		if m.Method != "session/request_permission" {
			t.Fatalf("unexpected request %s", m.Raw)
		}
		var p struct {
			Options []struct{ OptionID, Kind string }
		}
		json.Unmarshal(m.Params, &p)
		for _, o := range p.Options {
			*gotOptions = append(*gotOptions, o.OptionID+"/"+o.Kind)
		}
		*gotID = m.ID
		return map[string]any{"outcome": outcome}
	}
}

func TestPermissionWithCollidingIDs(t *testing.T) {
	c, sid, _ := setup(t)
	// The agent's first own request has id 1; the prompt uses id 1 too.
	var opts []string
	var reqID json.RawMessage
	answer := permissionHandler(t, map[string]any{"outcome": "selected", "optionId": "once"}, &opts, &reqID)
	r, seen := c.prompt(1, sid, "permission", func(m msg) any {
		// While the agent's request 1 is pending, a client request with the
		// same id must still be treated as a request.
		c.request(1, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
		nr, ok := c.next(5 * time.Second)
		if !ok || !nr.isResponse() || canon(nr.ID) != "1" || !strings.Contains(string(nr.Result), `"sess-2"`) {
			t.Fatalf("session/new with colliding id: %s", nr.Raw)
		}
		c.sent[canon(1)] = "session/prompt" // id 1 now names the prompt again
		return answer(m)
	})
	eq(t, "agent request id", canon(reqID), "1")
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "options", strings.Join(opts, ","), "always/allow_always,once/allow_once,reject/reject_once,never/reject_always")
	eq(t, "message", messageText(seen), "permission outcome=selected optionId=once")
	last := seen[len(seen)-1].update()
	eq(t, "final tool status", last["status"], any("completed"))
	eq(t, "kinds", strings.Join(kinds(seen), ","), "tool_call,agent_message_chunk,tool_call_update")
	if seen[0].update()["kind"] != "edit" {
		t.Errorf("tool_call kind: %s", seen[0].Raw)
	}
	c.validateAll(nil)
}

func TestPermissionOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name, stop, text, status string
		reply                    func(c *client, m msg) any
	}{
		{"reject", "end_turn", "permission outcome=selected optionId=reject", "failed", func(c *client, m msg) any {
			return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject"}}
		}},
		{"cancelled", "cancelled", "permission outcome=cancelled", "failed", func(c *client, m msg) any {
			return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
		}},
		{"error", "end_turn", "permission error -32601: Method not found", "failed", func(c *client, m msg) any {
			c.respondErr(m.ID, -32601, "Method not found")
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sid, _ := setup(t)
			r, seen := c.prompt(7, sid, "permission", func(m msg) any { return tc.reply(c, m) })
			eq(t, "stopReason", stopReason(t, r), tc.stop)
			eq(t, "message", messageText(seen), tc.text)
			eq(t, "status", seen[len(seen)-1].update()["status"], any(tc.status))
		})
	}
}

func TestFsRead(t *testing.T) {
	c, sid, cwd := setup(t)
	var gotPath string
	r, seen := c.prompt(3, sid, "fs-read notes.txt", func(m msg) any {
		var p struct{ SessionID, Path string }
		json.Unmarshal(m.Params, &p)
		eq(t, "method", m.Method, "fs/read_text_file")
		eq(t, "sessionId", p.SessionID, sid)
		gotPath = p.Path
		return map[string]any{"content": "hello\nworld"}
	})
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "path", gotPath, cwd+"/notes.txt")
	eq(t, "message", messageText(seen), "fs-read ok: hello\nworld")

	r, seen = c.prompt(4, sid, "fs-read /etc/passwd", func(m msg) any {
		c.respondErr(m.ID, -32601, "Method not found")
		return nil
	})
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "message", messageText(seen), "fs-read error -32601: Method not found")
	c.validateAll(nil)
}

func TestFsWrite(t *testing.T) {
	c, sid, cwd := setup(t)
	var p struct{ Path, Content string }
	r, seen := c.prompt(3, sid, "fs-write ../out.txt two words", func(m msg) any {
		eq(t, "method", m.Method, "fs/write_text_file")
		json.Unmarshal(m.Params, &p)
		return map[string]any{}
	})
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "path", p.Path, cwd+"/../out.txt")
	eq(t, "content", p.Content, "two words")
	eq(t, "message", messageText(seen), "fs-write ok")
	c.validateAll(nil)
}

func TestTerminal(t *testing.T) {
	c, sid, cwd := setup(t)
	var methods []string
	r, seen := c.prompt(2, sid, "terminal echo hi && false", func(m msg) any {
		methods = append(methods, m.Method)
		var p struct {
			SessionID, Command, TerminalID, Cwd string
			Args                                []string
		}
		json.Unmarshal(m.Params, &p)
		eq(t, "sessionId", p.SessionID, sid)
		switch m.Method {
		case "terminal/create":
			eq(t, "command", p.Command, "echo hi && false")
			eq(t, "cwd", p.Cwd, cwd)
			if p.Args != nil {
				t.Errorf("args sent: %v", p.Args)
			}
			return map[string]any{"terminalId": "term-1"}
		case "terminal/wait_for_exit":
			eq(t, "terminalId", p.TerminalID, "term-1")
			return map[string]any{"exitCode": 1}
		case "terminal/output":
			return map[string]any{"output": "hi\n", "truncated": false, "exitStatus": map[string]any{"exitCode": 1}}
		case "terminal/release":
			return map[string]any{}
		}
		t.Fatalf("unexpected %s", m.Raw)
		return nil
	})
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "methods", strings.Join(methods, ","), "terminal/create,terminal/wait_for_exit,terminal/output,terminal/release")
	eq(t, "message", messageText(seen), "terminal exit=1 truncated=false output=hi\n")
	eq(t, "final status", seen[len(seen)-1].update()["status"], any("failed"))
	c.validateAll(nil)

	// A client without terminal support answers -32601.
	r, seen = c.prompt(3, sid, "terminal ls", func(m msg) any {
		c.respondErr(m.ID, -32601, "Method not found")
		return nil
	})
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "message", messageText(seen), "terminal/create error -32601: Method not found")
}

func TestSlowCancel(t *testing.T) {
	c, sid, _ := setup(t)
	c.request(9, "session/prompt", promptParams(sid, "slow 60000"))
	m, ok := c.next(5 * time.Second)
	if !ok || m.chunkText() != "working" {
		t.Fatalf("first chunk: %s", m.Raw)
	}
	start := time.Now()
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	r, _ := c.until(9, nil)
	eq(t, "stopReason", stopReason(t, r), "cancelled")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %v", d)
	}
	// The session is usable again.
	r, seen := c.prompt(10, sid, "echo again", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "text", messageText(seen), "again")
	eq(t, "second turn messageId", seen[0].update()["messageId"], any("t2-m1"))
}

func TestSleepWithoutCancel(t *testing.T) {
	c, sid, _ := setup(t)
	r, seen := c.prompt(1, sid, "sleep 30", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "text", messageText(seen), "done")
}

func TestSlowPermissionCancel(t *testing.T) {
	c, sid, _ := setup(t)
	c.request(4, "session/prompt", promptParams(sid, "slow-permission"))
	var permID json.RawMessage
	for permID == nil {
		m, ok := c.next(5 * time.Second)
		if !ok {
			t.Fatal("no permission request")
		}
		if m.isRequest() && m.Method == "session/request_permission" {
			permID = m.ID
		}
	}
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	// The agent keeps waiting for the permission answer.
	for {
		m, ok := c.next(200 * time.Millisecond)
		if !ok {
			break
		}
		if m.isResponse() {
			t.Fatalf("answered before the permission request was: %s", m.Raw)
		}
	}
	c.respond(permID, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
	r, seen := c.until(4, nil)
	eq(t, "stopReason", stopReason(t, r), "cancelled")
	eq(t, "message", messageText(seen), "permission outcome=cancelled")
}

func TestHangIgnoresCancelAndEOFExits(t *testing.T) {
	c, sid, _ := setup(t)
	c.request(4, "session/prompt", promptParams(sid, "hang"))
	if m, ok := c.next(5 * time.Second); !ok || m.chunkText() != "hanging" {
		t.Fatalf("first chunk: %s", m.Raw)
	}
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	if m, ok := c.next(300 * time.Millisecond); ok {
		t.Fatalf("hang answered: %s", m.Raw)
	}
	c.in.Close()
	eq(t, "exit code", c.wait(5*time.Second), 0)
}

func TestCrash(t *testing.T) {
	c, sid, _ := setup(t)
	c.request(4, "session/prompt", promptParams(sid, "crash"))
	var seen []msg
	for {
		m, ok := c.next(5 * time.Second)
		if !ok {
			break
		}
		seen = append(seen, m)
	}
	eq(t, "exit code", c.wait(5*time.Second), 3)
	eq(t, "kinds", strings.Join(kinds(seen), ","), "agent_thought_chunk,agent_message_chunk")
	if len(seen) != 2 {
		t.Errorf("extra output: %d lines", len(seen))
	}
	if !strings.Contains(c.stderr.String(), "panic: simulated crash") {
		t.Errorf("stderr: %q", c.stderr.String())
	}
}

func TestErrorScenarios(t *testing.T) {
	c, sid, _ := setup(t)
	r, _ := c.prompt(1, sid, "error", nil)
	if r.Error == nil || r.Error.Code != -32603 || r.Error.Message != "simulated failure" || canon(r.Error.Data) != `{"detail":"x"}` {
		t.Errorf("error: %s", r.Raw)
	}
	r, _ = c.prompt(2, sid, "auth", nil)
	if r.Error == nil || r.Error.Code != -32000 || r.Error.Message != "Authentication required" {
		t.Errorf("auth: %s", r.Raw)
	}
	for text, want := range map[string]string{"refusal": "refusal", "max-tokens": "max_tokens"} {
		r, seen := c.prompt(3, sid, text, nil)
		eq(t, text, stopReason(t, r), want)
		eq(t, text+" updates", len(seen), 0)
	}
	c.validateAll(nil)
}

func TestAuthRequired(t *testing.T) {
	c := start(t, "--auth-required")
	c.init()
	r, _ := c.call(2, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}, nil)
	if r.Error == nil || r.Error.Code != -32000 || r.Error.Message != "Authentication required" {
		t.Fatalf("session/new without auth: %s", r.Raw)
	}
	r, _ = c.call(3, "authenticate", map[string]any{"methodId": "wrong"}, nil)
	if r.Error == nil {
		t.Errorf("wrong methodId accepted: %s", r.Raw)
	}
	r, _ = c.call(4, "authenticate", map[string]any{"methodId": "test-key"}, nil)
	if r.Error != nil || canon(r.Result) != "{}" {
		t.Fatalf("authenticate: %s", r.Raw)
	}
	eq(t, "session", c.newSession("/"), "sess-1")
	c.validateAll(nil)
}

func TestJunk(t *testing.T) {
	c, sid, _ := setup(t)
	r, seen := c.prompt(1, sid, "junk", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	var raws []string
	for _, m := range seen {
		raws = append(raws, string(m.Raw))
	}
	all := strings.Join(raws, "\n")
	for _, want := range []string{"\nthis is not json\n", "\n{\"hello\":1}\n", "\n[1,2]\n", `"id":987654`} {
		if !strings.Contains(all, want) {
			t.Errorf("junk output lacks %q:\n%s", want, all)
		}
	}
	eq(t, "message", messageText(seen), "before junkok")
	eq(t, "last chunk", seen[len(seen)-1].chunkText(), "ok")
}

func TestLate(t *testing.T) {
	c, sid, _ := setup(t)
	r, seen := c.prompt(1, sid, "late", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "before answer", messageText(seen), "main")
	var late []msg
	for len(late) < 2 {
		m, ok := c.next(5 * time.Second)
		if !ok {
			t.Fatalf("late updates missing, got %d", len(late))
		}
		late = append(late, m)
	}
	eq(t, "late kinds", strings.Join(kinds(late), ","), "agent_message_chunk,tool_call_update")
	eq(t, "tail", late[0].chunkText(), " tail")
	eq(t, "late id", late[1].update()["toolCallId"], any("late-1"))
	c.validateAll(nil)
}

func TestUnknownSessionAndDupTool(t *testing.T) {
	c, sid, _ := setup(t)
	r, seen := c.prompt(1, sid, "unknown-session", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	if !strings.Contains(string(seen[0].Raw), `"sessionId":"nope"`) {
		t.Errorf("first update: %s", seen[0].Raw)
	}
	r, seen = c.prompt(2, sid, "dup-tool", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	var ids, titles []string
	for _, m := range seen {
		u := m.update()
		ids = append(ids, fmt.Sprint(u["sessionUpdate"], ":", u["toolCallId"]))
		if s, ok := u["title"].(string); ok {
			titles = append(titles, s)
		}
	}
	eq(t, "dup-tool", strings.Join(ids, ","), "tool_call:t2-t1,tool_call:t2-t1,tool_call_update:t2-t9")
	eq(t, "titles", strings.Join(titles, ","), "First title,Second title")
}

func TestChunkScenarios(t *testing.T) {
	c, sid, _ := setup(t)
	_, seen := c.prompt(1, sid, "empty-chunks", nil)
	var texts []string
	for _, m := range seen {
		texts = append(texts, fmt.Sprintf("%q", m.chunkText()))
	}
	eq(t, "empty-chunks", strings.Join(texts, ","), `"","a","","b"`)

	_, seen = c.prompt(2, sid, "messages", nil)
	var got []string
	for _, m := range seen {
		u := m.update()
		got = append(got, fmt.Sprint(u["sessionUpdate"], "/", u["messageId"], "/", m.chunkText()))
	}
	eq(t, "messages", strings.Join(got, ","),
		"agent_message_chunk/t2-m1/Hel,agent_thought_chunk/<nil>/thinking,agent_message_chunk/t2-m1/lo,agent_message_chunk/t2-m2/World")

	r, _ := c.prompt(3, sid, "usage", nil)
	eq(t, "usage result", canon(r.Result), `{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}`)

	_, seen = c.prompt(4, sid, "big 300000", nil)
	eq(t, "big", len(seen), 1)
	eq(t, "big text", seen[0].chunkText(), strings.Repeat("x", 300000))

	_, seen = c.prompt(5, sid, "What is 2+2?", nil)
	eq(t, "default", messageText(seen), "What is 2+2?")

	_, seen = c.prompt(6, sid, "turn", nil)
	eq(t, "turn", messageText(seen), "turn 6")
}

func TestStringIDs(t *testing.T) {
	c, sid, _ := setup(t, "--string-ids")
	var ids []string
	r, _ := c.prompt(1, sid, `{"script":[{"request":{"method":"fs/read_text_file","params":{"path":"/a"}}},{"request":{"method":"fs/read_text_file","params":{"path":"/b"}}}]}`,
		func(m msg) any {
			ids = append(ids, canon(m.ID))
			return map[string]any{"content": ""}
		})
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	eq(t, "ids", strings.Join(ids, ","), `"req-1","req-2"`)
	c.validateAll(nil)
}

func TestExitBeforeInit(t *testing.T) {
	var stderr bytes.Buffer
	code := fakeagent.Main([]string{"--exit-before-init"}, strings.NewReader(""), io.Discard, &stderr)
	eq(t, "exit code", code, 3)
	if !strings.Contains(stderr.String(), "fatal: cannot start") {
		t.Errorf("stderr: %q", stderr.String())
	}
	if code := fakeagent.Main([]string{"--no-such-flag"}, strings.NewReader(""), io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag exit code %d", code)
	}
}

func TestEOFExitsZero(t *testing.T) {
	done := make(chan int, 1)
	go func() { done <- fakeagent.Main(nil, strings.NewReader(""), io.Discard, io.Discard) }()
	select {
	case code := <-done:
		eq(t, "exit code", code, 0)
	case <-time.After(5 * time.Second):
		t.Fatal("no exit on stdin EOF")
	}
}

func TestBannerEarlyUpdatesSpamAndLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "recv.log")
	c := start(t, "--banner", "--early-updates", "--stderr-spam", "3", "--log", logPath)
	m, ok := c.next(5 * time.Second)
	if !ok || string(m.Raw) != "fakeagent starting..." {
		t.Fatalf("banner: %q", m.Raw)
	}
	c.init()
	r, seen := c.call(2, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}, nil)
	if r.Error != nil {
		t.Fatal(r.Raw)
	}
	if len(seen) != 1 || seen[0].sessionUpdate() != "available_commands_update" || !strings.Contains(string(seen[0].Raw), `"sessionId":"sess-1"`) {
		t.Errorf("early updates: %v", kinds(seen))
	}
	if n := strings.Count(c.stderr.String(), "\n"); n != 3 {
		t.Errorf("stderr lines = %d: %q", n, c.stderr.String())
	}
	c.in.Close()
	eq(t, "exit", c.wait(5*time.Second), 0)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"initialize"`) || !strings.Contains(lines[1], `"session/new"`) {
		t.Errorf("log: %q", b)
	}
	c.validateAll(func(m msg) bool { return m.Bad })
}

func TestHangInit(t *testing.T) {
	c := start(t, "--hang-init")
	c.request(1, "initialize", map[string]any{"protocolVersion": 1})
	if m, ok := c.next(300 * time.Millisecond); ok {
		t.Fatalf("answered: %s", m.Raw)
	}
	c.in.Close()
	eq(t, "exit", c.wait(5*time.Second), 0)
}

func TestBadInputLines(t *testing.T) {
	c := start(t)
	c.sendRaw("not json")
	m, _ := c.next(5 * time.Second)
	if m.Error == nil || m.Error.Code != -32700 || canon(m.ID) != "null" {
		t.Errorf("non-JSON: %s", m.Raw)
	}
	c.sendRaw("[1,2]")
	m, _ = c.next(5 * time.Second)
	if m.Error == nil || m.Error.Code != -32600 {
		t.Errorf("array: %s", m.Raw)
	}
	c.init() // still alive
	// A very long request line (2 MB) is read whole.
	c.request("new", "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
	c.until("new", nil)
	// (Not a scenario name: the default scenario echoes it in one chunk.)
	long := strings.Repeat("y", 2<<20)
	r, seen := c.prompt(1, "sess-1", long, nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	if len(seen) != 1 || messageText(seen) != long {
		t.Errorf("long echo mismatch (%d bytes)", len(messageText(seen)))
	}
}

func TestWriteFile(t *testing.T) {
	c, sid, cwd := setup(t)
	os.WriteFile(filepath.Join(cwd, "b.txt"), []byte("old"), 0o644)
	r, seen := c.prompt(1, sid, "write-file a.txt hello there", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	b, err := os.ReadFile(filepath.Join(cwd, "a.txt"))
	if err != nil || string(b) != "hello there" {
		t.Errorf("a.txt = %q, %v", b, err)
	}
	eq(t, "message", messageText(seen), "wrote a.txt")
	if !strings.Contains(string(seen[1].Raw), `"type":"diff"`) || strings.Contains(string(seen[1].Raw), "oldText") {
		t.Errorf("diff: %s", seen[1].Raw)
	}
	_, seen = c.prompt(2, sid, "write-file b.txt new", nil)
	if !strings.Contains(string(seen[1].Raw), `"oldText":"old"`) {
		t.Errorf("diff of existing file: %s", seen[1].Raw)
	}
	c.validateAll(nil)
}

func TestInfoScenarios(t *testing.T) {
	t.Setenv("FAKEAGENT_TEST_VAR", "v42")
	c, sid, cwd := setup(t)
	_, seen := c.prompt(1, sid, "caps", nil)
	eq(t, "caps", messageText(seen), `{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}`)
	_, seen = c.prompt(2, sid, "cwd", nil)
	eq(t, "cwd", messageText(seen), cwd)
	_, seen = c.prompt(3, sid, "env FAKEAGENT_TEST_VAR", nil)
	eq(t, "env", messageText(seen), "v42")
	_, seen = c.prompt(4, sid, "mcp", nil)
	eq(t, "mcp", messageText(seen), "[]")
}

func TestScriptMode(t *testing.T) {
	c, sid, cwd := setup(t)
	script := `{"script":[
		{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}},
		{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"sessionId":"other"},
		{"raw":"RAW LINE"},
		{"sleep":5},
		{"request":{"method":"session/request_permission","params":{"toolCall":{"toolCallId":"c1"},"options":[{"optionId":"o","name":"O","kind":"allow_once"}]}}},
		{"reportLastAnswer":true},
		{"request":{"method":"terminal/create","params":{"command":"ls"}}},
		{"reportLastAnswer":true},
		{"after":[{"message":"after-1"}]},
		{"stop":"max_tokens"},
		{"message":"late-1"}
	]}`
	var params []string
	r, seen := c.prompt(1, sid, script, func(m msg) any {
		params = append(params, canon(m.Params))
		if m.Method == "terminal/create" {
			c.respondErr(m.ID, -32601, "Method not found")
			return nil
		}
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "o"}}
	})
	eq(t, "stopReason", stopReason(t, r), "max_tokens")
	if !strings.Contains(params[0], `"sessionId":"`+sid+`"`) {
		t.Errorf("sessionId not filled in: %s", params[0])
	}
	var texts []string
	for _, m := range seen {
		switch {
		case m.Bad:
			texts = append(texts, "raw:"+string(m.Raw))
		case m.Method == "session/update":
			var p struct{ SessionID string }
			json.Unmarshal(m.Params, &p)
			texts = append(texts, p.SessionID+":"+m.chunkText())
		}
	}
	eq(t, "script output", strings.Join(texts, "|"), sid+":a|other:x|raw:RAW LINE|"+
		sid+`:{"result":{"outcome":{"optionId":"o","outcome":"selected"}}}|`+
		sid+`:{"error":{"code":-32601,"message":"Method not found"}}`)
	var late []string
	for len(late) < 2 {
		m, ok := c.next(5 * time.Second)
		if !ok {
			t.Fatalf("late messages: %v", late)
		}
		late = append(late, m.chunkText())
	}
	eq(t, "late", strings.Join(late, ","), "late-1,after-1")

	r, _ = c.prompt(2, sid, `{"script":[{"error":{"code":-32099,"message":"custom","data":[1]}}]}`, nil)
	if r.Error == nil || r.Error.Code != -32099 || canon(r.Error.Data) != "[1]" {
		t.Errorf("script error: %s", r.Raw)
	}
	r, _ = c.prompt(3, sid, `{"script":[{"bogus":1}]}`, nil)
	if r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("bad script: %s", r.Raw)
	}
	r, _ = c.prompt(4, sid, `{"script":[{"result":{"stopReason":"end_turn","_meta":{"k":1}}}]}`, nil)
	eq(t, "result", canon(r.Result), `{"stopReason":"end_turn","_meta":{"k":1}}`)
	abs := filepath.Join(t.TempDir(), "abs.mark")
	c.prompt(40, sid, `{"script":[{"touch":"rel.mark"},{"touch":"`+abs+`"}]}`, nil)
	for _, p := range []string{filepath.Join(cwd, "rel.mark"), abs} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("touch: %v", err)
		}
	}

	// Cancel during a script sleep.
	c.request(5, "session/prompt", promptParams(sid, `{"script":[{"message":"go"},{"sleep":60000},{"message":"never"}]}`))
	c.next(5 * time.Second)
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	r, seen = c.until(5, nil)
	eq(t, "cancelled script", stopReason(t, r), "cancelled")
	eq(t, "nothing after cancel", len(seen), 0)

	c.request(6, "session/prompt", promptParams(sid, `{"script":[{"message":"bye"},{"exit":7}]}`))
	eq(t, "script exit", c.wait(5*time.Second), 7)
}

// TestBinary builds testdata/fakeagent and checks what only a real process
// shows: exit codes through os.Exit and --ignore-eof surviving stdin EOF.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "fakeagent")
	build := exec.Command(goTool, "build", "-o", bin, "../../testdata/fakeagent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// crash: exit code 3 after a normal handshake. Stdin stays open, so only
	// the crash can end the process.
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}
{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"crash"}]}}
`)
	timer := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	err = cmd.Wait()
	timer.Stop()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("crash: err=%v stderr=%q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "panic: simulated crash") || !strings.Contains(stdout.String(), "about to crash") {
		t.Errorf("crash output: stdout=%q stderr=%q", stdout.String(), stderr.String())
	}

	// --ignore-eof: still alive after stdin closed; a signal ends it.
	cmd = exec.Command(bin, "--ignore-eof")
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("--ignore-eof exited on EOF: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Errorf("want death by signal, got %v", err)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("SIGTERM did not end --ignore-eof")
	}
}

func TestWriteHere(t *testing.T) {
	here := t.TempDir()
	t.Chdir(here)
	c, sid, cwd := setup(t)
	r, seen := c.prompt(1, sid, "write-here", nil)
	eq(t, "stopReason", stopReason(t, r), "end_turn")
	name := "turn-" + sid + ".txt"
	eq(t, "message", messageText(seen), "wrote "+name)
	if b, err := os.ReadFile(filepath.Join(here, name)); err != nil || string(b) != "turn 1\n" {
		t.Errorf("%s in the working directory = %q, %v", name, b, err)
	}
	if _, err := os.Stat(filepath.Join(cwd, name)); err == nil {
		t.Errorf("%s written in the session cwd too", name)
	}
}
