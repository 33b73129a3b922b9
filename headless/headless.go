// Package headless maps the JSON event streams of coding agents run
// headless, without ACP (claude -p --output-format stream-json, codex exec
// --json, gemini --output-format stream-json), onto ACP session updates,
// so that one recorder turns them into the same trajectory an ACP agent
// gives and the same prompts and graders compare an agent both ways.
package headless

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Adapter names, as --adapter takes them.
const (
	ClaudeStreamJSON = "claude-stream-json"
	CodexJSON        = "codex-json"
	GeminiStreamJSON = "gemini-stream-json"
)

// Adapter runs one kind of headless CLI: it builds the command line of a
// turn and maps the CLI's output lines.
type Adapter struct {
	// Name is the --adapter name.
	Name string
	// Agent names the agent system, for provenance when the stream does
	// not.
	Agent string
	// command builds a turn's argv from the user's command, the prompt
	// and the session to continue ("" for the first turn).
	command func(base []string, prompt, session string) []string
	newMap  func() mapper
}

// Names lists the adapters, sorted.
func Names() []string {
	return []string{ClaudeStreamJSON, CodexJSON, GeminiStreamJSON}
}

// Lookup returns the adapter of a name.
func Lookup(name string) (*Adapter, error) {
	switch name {
	case ClaudeStreamJSON:
		return &Adapter{Name: name, Agent: "claude-code", command: claudeCommand, newMap: func() mapper { return &claudeMap{} }}, nil
	case CodexJSON:
		return &Adapter{Name: name, Agent: "codex", command: codexCommand, newMap: func() mapper { return &codexMap{} }}, nil
	case GeminiStreamJSON:
		return &Adapter{Name: name, Agent: "gemini-cli", command: geminiCommand, newMap: func() mapper { return &geminiMap{} }}, nil
	}
	return nil, fmt.Errorf("no adapter %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Command is the argv of one turn: the user's command with the flags the
// adapter's format needs (those already given are not repeated), the
// session to continue after the first turn, and the prompt.
func (a *Adapter) Command(base []string, prompt, session string) []string {
	return a.command(slices.Clone(base), prompt, session)
}

// NewTurn starts mapping the output of one turn.
func (a *Adapter) NewTurn() *Turn {
	return &Turn{m: a.newMap()}
}

// addMissing appends each flag (with its value, when it has one) the
// command does not have yet.
func addMissing(argv []string, flags ...[]string) []string {
	for _, f := range flags {
		if !slices.Contains(argv, f[0]) {
			argv = append(argv, f...)
		}
	}
	return argv
}

func claudeCommand(base []string, prompt, session string) []string {
	argv := addMissing(base, []string{"--output-format", "stream-json"}, []string{"--verbose"})
	if session != "" {
		argv = append(argv, "--resume", session)
	}
	// -p (print) then the prompt as the one argument after --, so a prompt
	// that starts with a dash is not read as a flag.
	return append(argv, "-p", "--", prompt)
}

func codexCommand(base []string, prompt, session string) []string {
	argv := base
	if !slices.Contains(argv, "exec") && !slices.Contains(argv, "e") {
		argv = append(argv, "exec")
	}
	argv = addMissing(argv, []string{"--json"}, []string{"--skip-git-repo-check"})
	if session != "" {
		argv = append(argv, "resume", session)
	}
	return append(argv, "--", prompt)
}

func geminiCommand(base []string, prompt, session string) []string {
	argv := addMissing(base, []string{"--output-format", "stream-json"})
	if session != "" {
		argv = append(argv, "--resume", session)
	}
	// One argument, so a prompt that starts with a dash is still the value.
	return append(argv, "--prompt="+prompt)
}

// End is how a turn ended, as the stream's last event said.
type End struct {
	// StopReason is the ACP stop reason the turn maps to.
	StopReason string
	// Usage is the turn's token counts in the shape of an ACP prompt
	// response's usage (inputTokens, outputTokens...).
	Usage json.RawMessage
	// Error is set when the CLI reported the turn failed.
	Error string
}

// Turn maps the output lines of one turn.
type Turn struct {
	m   mapper
	end *End
	// Session is the id the CLI gave the session, to continue it.
	Session string
	// AgentVersion and Model are what the stream said of the agent.
	AgentVersion, Model string
}

// Line maps one output line to the ACP session updates it stands for. A
// line that is not a JSON object is an error (the caller records it as
// non-protocol output); an event the adapter does not know comes back as
// an update of kind "headless_event" holding it, so nothing is lost.
func (t *Turn) Line(line []byte) ([]json.RawMessage, error) {
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(line, &ev); err != nil {
		return nil, fmt.Errorf("not a JSON event: %w", err)
	}
	var typ string
	_ = json.Unmarshal(ev["type"], &typ)
	out := &output{turn: t}
	if !t.m.event(typ, ev, line, out) {
		out.add(map[string]any{"sessionUpdate": "headless_event", "event": json.RawMessage(line)})
	}
	return out.updates, nil
}

// End returns how the turn ended, or nil when the stream never said.
func (t *Turn) End() *End { return t.end }

// mapper knows one CLI's events.
type mapper interface {
	// event maps one event, adding updates to out; false means the
	// event is not one it knows.
	event(typ string, ev map[string]json.RawMessage, line []byte, out *output) bool
}

// output collects the updates of one line.
type output struct {
	turn    *Turn
	updates []json.RawMessage
}

func (o *output) add(u map[string]any) {
	b, err := json.Marshal(u)
	if err == nil {
		o.updates = append(o.updates, b)
	}
}

func text(kind, s, messageID string) map[string]any {
	u := map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": s}}
	if messageID != "" {
		u["messageId"] = messageID
	}
	return u
}

func (o *output) message(s, id string) { o.add(text("agent_message_chunk", s, id)) }
func (o *output) thought(s, id string) { o.add(text("agent_thought_chunk", s, id)) }

// toolStart announces a tool call.
func (o *output) toolStart(id, name, kind string, input json.RawMessage, locations []string) {
	u := map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "title": name, "name": name,
		"kind": kind, "status": "in_progress"}
	if len(input) > 0 {
		u["rawInput"] = input
	}
	if len(locations) > 0 {
		var locs []map[string]string
		for _, p := range locations {
			locs = append(locs, map[string]string{"path": p})
		}
		u["locations"] = locs
	}
	o.add(u)
}

// toolDone reports a tool call's result.
func (o *output) toolDone(id string, failed bool, output any) {
	status := "completed"
	if failed {
		status = "failed"
	}
	u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status}
	if output != nil {
		u["rawOutput"] = output
	}
	o.add(u)
}

// plan reports the full list of plan entries.
func (o *output) plan(entries []map[string]string) {
	o.add(map[string]any{"sessionUpdate": "plan", "entries": entries})
}

// usage builds an ACP usage object from named counts, leaving out the
// absent ones.
func usage(counts map[string]*int64) json.RawMessage {
	m := map[string]int64{}
	var total int64
	for k, v := range counts {
		if v == nil {
			continue
		}
		m[k] = *v
		if k != "thoughtTokens" && k != "totalTokens" {
			total += *v
		}
	}
	if len(m) == 0 {
		return nil
	}
	if _, ok := m["totalTokens"]; !ok {
		m["totalTokens"] = total
	}
	b, _ := json.Marshal(m)
	return b
}

// field decodes one field of an event into v, leaving v alone when the
// field is absent or of another type.
func field(ev map[string]json.RawMessage, key string, v any) {
	if raw, ok := ev[key]; ok {
		_ = json.Unmarshal(raw, v)
	}
}
