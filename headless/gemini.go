package headless

import (
	"encoding/json"
)

// geminiMap maps Gemini CLI's stream-json events: init, message (user and
// assistant deltas), tool_use, tool_result, error and result.
type geminiMap struct{}

// geminiKinds maps Gemini CLI's tool names to ACP tool kinds.
var geminiKinds = map[string]string{
	"read_file": "read", "read_many_files": "read",
	"write_file": "edit", "replace": "edit",
	"run_shell_command": "execute",
	"glob":              "search", "grep_search": "search", "list_directory": "search", "search_file_content": "search",
	"web_fetch": "fetch", "google_web_search": "fetch",
	"write_todos": "think", "enter_plan_mode": "switch_mode",
}

func (geminiMap) event(typ string, ev map[string]json.RawMessage, line []byte, out *output) bool {
	t := out.turn
	switch typ {
	case "init":
		field(ev, "session_id", &t.Session)
		field(ev, "model", &t.Model)
		return false // kept whole as an event
	case "message":
		var m struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		_ = json.Unmarshal(line, &m)
		if m.Role == "user" {
			return true // the prompt, which the record has
		}
		out.message(m.Content, "")
		return true
	case "thought":
		var m struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(line, &m)
		out.thought(m.Content, "")
		return true
	case "tool_use":
		var u struct {
			Name   string          `json:"tool_name"`
			ID     string          `json:"tool_id"`
			Params json.RawMessage `json:"parameters"`
		}
		_ = json.Unmarshal(line, &u)
		var in struct {
			FilePath string `json:"file_path"`
			Path     string `json:"path"`
		}
		_ = json.Unmarshal(u.Params, &in)
		var locs []string
		for _, p := range []string{in.FilePath, in.Path} {
			if p != "" {
				locs = append(locs, p)
			}
		}
		out.toolStart(u.ID, u.Name, toolKind(geminiKinds, u.Name), u.Params, locs)
		return true
	case "tool_result":
		var r struct {
			ID     string          `json:"tool_id"`
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
			Error  json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(line, &r)
		var res any
		if len(r.Output) > 0 {
			res = toolResultText(r.Output)
		} else if len(r.Error) > 0 {
			res = r.Error
		}
		out.toolDone(r.ID, r.Status != "success", res)
		return true
	case "result":
		var r struct {
			Status string `json:"status"`
			Error  struct {
				Message string `json:"message"`
			} `json:"error"`
			Stats struct {
				Input  *int64 `json:"input_tokens"`
				Output *int64 `json:"output_tokens"`
				Cached *int64 `json:"cached"`
				Total  *int64 `json:"total_tokens"`
			} `json:"stats"`
		}
		_ = json.Unmarshal(line, &r)
		end := &End{StopReason: "end_turn", Usage: usage(map[string]*int64{
			"inputTokens": r.Stats.Input, "outputTokens": r.Stats.Output,
			"cachedReadTokens": r.Stats.Cached, "totalTokens": r.Stats.Total,
		})}
		if r.Status != "success" {
			end.Error = "gemini reported " + r.Status
			if r.Error.Message != "" {
				end.Error += ": " + r.Error.Message
			}
		}
		t.end = end
		return true
	}
	return false
}
