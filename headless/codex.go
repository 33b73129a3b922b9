package headless

import (
	"encoding/json"
)

// codexMap maps the events of codex exec --json: thread.started, then per
// turn item.started/updated/completed (reasoning, agent_message,
// command_execution, file_change, mcp_tool_call, web_search, todo_list,
// error) and turn.completed or turn.failed.
type codexMap struct {
	started map[string]bool // items announced as tool calls
}

type codexItem struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Text   string `json:"text"`
	Status string `json:"status"`
	// command_execution
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	// file_change
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	// mcp_tool_call
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    json.RawMessage `json:"result"`
	Error     json.RawMessage `json:"error"`
	// web_search
	Query string `json:"query"`
	// todo_list
	Items []struct {
		Text      string `json:"text"`
		Completed bool   `json:"completed"`
	} `json:"items"`
	// error
	Message string `json:"message"`
}

func (m *codexMap) event(typ string, ev map[string]json.RawMessage, line []byte, out *output) bool {
	t := out.turn
	switch typ {
	case "thread.started":
		field(ev, "thread_id", &t.Session)
		return true
	case "turn.started":
		return true
	case "item.started", "item.updated", "item.completed":
		var it codexItem
		field(ev, "item", &it)
		return m.item(typ, &it, out)
	case "turn.completed":
		var u struct {
			Usage struct {
				Input     *int64 `json:"input_tokens"`
				Cached    *int64 `json:"cached_input_tokens"`
				Output    *int64 `json:"output_tokens"`
				Reasoning *int64 `json:"reasoning_output_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(line, &u)
		t.end = &End{StopReason: "end_turn", Usage: usage(map[string]*int64{
			"inputTokens": u.Usage.Input, "cachedReadTokens": u.Usage.Cached,
			"outputTokens": u.Usage.Output, "thoughtTokens": u.Usage.Reasoning,
		})}
		return true
	case "turn.failed", "error":
		var e struct {
			Message string `json:"message"`
			Error   struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(line, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = e.Message
		}
		t.end = &End{StopReason: "end_turn", Error: "codex reported " + typ + ": " + msg}
		return false // kept whole as well
	}
	return false
}

func (m *codexMap) item(phase string, it *codexItem, out *output) bool {
	done := phase == "item.completed"
	if m.started == nil {
		m.started = map[string]bool{}
	}
	// start announces a tool call once, whichever event shows it first.
	start := func(name, kind string, input json.RawMessage, locs []string) {
		if !m.started[it.ID] {
			m.started[it.ID] = true
			out.toolStart(it.ID, name, kind, input, locs)
		}
	}
	switch it.Type {
	case "reasoning":
		if done {
			out.thought(it.Text, it.ID)
		}
	case "agent_message":
		if done {
			out.message(it.Text, it.ID)
		}
	case "command_execution":
		start("shell", "execute", mustJSON(map[string]string{"command": it.Command}), nil)
		if done {
			res := map[string]any{"output": it.AggregatedOutput}
			if it.ExitCode != nil {
				res["exitCode"] = *it.ExitCode
			}
			out.toolDone(it.ID, it.Status == "failed" || it.ExitCode != nil && *it.ExitCode != 0, res)
		}
	case "file_change":
		var paths []string
		for _, c := range it.Changes {
			paths = append(paths, c.Path)
		}
		in := mustJSON(map[string]any{"changes": it.Changes})
		start("apply_patch", "edit", in, paths)
		if done {
			out.toolDone(it.ID, it.Status == "failed", map[string]any{"status": it.Status})
		}
	case "mcp_tool_call":
		start(it.Server+"."+it.Tool, "other", it.Arguments, nil)
		if done {
			res := it.Result
			if len(res) == 0 || string(res) == "null" {
				res = it.Error
			}
			out.toolDone(it.ID, it.Status == "failed", res)
		}
	case "web_search":
		start("web_search", "fetch", mustJSON(map[string]string{"query": it.Query}), nil)
		if done {
			out.toolDone(it.ID, false, nil)
		}
	case "todo_list":
		entries := []map[string]string{}
		for _, i := range it.Items {
			status := "pending"
			if i.Completed {
				status = "completed"
			}
			entries = append(entries, map[string]string{"content": i.Text, "status": status, "priority": "medium"})
		}
		out.plan(entries)
	case "error":
		out.add(map[string]any{"sessionUpdate": "notice", "severity": "warning", "title": "codex", "description": it.Message})
	default:
		return false
	}
	return true
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
