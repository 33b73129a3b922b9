package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// openAI is the fake OpenAI Responses API that Codex calls: POST
// /v1/responses with stream:true.
type openAI struct {
	log  *Log
	opts Options
	done <-chan struct{}
	ids  atomic.Int64
}

// OpenAIResponses is the API of Codex: POST /v1/responses with SSE.
func OpenAIResponses(log *Log, opts Options, done <-chan struct{}) http.Handler {
	return &openAI{log: log, opts: opts, done: done}
}

type openAIItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
	CallID  string          `json:"call_id,omitempty"`
	Output  json.RawMessage `json:"output,omitempty"`
}

type openAIRequest struct {
	Model  string       `json:"model"`
	Stream bool         `json:"stream"`
	Input  []openAIItem `json:"input"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Text struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// itemText is the text of a message item's content (a string or a list of
// input_text/output_text parts).
func itemText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (o *openAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := base(o.log, o.opts, w, r)
	if req == nil {
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		o.log.setReply(req, "other", "")
		if strings.HasSuffix(r.URL.Path, "/models") {
			writeJSON(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
			return
		}
		writeJSON(w, map[string]any{})
		return
	}
	var in openAIRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		o.log.setReply(req, "error: "+err.Error(), "")
		http.Error(w, fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error()), http.StatusBadRequest)
		return
	}
	tools := map[string]string{}
	for _, t := range in.Tools {
		if t.Name != "" {
			tools[t.Name] = t.Type
		}
	}
	lastUser := -1
	for i, it := range in.Input {
		if it.Type == "message" && it.Role == "user" {
			lastUser = i
		}
	}
	var prompt string
	var results []string
	if lastUser >= 0 {
		prompt = itemText(in.Input[lastUser].Content)
		for _, it := range in.Input[lastUser+1:] {
			if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
				results = append(results, itemText(it.Output))
			}
		}
	}
	id := o.ids.Add(1)
	var items []map[string]any
	var thinking string
	switch {
	case in.Text.Format.Type == "json_schema":
		o.log.setReply(req, "json", prompt)
		b, _ := json.Marshal(fromSchema(in.Text.Format.Schema, 0))
		items = append(items, textItem(id, string(b)))
	case len(results) > 0:
		o.log.setReply(req, "final", prompt)
		items = append(items, textItem(id, final(strings.Join(results, "\n"))))
	case len(tools) == 0:
		o.log.setReply(req, "side", prompt)
		items = append(items, textItem(id, SideReply))
	default:
		cmd := ParseCommand(prompt)
		call := o.callFor(cmd, tools, id)
		if call == nil {
			o.log.setReply(req, "side", prompt)
			items = append(items, textItem(id, SideReply))
			break
		}
		if cmd.Slow && !waitSlow(r.Context(), o.opts, o.done) {
			o.log.setReply(req, "cancelled", prompt)
			return
		}
		o.log.setReply(req, "tool:"+call["name"].(string), prompt)
		thinking = thought(cmd, call["name"].(string))
		items = append(items,
			map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_fake%04d", id),
				"summary": []any{map[string]any{"type": "summary_text", "text": thinking}}},
			textItem(id, Preamble),
			call)
	}
	respID := fmt.Sprintf("resp_fake%04d", id)
	u := o.opts.usage(Usage{Input: 100, Output: 20, Reasoning: 5})
	usage := map[string]any{"input_tokens": u.Input + u.Cached, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning}, "total_tokens": u.Input + u.Cached + u.Output}
	completed := map[string]any{"id": respID, "object": "response", "status": "completed", "model": in.Model,
		"output": items, "usage": usage}
	if !in.Stream {
		writeJSON(w, completed)
		return
	}
	s := newSSE(w, false, o.opts)
	seq := 0
	send := func(typ string, v map[string]any) {
		v["type"] = typ
		v["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(v)
		s.event(typ, b)
	}
	send("response.created", map[string]any{"response": map[string]any{"id": respID, "object": "response",
		"status": "in_progress", "model": in.Model, "output": []any{}}})
	for i, it := range items {
		itemID, _ := it["id"].(string)
		switch it["type"] {
		case "reasoning":
			send("response.output_item.added", map[string]any{"output_index": i,
				"item": map[string]any{"type": "reasoning", "id": itemID, "summary": []any{}}})
			send("response.reasoning_summary_part.added", map[string]any{"item_id": itemID, "output_index": i,
				"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
			for _, d := range split(thinking) {
				send("response.reasoning_summary_text.delta", map[string]any{"item_id": itemID, "output_index": i,
					"summary_index": 0, "delta": d})
			}
			send("response.reasoning_summary_text.done", map[string]any{"item_id": itemID, "output_index": i,
				"summary_index": 0, "text": thinking})
			send("response.reasoning_summary_part.done", map[string]any{"item_id": itemID, "output_index": i,
				"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": thinking}})
		case "message":
			text := it["content"].([]any)[0].(map[string]any)["text"].(string)
			send("response.output_item.added", map[string]any{"output_index": i,
				"item": map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}})
			send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, d := range split(text) {
				send("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "delta": d})
			}
			send("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "text": text})
			send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call":
			args := it["arguments"].(string)
			added := map[string]any{"type": "function_call", "id": itemID, "call_id": it["call_id"], "name": it["name"],
				"arguments": "", "status": "in_progress"}
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, d := range split(args) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": d})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i, "arguments": args})
		case "custom_tool_call":
			input := it["input"].(string)
			added := map[string]any{"type": "custom_tool_call", "id": itemID, "call_id": it["call_id"], "name": it["name"],
				"input": "", "status": "in_progress"}
			send("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, d := range split(input) {
				send("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": d})
			}
			send("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": i, "input": input})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	send("response.completed", map[string]any{"response": completed})
}

// textItem is an assistant message output item.
func textItem(id int64, text string) map[string]any {
	return map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%04d", id), "role": "assistant",
		"status": "completed", "content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// callFor maps a command onto Codex's tools: exec_command for shell (and
// cat for read), apply_patch for write, update_plan for plan. It returns
// the output item, or nil when no fitting tool is offered.
func (o *openAI) callFor(c Command, tools map[string]string, id int64) map[string]any {
	callID := fmt.Sprintf("call_fake%04d", id)
	item := func(name string, args map[string]any) map[string]any {
		if tools[name] == "custom" {
			in, _ := args["input"].(string)
			return map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_fake%04d", id), "call_id": callID,
				"name": name, "input": in, "status": "completed"}
		}
		b, _ := json.Marshal(args)
		return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%04d", id), "call_id": callID,
			"name": name, "arguments": string(b), "status": "completed"}
	}
	switch c.Op {
	case "write":
		if _, ok := tools["apply_patch"]; ok {
			var b strings.Builder
			b.WriteString("*** Begin Patch\n*** Add File: " + c.Path + "\n")
			for _, line := range strings.Split(c.Text, "\n") {
				b.WriteString("+" + line + "\n")
			}
			b.WriteString("*** End Patch\n")
			return item("apply_patch", map[string]any{"input": b.String()})
		}
		c.Shell = fmt.Sprintf("printf '%%s\\n' '%s' > '%s'", c.Text, c.Path)
	case "plan":
		if _, ok := tools["update_plan"]; ok {
			var plan []map[string]any
			for _, p := range planSteps() {
				plan = append(plan, map[string]any{"step": p.Step, "status": p.Status})
			}
			return item("update_plan", map[string]any{"explanation": "Scripted plan.", "plan": plan})
		}
	}
	shell := c.Shell
	if shell == "" {
		shell = "echo hi"
	}
	if _, ok := tools["exec_command"]; ok {
		return item("exec_command", map[string]any{"cmd": shell})
	}
	if _, ok := tools["shell"]; ok {
		return item("shell", map[string]any{"command": []string{"bash", "-lc", shell}})
	}
	return nil
}
