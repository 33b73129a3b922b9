package headless

import (
	"encoding/json"
	"strings"
)

// claudeMap maps Claude Code's stream-json events: system init, assistant
// messages (one content block each: thinking, text, tool_use), user
// messages carrying tool results, and the final result.
type claudeMap struct{}

// claudeKinds maps Claude Code's tool names to ACP tool kinds.
var claudeKinds = map[string]string{
	"Read": "read", "NotebookRead": "read",
	"Write": "edit", "Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit",
	"Bash": "execute", "BashOutput": "execute", "KillShell": "execute",
	"Grep": "search", "Glob": "search", "LS": "search", "ToolSearch": "search",
	"WebFetch": "fetch", "WebSearch": "fetch",
	"TodoWrite": "think", "Task": "think", "ExitPlanMode": "switch_mode", "EnterPlanMode": "switch_mode",
}

func toolKind(kinds map[string]string, name string) string {
	if k, ok := kinds[name]; ok {
		return k
	}
	return "other"
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (claudeMap) event(typ string, ev map[string]json.RawMessage, line []byte, out *output) bool {
	t := out.turn
	switch typ {
	case "system":
		var sub string
		field(ev, "subtype", &sub)
		if sub != "init" {
			return false
		}
		field(ev, "session_id", &t.Session)
		field(ev, "claude_code_version", &t.AgentVersion)
		field(ev, "model", &t.Model)
		return false // kept whole as an event: tools, MCP servers, mode
	case "assistant", "user":
		var msg struct {
			ID      string          `json:"id"`
			Content json.RawMessage `json:"content"`
		}
		field(ev, "message", &msg)
		var blocks []claudeBlock
		if json.Unmarshal(msg.Content, &blocks) != nil {
			var s string
			if typ == "user" || json.Unmarshal(msg.Content, &s) != nil {
				return false
			}
			out.message(s, msg.ID)
			return true
		}
		known := false
		for _, b := range blocks {
			switch b.Type {
			case "thinking":
				out.thought(b.Thinking, msg.ID)
			case "text":
				if typ == "user" {
					continue
				}
				out.message(b.Text, msg.ID)
			case "tool_use":
				var locs []string
				var in struct {
					FilePath string `json:"file_path"`
					Path     string `json:"path"`
				}
				_ = json.Unmarshal(b.Input, &in)
				for _, p := range []string{in.FilePath, in.Path} {
					if p != "" {
						locs = append(locs, p)
					}
				}
				out.toolStart(b.ID, b.Name, toolKind(claudeKinds, b.Name), b.Input, locs)
				if b.Name == "TodoWrite" {
					out.plan(claudeTodos(b.Input))
				}
			case "tool_result":
				out.toolDone(b.ToolUseID, b.IsError, toolResultText(b.Content))
			default:
				continue
			}
			known = true
		}
		return known
	case "result":
		var r struct {
			Subtype      string   `json:"subtype"`
			IsError      bool     `json:"is_error"`
			Result       string   `json:"result"`
			SessionID    string   `json:"session_id"`
			TotalCostUSD *float64 `json:"total_cost_usd"`
			Usage        struct {
				Input         *int64 `json:"input_tokens"`
				Output        *int64 `json:"output_tokens"`
				CacheRead     *int64 `json:"cache_read_input_tokens"`
				CacheCreation *int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(line, &r) != nil {
			return false
		}
		if r.SessionID != "" {
			t.Session = r.SessionID
		}
		end := &End{StopReason: "end_turn", Usage: usage(map[string]*int64{
			"inputTokens": r.Usage.Input, "outputTokens": r.Usage.Output,
			"cachedReadTokens": r.Usage.CacheRead, "cachedWriteTokens": r.Usage.CacheCreation,
		})}
		switch {
		case r.Subtype == "error_max_turns":
			end.StopReason = "max_turn_requests"
		case r.IsError || strings.HasPrefix(r.Subtype, "error"):
			end.Error = "claude reported " + r.Subtype
			if r.Result != "" {
				end.Error += ": " + r.Result
			}
		}
		t.end = end
		if r.TotalCostUSD != nil {
			out.add(map[string]any{"sessionUpdate": "usage_update", "cost": map[string]any{"amount": *r.TotalCostUSD, "currency": "USD"}})
		}
		return true
	}
	return false
}

// claudeTodos turns TodoWrite's input into ACP plan entries.
func claudeTodos(input json.RawMessage) []map[string]string {
	var in struct {
		Todos []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"todos"`
	}
	_ = json.Unmarshal(input, &in)
	entries := []map[string]string{}
	for _, t := range in.Todos {
		entries = append(entries, map[string]string{"content": t.Content, "status": t.Status, "priority": "medium"})
	}
	return entries
}

// toolResultText is a tool result's content as the model saw it: a string
// as is, text blocks joined, anything else raw.
func toolResultText(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Type != "text" {
				return raw
			}
			parts = append(parts, b.Text)
		}
		return strings.Join(parts, "\n")
	}
	return raw
}
