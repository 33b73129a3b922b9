package acp

import (
	"encoding/json"
	"fmt"

	fastjson "github.com/segmentio/encoding/json"
)

// Known session/update variants (the discriminator "sessionUpdate").
const (
	UpdateUserMessageChunk       = "user_message_chunk"
	UpdateAgentMessageChunk      = "agent_message_chunk"
	UpdateAgentThoughtChunk      = "agent_thought_chunk"
	UpdateToolCall               = "tool_call"
	UpdateToolCallUpdate         = "tool_call_update"
	UpdatePlan                   = "plan"
	UpdateAvailableCommands      = "available_commands_update"
	UpdateCurrentMode            = "current_mode_update"
	UpdateConfigOption           = "config_option_update"
	UpdateSessionInfo            = "session_info_update"
	UpdateUsage                  = "usage_update"
	UpdateNotice                 = "notice"
	UpdateCompaction             = "compaction_update"
	UpdateCompactionSummaryChunk = "compaction_summary_chunk"
)

// KnownUpdates lists the 14 session/update variants of ACP v1.
var KnownUpdates = []string{
	UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk,
	UpdateToolCall, UpdateToolCallUpdate, UpdatePlan, UpdateAvailableCommands,
	UpdateCurrentMode, UpdateConfigOption, UpdateSessionInfo, UpdateUsage,
	UpdateNotice, UpdateCompaction, UpdateCompactionSummaryChunk,
}

// SessionNotification is the params of session/update. Update stays raw
// until DecodeUpdate.
type SessionNotification struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// Update is one decoded session/update. Kind is the discriminator as sent;
// Raw is the update object as it came off the wire. For a known kind the
// matching typed field is set; for any other kind only Raw is.
type Update struct {
	Kind  string
	Raw   json.RawMessage
	Known bool

	Chunk    *ContentChunk  // the three *_chunk kinds and compaction_summary_chunk
	ToolCall *ToolCallPatch // tool_call and tool_call_update
	Plan     *PlanUpdate    // plan
	Usage    *UsageUpdate   // usage_update
	ModeID   string         // current_mode_update
}

// ContentChunk is a streamed piece of a message, thought or summary.
type ContentChunk struct {
	Content   json.RawMessage `json:"content"`
	MessageID *string         `json:"messageId,omitempty"`
	// Type and Text are read from Content: the block type, and its text
	// for a text block.
	Type string `json:"-"`
	Text string `json:"-"`
}

// ToolCallPatch holds the fields of tool_call and tool_call_update. A nil
// field was omitted: for tool_call_update that means "unchanged".
type ToolCallPatch struct {
	ToolCallID string          `json:"toolCallId"`
	Title      *string         `json:"title,omitempty"`
	Kind       *string         `json:"kind,omitempty"`
	Status     *string         `json:"status,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	Locations  json.RawMessage `json:"locations,omitempty"`
	RawInput   json.RawMessage `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage `json:"rawOutput,omitempty"`
	Name       *string         `json:"name,omitempty"`
}

// PlanUpdate is the full list of plan entries.
type PlanUpdate struct {
	Entries json.RawMessage `json:"entries"`
}

// UsageUpdate is the context usage the agent reports.
type UsageUpdate struct {
	Used *int64          `json:"used"`
	Size *int64          `json:"size"`
	Cost json.RawMessage `json:"cost,omitempty"`
}

// Tool call statuses of ACP v1.
const (
	ToolPending    = "pending"
	ToolInProgress = "in_progress"
	ToolCompleted  = "completed"
	ToolFailed     = "failed"
)

// DecodeUpdate decodes a session/update object. An unknown kind is not an
// error: it comes back with Known false and only Raw set. A known kind whose
// fields do not decode is an error, and the caller keeps it raw.
func DecodeUpdate(raw json.RawMessage) (Update, error) {
	u := Update{Raw: raw}
	var head struct {
		Kind *string `json:"sessionUpdate"`
	}
	if err := fastjson.Unmarshal(raw, &head); err != nil {
		return u, fmt.Errorf("update is not an object: %w", err)
	}
	if head.Kind == nil {
		return u, fmt.Errorf("update has no sessionUpdate field")
	}
	u.Kind = *head.Kind
	var err error
	switch u.Kind {
	case UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk, UpdateCompactionSummaryChunk:
		var c ContentChunk
		if err = fastjson.Unmarshal(raw, &c); err == nil {
			err = c.readBlock()
		}
		u.Chunk = &c
	case UpdateToolCall, UpdateToolCallUpdate:
		var t ToolCallPatch
		if err = fastjson.Unmarshal(raw, &t); err == nil && t.ToolCallID == "" {
			err = fmt.Errorf("%s has no toolCallId", u.Kind)
		}
		u.ToolCall = &t
	case UpdatePlan:
		var p PlanUpdate
		if err = fastjson.Unmarshal(raw, &p); err == nil && (len(p.Entries) == 0 || p.Entries[0] != '[') {
			err = fmt.Errorf("plan has no entries array")
		}
		u.Plan = &p
	case UpdateUsage:
		var us UsageUpdate
		err = fastjson.Unmarshal(raw, &us)
		u.Usage = &us
	case UpdateCurrentMode:
		var m struct {
			ModeID string `json:"currentModeId"`
		}
		err = fastjson.Unmarshal(raw, &m)
		u.ModeID = m.ModeID
	case UpdateAvailableCommands, UpdateConfigOption, UpdateSessionInfo, UpdateNotice, UpdateCompaction:
		// Kept raw: the recorder stores them whole.
	default:
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("%s: %w", u.Kind, err)
	}
	u.Known = true
	return u, nil
}

func (c *ContentChunk) readBlock() error {
	if len(c.Content) == 0 {
		return fmt.Errorf("chunk has no content")
	}
	var b struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := fastjson.Unmarshal(c.Content, &b); err != nil {
		return fmt.Errorf("content is not a content block: %w", err)
	}
	c.Type = b.Type
	if b.Type == "text" {
		if b.Text == nil {
			return fmt.Errorf("text block has no text")
		}
		c.Text = *b.Text
	}
	return nil
}
