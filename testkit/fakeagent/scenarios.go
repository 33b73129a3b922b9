package fakeagent

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// scenarios maps the first word of the prompt text to its player. The
// package documentation lists what each one does.
var scenarios map[string]func(t *turn, arg string)

func init() {
	scenarios = map[string]func(t *turn, arg string){
		"echo":            scEcho,
		"full":            scFull,
		"permission":      func(t *turn, _ string) { scPermission(t, false) },
		"slow-permission": func(t *turn, _ string) { scPermission(t, true) },
		"fs-read":         scFsRead,
		"fs-write":        scFsWrite,
		"terminal":        scTerminal,
		"sh":              scShell,
		"slow":            scSlow,
		"sleep":           scSleep,
		"await-session":   scAwaitSession,
		"hang":            scHang,
		"crash":           scCrash,
		"error":           func(t *turn, _ string) { t.answerErr(-32603, "simulated failure", obj{"detail": "x"}) },
		"auth":            func(t *turn, _ string) { t.answerErr(-32000, "Authentication required", nil) },
		"junk":            scJunk,
		"big":             scBig,
		"late":            scLate,
		"unknown-session": scUnknownSession,
		"dup-tool":        scDupTool,
		"refusal":         func(t *turn, _ string) { t.answer("refusal") },
		"max-tokens":      func(t *turn, _ string) { t.answer("max_tokens") },
		"empty-chunks":    scEmptyChunks,
		"messages":        scMessages,
		"usage":           scUsage,
		"write-file":      scWriteFile,
		"write-here":      scWriteHere,
		"fs-flood":        scFSFlood,
		"caps":            scCaps,
		"cwd":             func(t *turn, _ string) { t.msg(t.s.cwd, "m1") },
		"env":             func(t *turn, arg string) { t.msg(os.Getenv(strings.TrimSpace(arg)), "m1") },
		"mcp":             scMcp,
		"turn":            func(t *turn, _ string) { t.msg("turn "+strconv.Itoa(t.n), "m1") },
		"flaky":           scFlaky,
	}
}

// splitWord splits text into its first word and the rest after exactly one
// separating whitespace character (leading whitespace is skipped).
func splitWord(text string) (word, rest string) {
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	i := strings.IndexFunc(text, unicode.IsSpace)
	if i < 0 {
		return text, ""
	}
	_, size := utf8.DecodeRuneInString(text[i:])
	return text[:i], text[i+size:]
}

// splitPieces cuts s into pieces of at most n bytes without splitting a rune
// (a rune longer than n bytes is a piece of its own).
func splitPieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := 0
		for end < len(s) {
			_, size := utf8.DecodeRuneInString(s[end:])
			if end > 0 && end+size > n {
				break
			}
			end += size
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

func atoi(t *turn, arg string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || n < 0 {
		t.answerErr(-32602, fmt.Sprintf("Invalid params: want a non-negative integer argument, got %q", arg), nil)
		return 0, false
	}
	return n, true
}

// sessionPath resolves p against the session cwd without cleaning it.
func (t *turn) sessionPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return strings.TrimSuffix(t.s.cwd, "/") + "/" + p
}

// errText renders a JSON-RPC error as "CODE: MESSAGE".
func errText(e *rpcError) string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

func scEcho(t *turn, arg string) {
	for _, p := range splitPieces(arg, 3) {
		t.msg(p, "m1")
	}
}

func scFull(t *turn, _ string) {
	readme := t.sessionPath("README.md")
	steps := []obj{
		chunk("agent_thought_chunk", "Let me look ", ""),
		chunk("agent_thought_chunk", "at the file.", ""),
		{"sessionUpdate": "tool_call", "toolCallId": t.id("call-1"), "title": "Read README.md", "kind": "read", "status": "pending",
			"rawInput": obj{"path": readme}, "locations": []any{obj{"path": readme, "line": 1}}},
		{"sessionUpdate": "tool_call_update", "toolCallId": t.id("call-1"), "status": "in_progress"},
		{"sessionUpdate": "tool_call_update", "toolCallId": t.id("call-1"), "status": "completed",
			"content":   []any{obj{"type": "content", "content": obj{"type": "text", "text": "# Readme"}}},
			"rawOutput": obj{"bytes": 8}},
		{"sessionUpdate": "tool_call", "toolCallId": t.id("call-2"), "title": "Run tests", "kind": "execute", "status": "pending",
			"rawInput": obj{"command": "go test ./..."}},
		{"sessionUpdate": "tool_call_update", "toolCallId": t.id("call-2"), "status": "failed",
			"content":   []any{obj{"type": "content", "content": obj{"type": "text", "text": "exit status 1"}}},
			"rawOutput": obj{"exitCode": 1}},
		{"sessionUpdate": "plan", "entries": []any{
			obj{"content": "Read the file", "priority": "high", "status": "completed"},
			obj{"content": "Run the tests", "priority": "medium", "status": "in_progress"},
		}},
		{"sessionUpdate": "plan", "entries": []any{
			obj{"content": "Read the file", "priority": "high", "status": "completed"},
			obj{"content": "Run the tests", "priority": "medium", "status": "completed"},
			obj{"content": "Report", "priority": "low", "status": "pending"},
		}},
		chunk("agent_message_chunk", "The file ", ""),
		chunk("agent_message_chunk", "looks fine.", ""),
		chunk("user_message_chunk", "(user interjection)", ""),
		{"sessionUpdate": "usage_update", "used": 1234, "size": 200000, "cost": obj{"amount": 0.01, "currency": "USD"}},
		{"sessionUpdate": "current_mode_update", "currentModeId": "code"},
		{"sessionUpdate": "session_info_update", "title": "Fake session", "updatedAt": "2026-01-02T03:04:05Z"},
		{"sessionUpdate": "config_option_update", "configOptions": []any{obj{
			"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "fake-1",
			"options": []any{obj{"value": "fake-1", "name": "Fake 1"}, obj{"value": "fake-2", "name": "Fake 2"}},
		}}},
		{"sessionUpdate": "notice", "severity": "info", "title": "Heads up", "description": "This is a fake agent."},
		availableCommands(),
		{"sessionUpdate": "future_thing", "x": 1},
	}
	for i, u := range steps {
		if i > 0 && t.sleep(3) {
			return
		}
		t.update(u)
	}
}

var permissionOptions = []any{
	obj{"optionId": "always", "name": "Always allow", "kind": "allow_always"},
	obj{"optionId": "once", "name": "Allow once", "kind": "allow_once"},
	obj{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
	obj{"optionId": "never", "name": "Never allow", "kind": "reject_always"},
}

func scPermission(t *turn, slow bool) {
	tc := obj{"toolCallId": t.id("call-1"), "title": "Edit main.go", "kind": "edit", "status": "pending",
		"locations": []any{obj{"path": t.sessionPath("main.go")}}, "rawInput": obj{"path": t.sessionPath("main.go")}}
	if slow {
		tc = obj{"toolCallId": t.id("call-1"), "title": "Run rm -rf build", "kind": "execute", "status": "pending",
			"rawInput": obj{"command": "rm -rf build"}}
	}
	u := obj{"sessionUpdate": "tool_call"}
	for k, v := range tc {
		u[k] = v
	}
	t.update(u)
	r := t.a.call("session/request_permission", obj{"sessionId": t.s.id, "toolCall": tc, "options": permissionOptions})
	allowed, cancelled := false, false
	var text string
	switch {
	case r.Error != nil:
		text = "permission error " + errText(r.Error)
	default:
		var res struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		json.Unmarshal(r.Result, &res) //nolint:errcheck // reported as is
		switch res.Outcome.Outcome {
		case "selected":
			text = "permission outcome=selected optionId=" + res.Outcome.OptionID
			allowed = res.Outcome.OptionID == "once" || res.Outcome.OptionID == "always"
		case "cancelled":
			text = "permission outcome=cancelled"
			cancelled = true
		default:
			text = "permission outcome=" + res.Outcome.Outcome + " result=" + string(r.Result)
		}
	}
	t.msg(text, "m1")
	status := "failed"
	if allowed {
		status = "completed"
	}
	t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": t.id("call-1"), "status": status})
	if cancelled || t.cancelled() {
		t.answer("cancelled")
	}
}

func scFsRead(t *turn, arg string) {
	path := t.sessionPath(strings.TrimSpace(arg))
	r := t.a.call("fs/read_text_file", obj{"sessionId": t.s.id, "path": path})
	if r.Error != nil {
		t.msg("fs-read error "+errText(r.Error), "m1")
		return
	}
	var res struct {
		Content string `json:"content"`
	}
	json.Unmarshal(r.Result, &res) //nolint:errcheck // an odd result reads as empty content
	t.msg("fs-read ok: "+res.Content, "m1")
}

func scFsWrite(t *turn, arg string) {
	p, content := splitWord(arg)
	r := t.a.call("fs/write_text_file", obj{"sessionId": t.s.id, "path": t.sessionPath(p), "content": content})
	if r.Error != nil {
		t.msg("fs-write error "+errText(r.Error), "m1")
		return
	}
	t.msg("fs-write ok", "m1")
}

// scShell runs a shell command in the agent's own process, in the
// session's directory, as agents with a shell tool of their own do (not
// through the client's terminal), and answers with its output.
func scShell(t *turn, arg string) {
	cmd := exec.Command("/bin/sh", "-c", strings.TrimSpace(arg))
	cmd.Dir = t.s.cwd
	out, err := cmd.CombinedOutput()
	status := "exit=0"
	if err != nil {
		status = "error=" + err.Error()
	}
	t.msg(fmt.Sprintf("sh %s output=%s", status, out), "m1")
}

func scTerminal(t *turn, arg string) {
	cmd := strings.TrimSpace(arg)
	callID := t.id("call-1")
	t.update(obj{"sessionUpdate": "tool_call", "toolCallId": callID, "title": cmd, "kind": "execute", "status": "in_progress",
		"rawInput": obj{"command": cmd}})
	fail := func(method string, e *rpcError) {
		t.msg(method+" error "+errText(e), "m1")
		t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": "failed"})
	}
	r := t.a.call("terminal/create", obj{"sessionId": t.s.id, "command": cmd, "cwd": t.s.cwd})
	if r.Error != nil {
		fail("terminal/create", r.Error)
		return
	}
	var created struct {
		TerminalID string `json:"terminalId"`
	}
	json.Unmarshal(r.Result, &created) //nolint:errcheck // an empty id is passed on
	t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": callID,
		"content": []any{obj{"type": "terminal", "terminalId": created.TerminalID}}})
	ids := obj{"sessionId": t.s.id, "terminalId": created.TerminalID}
	r = t.a.call("terminal/wait_for_exit", ids)
	if r.Error != nil {
		fail("terminal/wait_for_exit", r.Error)
		return
	}
	var exit struct {
		ExitCode *int    `json:"exitCode"`
		Signal   *string `json:"signal"`
	}
	json.Unmarshal(r.Result, &exit) //nolint:errcheck // missing fields read as "none"
	r = t.a.call("terminal/output", ids)
	if r.Error != nil {
		fail("terminal/output", r.Error)
		return
	}
	var out struct {
		Output    string `json:"output"`
		Truncated bool   `json:"truncated"`
	}
	json.Unmarshal(r.Result, &out) //nolint:errcheck // reported as is
	r = t.a.call("terminal/release", ids)
	if r.Error != nil {
		fail("terminal/release", r.Error)
		return
	}
	code := "none"
	switch {
	case exit.ExitCode != nil:
		code = strconv.Itoa(*exit.ExitCode)
	case exit.Signal != nil:
		code = "signal:" + *exit.Signal
	}
	t.msg(fmt.Sprintf("terminal exit=%s truncated=%v output=%s", code, out.Truncated, out.Output), "m1")
	status := "failed"
	if code == "0" {
		status = "completed"
	}
	t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": status,
		"rawOutput": obj{"exitCode": exit.ExitCode, "output": out.Output}})
}

func scSlow(t *turn, arg string) {
	ms, ok := atoi(t, arg)
	if !ok {
		return
	}
	t.msg("working", "m1")
	t.sleep(ms)
}

func scSleep(t *turn, arg string) {
	ms, ok := atoi(t, arg)
	if !ok {
		return
	}
	if t.sleep(ms) {
		return
	}
	t.msg("done", "m1")
}

func scAwaitSession(t *turn, arg string) {
	ns, rest := splitWord(arg)
	n, ok := atoi(t, ns)
	if !ok {
		return
	}
	ms, ok := atoi(t, rest)
	if !ok {
		return
	}
	if t.awaitSessions(n) || t.sleep(ms) {
		return
	}
	t.msg("done", "m1")
}

func scHang(t *turn, _ string) {
	t.msg("hanging", "m1")
	t.hang()
}

func scCrash(t *turn, _ string) {
	t.thought("thinking", "")
	t.msg("about to crash", "m1")
	t.a.errorf("panic: simulated crash")
	t.exit(3)
}

func scJunk(t *turn, _ string) {
	t.msg("before junk", "m1")
	t.a.writeLine([]byte("this is not json"))
	t.a.writeLine([]byte(`{"hello":1}`))
	t.a.writeLine([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + t.s.id + `"}}`))
	t.a.writeLine([]byte(`[1,2]`))
	t.a.writeLine([]byte(`{"jsonrpc":"2.0","id":987654,"result":{}}`))
	t.msg("ok", "m1")
}

func scBig(t *turn, arg string) {
	n, ok := atoi(t, arg)
	if !ok {
		return
	}
	t.msg(strings.Repeat("x", n), "m1")
}

func scLate(t *turn, _ string) {
	t.msg("main", "m1")
	t.answer("end_turn")
	t.ignoreCancel = true
	if t.sleep(20) {
		return // the agent stopped
	}
	t.msg(" tail", "m1")
	t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": t.id("late-1"), "status": "completed"})
}

func scUnknownSession(t *turn, _ string) {
	t.a.notify("session/update", obj{"sessionId": "nope", "update": chunk("agent_message_chunk", "stray", "")})
	t.msg("ok", "m1")
}

func scDupTool(t *turn, _ string) {
	t.update(obj{"sessionUpdate": "tool_call", "toolCallId": t.id("t1"), "title": "First title", "kind": "read", "status": "pending"})
	t.update(obj{"sessionUpdate": "tool_call", "toolCallId": t.id("t1"), "title": "Second title", "kind": "read", "status": "in_progress"})
	t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": t.id("t9"), "status": "completed"})
}

func scEmptyChunks(t *turn, _ string) {
	for _, s := range []string{"", "a", "", "b"} {
		t.msg(s, "m1")
	}
}

func scMessages(t *turn, _ string) {
	t.msg("Hel", "m1")
	t.thought("thinking", "")
	t.msg("lo", "m1")
	t.msg("World", "m2")
}

func scUsage(t *turn, _ string) {
	t.msg("ok", "m1")
	t.answerResult(obj{"stopReason": "end_turn", "usage": obj{"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}})
}

func scWriteFile(t *turn, arg string) {
	name, content := splitWord(arg)
	path := filepath.Join(t.s.cwd, name)
	callID := t.id("call-1")
	t.update(obj{"sessionUpdate": "tool_call", "toolCallId": callID, "title": "Write " + name, "kind": "edit", "status": "in_progress",
		"locations": []any{obj{"path": path}}, "rawInput": obj{"path": path, "content": content}})
	diff := obj{"type": "diff", "path": path, "newText": content}
	if old, err := os.ReadFile(path); err == nil {
		diff["oldText"] = string(old)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": "failed",
			"content": []any{obj{"type": "content", "content": obj{"type": "text", "text": err.Error()}}}})
		t.msg("write failed: "+err.Error(), "m1")
		return
	}
	t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": "completed", "content": []any{diff}})
	t.msg("wrote "+name, "m1")
}

// scWriteHere writes turn-SESSION.txt in the process's working directory,
// not the session's cwd, as an agent's own tools do.
func scWriteHere(t *turn, _ string) {
	name := "turn-" + t.s.id + ".txt"
	dir, err := os.Getwd()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), []byte("turn "+strconv.Itoa(t.n)+"\n"), 0o644)
	}
	if err != nil {
		t.msg("write failed: "+err.Error(), "m1")
		return
	}
	t.msg("wrote "+name, "m1")
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

func scCaps(t *turn, _ string) {
	t.a.mu.Lock()
	caps := t.a.clientCaps
	t.a.mu.Unlock()
	t.msg(compactJSON(caps), "m1")
}

func scMcp(t *turn, _ string) { t.msg(compactJSON(t.s.mcp), "m1") }

// scFSFlood sends N fs/read_text_file requests for PATH at once, without
// waiting for answers, then reports how they were answered.
func scFSFlood(t *turn, arg string) {
	ns, path := splitWord(arg)
	n, ok := atoi(t, ns)
	if !ok {
		return
	}
	chans := make([]chan response, n)
	for i := range chans {
		chans[i], _ = t.a.startCall("fs/read_text_file", obj{"sessionId": t.s.id, "path": path})
	}
	counts := map[string]int{}
	for _, ch := range chans {
		var r response
		select {
		case r = <-ch:
		case <-t.a.done:
			return
		}
		switch {
		case r.Error == nil:
			counts["ok"]++
		case strings.Contains(r.Error.Message, "too many requests"):
			counts["busy"]++
		case strings.Contains(r.Error.Message, "bytes in flight"):
			counts["bytes"]++
		case strings.Contains(r.Error.Message, "denied"):
			counts["denied"]++
		default:
			counts["other"]++
		}
	}
	t.msg(fmt.Sprintf("flood ok=%d busy=%d bytes=%d denied=%d other=%d", counts["ok"], counts["busy"], counts["bytes"], counts["denied"], counts["other"]), "m1")
}

// scFlaky fails the first N prompts that name FILE as the model provider
// would (counting them in FILE, one line each), then echoes TEXT:
// "flaky FILE N KIND TEXT", KIND 503 (a JSON-RPC error carrying the
// provider's 503), 429 (one carrying 429 Too Many Requests and a
// Retry-After of 0.01 s) or drop (stderr "Error: read ECONNRESET", exit 1).
func scFlaky(t *turn, arg string) {
	f := strings.SplitN(arg, " ", 4)
	if len(f) < 4 {
		t.answerErr(-32602, "flaky: want FILE N KIND TEXT", nil)
		return
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.answerErr(-32602, "flaky: N is not a number", nil)
		return
	}
	fh, err := os.OpenFile(f[0], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.answerErr(-32603, "flaky: "+err.Error(), nil)
		return
	}
	// This prompt's number is where its own append ended (each append is
	// atomic), not the file's length read afterwards, which counts the
	// prompts of trials running at the same time too.
	fh.WriteString("x\n")
	end, _ := fh.Seek(0, io.SeekCurrent)
	fh.Close()
	if int(end/2) <= n {
		switch f[2] {
		case "503":
			t.answerErr(-32603, "Internal error", obj{"error": "API Error: 503 Service Unavailable"})
			return
		case "429":
			t.answerErr(-32603, "Internal error", obj{"error": "429 Too Many Requests", "retry-after": "0.01"})
			return
		case "drop":
			t.msg("working", "m1")
			t.a.errorf("Error: read ECONNRESET")
			t.exit(1)
			return
		}
	}
	scEcho(t, f[3])
}
