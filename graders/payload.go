package graders

import (
	"encoding/json"
	"strings"
	"time"

	"harness/schemas"
)

// caseFields are the grading inputs a record may lack and its prompt case
// may supply.
type caseFields struct {
	input     schemas.Turns
	expected  string
	hint      string
	reference string
}

func (in *Input) fields() caseFields {
	r := in.Record
	f := caseFields{input: r.Input, expected: r.Expected, hint: r.Hint, reference: r.Reference}
	if c := in.Case; c != nil {
		if len(f.input.List) == 0 {
			f.input = c.Input
		}
		if f.expected == "" {
			f.expected = c.Expected
		}
		if f.hint == "" {
			f.hint = c.Hint
		}
		if f.reference == "" {
			f.reference = c.Reference
		}
	}
	return f
}

// optString is a string that encodes as null when empty.
func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// harnessPayload is the acp-harness executable protocol's stdin object
// (camelCase), also the base of what JavaScript graders receive.
func harnessPayload(in *Input) map[string]any {
	r := in.Record
	f := in.fields()
	traj := r.Trajectory
	if traj == nil {
		traj = []schemas.Step{}
	}
	metadata := r.Metadata
	if metadata == nil {
		metadata = map[string]any{}
	}
	var wsPath any
	var changes any = []schemas.FileChange{}
	if r.Workspace != nil {
		wsPath = r.Workspace.Path
		if r.Workspace.FileChanges != nil {
			changes = r.Workspace.FileChanges
		}
	}
	cwd := r.Cwd
	if cwd == "" && r.Workspace != nil {
		cwd = r.Workspace.Path
	}
	return map[string]any{
		"id":            r.ID,
		"trial":         r.Trial,
		"input":         f.input,
		"output":        r.Output,
		"expected":      optString(f.expected),
		"hint":          optString(f.hint),
		"reference":     optString(f.reference),
		"trajectory":    traj,
		"metadata":      metadata,
		"cwd":           optString(cwd),
		"workspacePath": wsPath,
		"fileChanges":   changes,
		"stopReason":    optString(r.StopReason),
		"timing":        r.Timing,
		"usage":         r.Usage,
		"toolErrors":    r.ToolErrors,
	}
}

// jsPayload is what a JavaScript grade(input) receives: the acp-harness
// fields plus the RFT fields messages, response and toolCalls (OpenAI
// chat shape).
func jsPayload(in *Input) map[string]any {
	p := harnessPayload(in)
	conv := buildConv(in)
	p["messages"] = conv.openAIMessages()
	p["response"] = in.Record.Output
	p["toolCalls"] = conv.openAIToolCalls()
	return p
}

// toolUse is one tool call of the conversation, in a neutral form.
type toolUse struct {
	id       string
	name     string
	args     string // JSON text of the raw input
	input    json.RawMessage
	output   json.RawMessage
	status   string
	duration *int64
}

// convMsg is one message of the conversation rebuilt from a trajectory.
type convMsg struct {
	role    string // user, assistant
	content string
	tools   []toolUse
}

type conv struct{ msgs []convMsg }

// buildConv rebuilds the chat from a record: a user message per input
// turn, an assistant message per agent message step, tool calls attached to
// the assistant message they follow (or a new empty one).
func buildConv(in *Input) conv {
	f := in.fields()
	turns := f.input.List
	var c conv
	emitted := 0
	emitUser := func(upTo int) {
		for emitted < upTo && emitted < len(turns) {
			c.msgs = append(c.msgs, convMsg{role: "user", content: turns[emitted]})
			emitted++
		}
	}
	emitUser(1)
	for i := range in.Record.Trajectory {
		s := &in.Record.Trajectory[i]
		if s.Turn > 0 {
			emitUser(s.Turn)
		}
		switch s.Type {
		case schemas.StepMessage:
			c.msgs = append(c.msgs, convMsg{role: "assistant", content: s.TextContent()})
		case schemas.StepToolCall:
			tu := toolUse{id: s.ToolCallID, name: toolName(s), input: s.Input, output: s.Output, status: s.Status, duration: s.Duration}
			tu.args = "{}"
			if len(s.Input) > 0 && json.Valid(s.Input) {
				tu.args = string(s.Input)
			}
			n := len(c.msgs)
			if n == 0 || c.msgs[n-1].role != "assistant" {
				c.msgs = append(c.msgs, convMsg{role: "assistant"})
				n++
			}
			c.msgs[n-1].tools = append(c.msgs[n-1].tools, tu)
		}
	}
	emitUser(len(turns))
	return c
}

func toolName(s *schemas.Step) string {
	switch {
	case s.ToolName != "":
		return s.ToolName
	case s.Name != "":
		return s.Name
	case s.Kind != "":
		return s.Kind
	}
	return "tool"
}

// rawText returns the text of a JSON string, or the JSON itself.
func rawText(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	var s string
	if b[0] == '"' && json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}

func rawOrNil(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func (c conv) openAIToolCalls() []any {
	out := []any{}
	for _, m := range c.msgs {
		for _, t := range m.tools {
			out = append(out, openAIToolCall(t))
		}
	}
	return out
}

func openAIToolCall(t toolUse) map[string]any {
	return map[string]any{
		"id":       t.id,
		"type":     "function",
		"function": map[string]any{"name": t.name, "arguments": t.args},
	}
}

// openAIMessages renders the chat in OpenAI's shape: assistant messages
// carry tool_calls, each followed by a role "tool" message with its output.
func (c conv) openAIMessages() []any {
	out := []any{}
	for _, m := range c.msgs {
		msg := map[string]any{"role": m.role, "content": m.content}
		if len(m.tools) > 0 {
			calls := make([]any, len(m.tools))
			for i, t := range m.tools {
				calls[i] = openAIToolCall(t)
			}
			msg["tool_calls"] = calls
		}
		out = append(out, msg)
		for _, t := range m.tools {
			out = append(out, map[string]any{"role": "tool", "tool_call_id": t.id, "content": rawText(t.output)})
		}
	}
	return out
}

// agentvMessages renders the chat in agentv's snake_case wire shape.
func (c conv) agentvMessages() []any {
	out := []any{}
	for _, m := range c.msgs {
		msg := map[string]any{"role": m.role, "content": m.content}
		if len(m.tools) > 0 {
			calls := make([]any, len(m.tools))
			for i, t := range m.tools {
				tc := map[string]any{"tool": t.name, "id": t.id, "input": rawOrNil(t.input), "output": rawOrNil(t.output), "status": optString(t.status)}
				if t.duration != nil {
					tc["duration_ms"] = *t.duration
				}
				calls[i] = tc
			}
			msg["tool_calls"] = calls
		}
		out = append(out, msg)
	}
	return out
}

// agentvPayload is agentv's script grader stdin (snake_case wire format).
func agentvPayload(in *Input, config any) map[string]any {
	r := in.Record
	f := in.fields()
	c := buildConv(in)
	inputMsgs := []any{}
	for _, t := range f.input.List {
		inputMsgs = append(inputMsgs, map[string]any{"role": "user", "content": t})
	}
	expected := []any{}
	if f.expected != "" {
		expected = append(expected, map[string]any{"role": "assistant", "content": f.expected})
	}
	criteria := f.expected
	if criteria == "" {
		criteria = f.hint
	}
	toolCounts := map[string]int{}
	events, errs, llm := 0, 0, 0
	for _, m := range c.msgs {
		// Every assistant message is one model call, whether it said
		// something, called tools, or both.
		if m.role == "assistant" && (m.content != "" || len(m.tools) > 0) {
			llm++
		}
		for _, t := range m.tools {
			events++
			toolCounts[t.name]++
			if t.status == "failed" {
				errs++
			}
		}
	}
	summary := map[string]any{"event_count": events, "tool_calls": toolCounts, "error_count": errs, "llm_call_count": llm}
	msgs := c.agentvMessages()
	traj := r.Trajectory
	if traj == nil {
		traj = []schemas.Step{}
	}
	var tokenUsage, cost any
	if u := r.Usage; u != nil {
		if u.InputTokens != nil || u.OutputTokens != nil {
			tokenUsage = map[string]any{"input": u.InputTokens, "output": u.OutputTokens}
		}
		cost = costUSD(u.Cost)
	}
	var wsPath, fileChanges any
	if r.Workspace != nil {
		wsPath = r.Workspace.Path
		fileChanges = unifiedDiff(r.Workspace.FileChanges)
	}
	p := map[string]any{
		"criteria":        criteria,
		"input":           inputMsgs,
		"input_files":     []string{},
		"output":          r.Output,
		"expected_output": expected,
		"messages":        msgs,
		"trace": map[string]any{
			"messages": msgs,
			"events":   traj,
			"metrics":  summary,
		},
		"trace_summary":  summary,
		"token_usage":    tokenUsage,
		"cost_usd":       cost,
		"duration_ms":    r.Timing.Total,
		"start_time":     isoTime(r.Timing.Start),
		"end_time":       isoTime(r.Timing.End),
		"file_changes":   fileChanges,
		"workspace_path": wsPath,
		"metadata":       r.Metadata,
		"config":         config,
		"id":             r.ID,
		"trial":          r.Trial,
		"stop_reason":    optString(r.StopReason),
	}
	return p
}

func isoTime(ms int64) any {
	if ms <= 0 {
		return nil
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// costUSD reads ACP's cost ({amount, currency}) or a bare number.
func costUSD(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var c struct {
		Amount   *float64 `json:"amount"`
		Currency string   `json:"currency"`
	}
	if json.Unmarshal(raw, &c) == nil && c.Amount != nil && (c.Currency == "" || strings.EqualFold(c.Currency, "USD")) {
		return *c.Amount
	}
	return nil
}

// unifiedDiff joins per-file diffs into one unified diff, adding file
// headers where a diff lacks them.
func unifiedDiff(changes []schemas.FileChange) any {
	if len(changes) == 0 {
		return nil
	}
	var b strings.Builder
	for _, ch := range changes {
		d := ch.Diff
		if strings.HasPrefix(d, "diff ") || strings.HasPrefix(d, "--- ") {
			b.WriteString(d)
		} else {
			from, to := "a/"+ch.Path, "b/"+ch.Path
			switch ch.Status {
			case "added":
				from = "/dev/null"
			case "deleted":
				to = "/dev/null"
			}
			b.WriteString("--- " + from + "\n+++ " + to + "\n")
			if ch.Binary {
				b.WriteString("Binary files differ\n")
			}
			b.WriteString(d)
		}
		if d != "" && !strings.HasSuffix(d, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
