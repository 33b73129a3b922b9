package export

import (
	"encoding/json"

	"harness/schemas"
)

// Conversation is one record in the chat-completions message format that
// fine-tuning and RFT pipelines take: {"messages": [...]}, with the record's
// identity and verdict in Metadata when asked for.
type Conversation struct {
	Messages []Message     `json:"messages"`
	Metadata *ConvMetadata `json:"metadata,omitempty"`
}

// ConvMetadata ties a conversation to the record it came from.
type ConvMetadata struct {
	ID    string   `json:"id"`
	Trial int      `json:"trial"`
	Pass  *bool    `json:"pass,omitempty"`
	Score *float64 `json:"score,omitempty"`
}

// Message is one chat message: user, assistant (text and/or tool calls) or
// tool (the result of one call).
type Message struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []ChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// ChatToolCall is a function call of an assistant message; Arguments is a
// JSON text, as the format has it.
type ChatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ChatFunction `json:"function"`
}

// ChatFunction names the function called and its arguments.
type ChatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToMessages converts one capture record into the chat view: each user
// turn, then per agent step an assistant message with its text and tool
// calls followed by one tool message per call (its result, or "" when the
// call never reported one, so every call is answered). Thoughts and the
// events chat formats have no place for are left out; ATIF keeps them.
func ToMessages(rec *schemas.CaptureRecord, withMetadata bool) Conversation {
	t := ToATIF(rec)
	c := Conversation{Messages: []Message{}}
	str := func(s string) *string { return &s }
	for _, s := range t.Steps {
		switch s.Source {
		case SourceUser:
			c.Messages = append(c.Messages, Message{Role: "user", Content: str(s.Message)})
		case SourceAgent:
			if s.Message == "" && len(s.ToolCalls) == 0 {
				continue
			}
			m := Message{Role: "assistant"}
			if s.Message != "" || len(s.ToolCalls) == 0 {
				m.Content = str(s.Message)
			}
			results := map[string]string{}
			if s.Observation != nil {
				for _, r := range s.Observation.Results {
					if r.Content != nil {
						results[r.SourceCallID] = *r.Content
					}
				}
			}
			var answers []Message
			for _, tc := range s.ToolCalls {
				args, _ := json.Marshal(tc.Arguments)
				m.ToolCalls = append(m.ToolCalls, ChatToolCall{ID: tc.ToolCallID, Type: "function",
					Function: ChatFunction{Name: tc.FunctionName, Arguments: string(args)}})
				answers = append(answers, Message{Role: "tool", ToolCallID: tc.ToolCallID, Content: str(results[tc.ToolCallID])})
			}
			c.Messages = append(c.Messages, m)
			c.Messages = append(c.Messages, answers...)
		}
	}
	if withMetadata {
		md := &ConvMetadata{ID: rec.ID, Trial: max(rec.Trial, 1)}
		if rec.Score != nil && rec.Score.Error == nil {
			pass, score := rec.Score.Pass, rec.Score.Score
			md.Pass, md.Score = &pass, &score
		}
		c.Metadata = md
	}
	return c
}
