package schemas

import "encoding/json"

// Step types: one per kind of thing an agent does or reports.
const (
	StepThought     = "thought"        // merged agent_thought_chunk text
	StepMessage     = "message"        // merged agent_message_chunk text
	StepUserMessage = "user_message"   // merged user_message_chunk text (echo or replay)
	StepToolCall    = "tool_call"      // a tool call, upserted by toolCallId
	StepPlan        = "plan"           // a full plan (each update replaces the last)
	StepPermission  = "permission"     // a session/request_permission round trip
	StepFSRead      = "fs_read"        // an fs/read_text_file request and its answer
	StepFSWrite     = "fs_write"       // an fs/write_text_file request and its answer
	StepTerminal    = "terminal"       // a terminal/* request and its answer
	StepUsage       = "usage"          // usage_update
	StepMode        = "mode"           // current_mode_update
	StepNotice      = "notice"         // notice
	StepSessionInfo = "session_info"   // session_info_update
	StepConfig      = "config"         // config_option_update
	StepCommands    = "commands"       // available_commands_update
	StepCompaction  = "compaction"     // compaction_update and compaction_summary_chunk
	StepEvent       = "event"          // anything else, kept raw
	StepNetwork     = "network"        // a connection out of the sandbox, allowed or denied
	StepSimUser     = "simulated_user" // a turn a case's simulated user wrote (content), or its stop (outcome "stop", reason)
)

// Phases mark steps that arrived outside a prompt turn.
const (
	// PhaseSetup marks updates that arrived before session/new answered.
	PhaseSetup = "setup"
	// PhaseLate marks updates that arrived after the prompt answered.
	PhaseLate = "late"
	// PhaseCancel marks updates that arrived after session/cancel was sent.
	PhaseCancel = "after_cancel"
	// PhaseVerifier marks the network steps of a task's verifier
	// (tests/test.sh), which are not the agent's.
	PhaseVerifier = "verifier"
	// PhaseTaskSetup marks the network steps of a multi-step task's step
	// setup (its setup.sh and healthcheck), which are not the agent's.
	PhaseTaskSetup = "task_setup"
)

// Step is one entry of a trajectory. Type says which of the optional fields
// are set. Raw JSON fields keep the agent's bytes as they came off the wire.
type Step struct {
	Type      string `json:"type"`
	StepID    string `json:"stepId"`
	Timestamp int64  `json:"timestamp"`
	Turn      int    `json:"turn,omitempty"`
	Phase     string `json:"phase,omitempty"`

	// thought, message, user_message: Content is the merged text (a JSON
	// string); non-text content blocks are kept in Blocks. For tool_call,
	// Content is the ToolCallContent array.
	Content   json.RawMessage   `json:"content,omitempty"`
	Blocks    []json.RawMessage `json:"blocks,omitempty"`
	MessageID string            `json:"messageId,omitempty"`
	Chunks    int               `json:"chunks,omitempty"`

	// tool_call
	ToolCallID string          `json:"toolCallId,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	Status     string          `json:"status,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Locations  json.RawMessage `json:"locations,omitempty"`
	Duration   *int64          `json:"duration,omitempty"`
	Updates    int             `json:"updates,omitempty"`

	// plan
	Entries json.RawMessage `json:"entries,omitempty"`

	// permission
	ToolCall json.RawMessage `json:"toolCall,omitempty"`
	Options  json.RawMessage `json:"options,omitempty"`
	OptionID string          `json:"optionId,omitempty"`
	Outcome  string          `json:"outcome,omitempty"`
	Reason   string          `json:"reason,omitempty"`

	// fs_read, fs_write, terminal
	Method     string          `json:"method,omitempty"`
	Path       string          `json:"path,omitempty"`
	Bytes      *int64          `json:"bytes,omitempty"`
	Allowed    *bool           `json:"allowed,omitempty"`
	Error      string          `json:"error,omitempty"`
	Command    string          `json:"command,omitempty"`
	Args       []string        `json:"args,omitempty"`
	Cwd        string          `json:"cwd,omitempty"`
	TerminalID string          `json:"terminalId,omitempty"`
	ExitStatus json.RawMessage `json:"exitStatus,omitempty"`
	Text       string          `json:"text,omitempty"`
	Truncated  bool            `json:"truncated,omitempty"`

	// network: the destination, and the bytes each way (Allowed, Error
	// and Duration as above; Open when it was still open as the case
	// ended)
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	BytesOut *int64 `json:"bytesOut,omitempty"`
	BytesIn  *int64 `json:"bytesIn,omitempty"`
	Open     bool   `json:"open,omitempty"`

	// usage, mode, notice, session_info, config, commands, compaction, event:
	// the update as it arrived (for event: the whole update object).
	Update string          `json:"update,omitempty"`
	Raw    json.RawMessage `json:"raw,omitempty"`
}

// TextContent returns the text of a thought, message or user_message step.
func (s *Step) TextContent() string {
	if len(s.Content) == 0 || s.Content[0] != '"' {
		return ""
	}
	var t string
	if json.Unmarshal(s.Content, &t) != nil {
		return ""
	}
	return t
}

// AnsweredRecord is the record of a case whose agent gave answer as its
// final message and did nothing else: the answer is the output, the last
// turn's one agent message step (so graders that read the conversation see
// it last) and the turn ended normally. Grading an answer that no agent
// produced (a reference answer, a synthetic output) goes through it, so
// such an answer is graded exactly as if an agent had answered it.
func AnsweredRecord(id string, input Turns, answer string) CaptureRecord {
	content, _ := json.Marshal(answer)
	turn := max(len(input.List), 1)
	return CaptureRecord{
		ID:     id,
		Trial:  1,
		Input:  input,
		Output: answer,
		Trajectory: []Step{{Type: StepMessage, StepID: id + "-t1-s1", Turn: turn,
			Content: content}},
		StopReason: "end_turn",
		Metadata:   map[string]any{},
	}
}
