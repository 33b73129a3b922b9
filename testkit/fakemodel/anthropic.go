package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// anthropic is the fake Anthropic Messages API that Claude Code calls:
// POST /v1/messages (streamed or not) and /v1/messages/count_tokens.
type anthropic struct {
	log  *Log
	opts Options
	done <-chan struct{}
	ids  atomic.Int64
}

// Anthropic is the API of Claude Code: POST /v1/messages with SSE.
func Anthropic(log *Log, opts Options, done <-chan struct{}) http.Handler {
	return &anthropic{log: log, opts: opts, done: done}
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Input     map[string]any  `json:"input,omitempty"`
	// ID and Name are a tool_use block's (in an assistant message).
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

// blocks returns a message's content as blocks (a string is one text block).
func (m anthropicMessage) blocks() []anthropicBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	json.Unmarshal(m.Content, &bs)
	return bs
}

// toolResultText is the text of a tool_result block's content.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []anthropicBlock
	json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// turn returns the prompt of the conversation's current turn (the text of
// its latest user message that holds text besides system reminders and no
// tool result) and how many tool results came after it.
func (in anthropicRequest) turn() (prompt string, results int) {
	searches := map[string]bool{} // the ids of ToolSearch calls
	for _, m := range in.Messages {
		if m.Role != "assistant" {
			continue
		}
		for _, b := range m.blocks() {
			if b.Type == "tool_use" && b.Name == "ToolSearch" {
				searches[b.ID] = true
			}
		}
	}
	for i := len(in.Messages) - 1; i >= 0; i-- {
		m := in.Messages[i]
		if m.Role != "user" {
			continue
		}
		text, n, result := "", 0, false
		for _, b := range m.blocks() {
			switch {
			case b.Type == "tool_result":
				result = true
				if !searches[b.ToolUseID] {
					// Claude Code loading deferred tools is no step of
					// the prompt's script.
					n++
				}
			case b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>"):
				text = b.Text
			}
		}
		if !result && text != "" {
			return text, results
		}
		results += n
	}
	return "", results
}

// lookup returns the key input (a string) of the conversation's latest
// tool call that had one.
func (in anthropicRequest) lookup(key string) (string, bool) {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role != "assistant" {
			continue
		}
		bs := in.Messages[i].blocks()
		for j := len(bs) - 1; j >= 0; j-- {
			if bs[j].Type != "tool_use" {
				continue
			}
			if v, ok := bs[j].Input[key].(string); ok {
				return v, true
			}
		}
	}
	return "", false
}

// anthropicContent is one block of the reply.
type anthropicContent struct {
	Type      string         `json:"type"`
	Text      string         `json:"text,omitempty"`
	Thinking  string         `json:"thinking,omitempty"`
	Signature string         `json:"signature,omitempty"`
	ID        string         `json:"id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Input     map[string]any `json:"input,omitempty"`
}

func (a *anthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := base(a.log, a.opts, w, r)
	if req == nil {
		return
	}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages/count_tokens"):
		a.log.setReply(req, "count_tokens", "")
		writeJSON(w, map[string]any{"input_tokens": 123})
		return
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
	default:
		a.log.setReply(req, "other", "")
		writeJSON(w, map[string]any{})
		return
	}
	var in anthropicRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		a.log.setReply(req, "error: "+err.Error(), "")
		http.Error(w, fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, err.Error()), http.StatusBadRequest)
		return
	}
	tools := map[string]bool{}
	for _, t := range in.Tools {
		tools[t.Name] = true
	}
	var last []anthropicBlock
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "user" {
		last = in.Messages[n-1].blocks()
	}
	var results []string
	hasResult := false
	for _, b := range last {
		if b.Type == "tool_result" {
			hasResult = true
			results = append(results, toolResultText(b.Content))
		}
	}
	prompt, done := in.turn()
	// A result of ToolSearch (Claude Code's loader of deferred tools,
	// MCP tools among them) for the prompt's "tool NAME" command is
	// followed by the call of NAME, now offered, not by the final answer;
	// the search is no step of the prompt's script.
	// A search that did not load it ends the turn.
	searched := hasResult && a.searched(in.Messages, last)
	if searched {
		if c := ParseCommand(prompt); c.Op == "tool" && tools[c.Tool] {
			hasResult = false
		}
	}
	model := in.Model
	if model == "" {
		model = "claude-fake"
	}
	var content []anthropicContent
	stop := "end_turn"
	script := ParseScript(prompt)
	cmd, more, err := script.Step(done, in.lookup)
	switch {
	case a.opts.UserTurns != nil && in.ToolChoice.Type == "tool":
		a.log.setReply(req, "user", prompt)
		stop = "tool_use"
		content = []anthropicContent{{Type: "tool_use", ID: fmt.Sprintf("toolu_fake%04d", a.ids.Add(1)),
			Name: in.ToolChoice.Name, Input: a.userTurn(in.Messages, prompt)}}
	case strings.HasPrefix(strings.TrimSpace(prompt), SuggestionMarker):
		// Claude Code asks, after a turn, what the user might type next;
		// the request offers tools, but the answer is text.
		a.log.setReply(req, "suggestion", prompt)
		content = []anthropicContent{{Type: "text", Text: SuggestionReply}}
	case hasResult && (!more || searched):
		a.log.setReply(req, "final", prompt)
		content = []anthropicContent{{Type: "text", Text: final(strings.Join(results, "\n"))}}
	case strings.Contains(prompt, "<severity>N</severity>"):
		// Claude Code's auto mode asks the model to grade an action's
		// harm before running it: none.
		a.log.setReply(req, "side", prompt)
		content = []anthropicContent{{Type: "text", Text: "<severity>0</severity>"}}
	case len(tools) == 0:
		a.log.setReply(req, "side", prompt)
		content = []anthropicContent{{Type: "text", Text: SideReply}}
	case err != nil:
		a.log.setReply(req, "unresolved", prompt)
		content = []anthropicContent{{Type: "text", Text: Unresolved + err.Error()}}
	default:
		name, input := a.toolFor(cmd, tools)
		if name == "" {
			a.log.setReply(req, "side", prompt)
			content = []anthropicContent{{Type: "text", Text: SideReply}}
			break
		}
		if cmd.Slow && !waitSlow(r.Context(), a.opts, a.done) {
			a.log.setReply(req, "cancelled", prompt)
			return
		}
		a.log.setReply(req, "tool:"+name, prompt)
		stop = "tool_use"
		content = []anthropicContent{
			{Type: "thinking", Thinking: thought(cmd, name), Signature: "fakesig"},
			{Type: "text", Text: Preamble},
			{Type: "tool_use", ID: fmt.Sprintf("toolu_fake%04d", a.ids.Add(1)), Name: name, Input: input},
		}
	}
	msgID := fmt.Sprintf("msg_fake%04d", a.ids.Add(1))
	u := a.opts.usage(Usage{Input: 100, Output: 20})
	usage := map[string]any{"input_tokens": u.Input, "output_tokens": u.Output, "cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.Cached}
	if !in.Stream {
		writeJSON(w, map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	s := newSSE(w, false, a.opts)
	send := func(typ string, v map[string]any) {
		v["type"] = typ
		b, _ := json.Marshal(v)
		s.event(typ, b)
	}
	start := map[string]any{"input_tokens": u.Input, "output_tokens": 1, "cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.Cached}
	send("message_start", map[string]any{"message": map[string]any{"id": msgID, "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	send("ping", map[string]any{})
	for i, c := range content {
		switch c.Type {
		case "thinking":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, part := range split(c.Thinking) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
			}
			send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "signature_delta", "signature": c.Signature}})
		case "text":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range split(c.Text) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "tool_use":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
			args, _ := json.Marshal(c.Input)
			for _, part := range split(string(args)) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": u.Output}})
	send("message_stop", map[string]any{})
}

// userTurn is the scripted simulated user's answer to a conversation.
func (a *anthropic) userTurn(msgs []anthropicMessage, last string) map[string]any {
	n := -1
	for _, m := range msgs {
		if m.Role == "assistant" {
			n++
		}
	}
	if n < 0 {
		n = 0
	}
	if n >= len(a.opts.UserTurns) {
		return map[string]any{"stop": true, "reason": a.opts.UserStop}
	}
	return map[string]any{"message": strings.ReplaceAll(a.opts.UserTurns[n], "{{last}}", last)}
}

// toolFor maps a command onto the tools Claude Code offers. With client
// fs/terminal capabilities its Read, Write and Bash become mcp__acp__*.
func (a *anthropic) toolFor(c Command, tools map[string]bool) (string, map[string]any) {
	pick := func(names ...string) string {
		for _, n := range names {
			if tools[n] {
				return n
			}
		}
		return ""
	}
	switch c.Op {
	case "tool":
		if tools[c.Tool] {
			return c.Tool, c.Args
		}
		if tools["ToolSearch"] {
			// Deferred (Claude Code offers MCP tools by name only, its
			// ToolSearch loading them): load it first.
			return "ToolSearch", map[string]any{"query": "select:" + c.Tool, "max_results": 1}
		}
		return "", nil // not offered: a plain answer says so
	case "read":
		if n := pick("mcp__acp__Read", "Read"); n != "" {
			return n, map[string]any{"file_path": c.Path}
		}
	case "write":
		if n := pick("mcp__acp__Write", "Write"); n != "" {
			return n, map[string]any{"file_path": c.Path, "content": c.Text}
		}
	case "plan":
		if tools["TodoWrite"] {
			var todos []map[string]any
			for _, p := range planSteps() {
				todos = append(todos, map[string]any{"content": p.Step, "status": p.Status, "activeForm": p.Step})
			}
			return "TodoWrite", map[string]any{"todos": todos}
		}
	}
	shell := c.Shell
	if shell == "" {
		shell = "echo hi"
	}
	if n := pick("mcp__acp__Bash", "Bash"); n != "" {
		// mcp__acp__Bash rejects a call without a numeric timeout.
		return n, map[string]any{"command": shell, "description": "Run " + shell, "timeout": 60000}
	}
	return "", nil
}

// split cuts s into a few pieces, to stream it as several deltas.
func split(s string) []string {
	if len(s) < 8 {
		return []string{s}
	}
	var parts []string
	step := (len(s) + 2) / 3
	for len(s) > step {
		// Cut at a UTF-8 boundary.
		i := step
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		parts = append(parts, s[:i])
		s = s[i:]
	}
	return append(parts, s)
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "fakemodel: encoding reply: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// searched says whether the tool results of last answer a ToolSearch call
// of the assistant message before them.
func (a *anthropic) searched(msgs []anthropicMessage, last []anthropicBlock) bool {
	names := map[string]string{}
	for _, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		for _, b := range m.blocks() {
			if b.Type == "tool_use" {
				names[b.ID] = b.Name
			}
		}
	}
	for _, b := range last {
		if b.Type == "tool_result" && names[b.ToolUseID] == "ToolSearch" {
			return true
		}
	}
	return false
}
