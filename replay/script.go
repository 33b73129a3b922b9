package replay

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"harness/acp"
	"harness/schemas"
)

// actionKind says what an action sends.
type actionKind int

const (
	actUpdate  actionKind = iota // a session/update with a recorded or rebuilt update object
	actNotify                    // another notification, params as recorded
	actJunk                      // a raw line that is not JSON-RPC
	actRequest                   // a request to the client (permission, fs, terminal, other)
)

// action is one message the replay sends, due at an offset from the start
// of its block (used with --timing only).
type action struct {
	kind   actionKind
	due    time.Duration
	update json.RawMessage // actUpdate
	method string          // actNotify, actRequest
	params json.RawMessage // actNotify; actRequest of an unknown method
	line   []byte          // actJunk
	step   *schemas.Step   // actRequest: the recorded step
	wait   bool            // actRequest: wait for the answer (the record has one)
}

// turnScript is what the replay does in one prompt turn.
type turnScript struct {
	prompt string
	main   []action // before the answer
	cancel []action // after session/cancel (phase after_cancel)
	late   []action // after the answer (phase late)
	// waitCancel: the recorded turn was cancelled by the client (it
	// timed out or was interrupted): main is played, then the replay
	// waits for session/cancel before cancel and the answer.
	waitCancel bool
	answerDue  time.Duration
	// The answer: a stop reason and usage, or a JSON-RPC error.
	stop   string
	usage  json.RawMessage
	rpcErr *rpcError
}

// script is a recorded trial turned into messages to send.
type script struct {
	rec   *schemas.CaptureRecord
	turns []turnScript
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// promptErrMessage takes the agent's own message out of the error text
// capture writes for a prompt answered with an error.
var promptErrMessage = regexp.MustCompile(`^turn \d+: session/prompt: (.*) \(JSON-RPC error -?\d+\)`)

// buildScript turns a record into the messages of each turn. sent is
// what went out before session/new answered (the setup steps of the
// record the session was expected to replay): when they are the record's
// own setup steps, they are not sent again; when the record has none but
// its first turn opens with them, those are left out of the turn;
// otherwise the record's setup steps open its first turn.
func buildScript(rec *schemas.CaptureRecord, sent []schemas.Step) *script {
	sc := &script{rec: rec}
	nTurns := len(rec.Input.List)
	if nTurns == 0 {
		nTurns = 1
	}
	// The steps of each (turn, phase) block, in record order.
	type blockKey struct {
		turn  int
		phase string
	}
	blocks := map[blockKey][]schemas.Step{}
	for _, st := range rec.Trajectory {
		k := blockKey{st.Turn, st.Phase}
		switch st.Phase {
		case schemas.PhaseSetup:
			k.turn = 0
		case schemas.PhaseLate, schemas.PhaseCancel:
		default:
			k.phase = ""
		}
		if k.turn > nTurns {
			k.turn = nTurns
		}
		if k.turn < 1 && k.phase != schemas.PhaseSetup {
			k.turn = 1
		}
		blocks[k] = append(blocks[k], st)
	}
	setupBlock := blocks[blockKey{0, schemas.PhaseSetup}]
	setup := blockActions(setupBlock, 0)

	stops := rec.StopReasons
	if len(stops) == 0 && rec.StopReason != "" {
		stops = []string{rec.StopReason}
	}
	failTurn := 0 // the turn the record's error belongs to
	cancelled := false
	if rec.Error != nil {
		failTurn = len(stops) + 1
		switch rec.Error.Class {
		case schemas.ErrTimeout, schemas.ErrInterrupted:
			cancelled = true
			for _, st := range rec.Trajectory {
				if st.Phase == schemas.PhaseCancel {
					failTurn = max(st.Turn, 1)
					break
				}
			}
			if failTurn > len(stops) && len(stops) > 0 && stops[len(stops)-1] == acp.StopCancelled {
				failTurn = len(stops)
			}
		}
		failTurn = min(failTurn, nTurns)
	}

	var prevTs int64
	for t := 1; t <= nTurns; t++ {
		ts := turnScript{prompt: turnText(rec, t)}
		main := blocks[blockKey{t, ""}]
		base := prevTs
		if t == 1 {
			base = rec.Timing.SessionCreation
			if len(main) > 0 && rec.Timing.FirstResponse != nil {
				base = main[0].Timestamp - *rec.Timing.FirstResponse
			}
		}
		base = min(base, firstTs(main, base))
		setupSent := len(sent) > 0 && len(setupBlock) == len(sent) && stepsKey(setupBlock) == stepsKey(sent)
		if t == 1 && len(sent) > 0 && len(setupBlock) == 0 && len(sent) <= len(main) &&
			stepsKey(main[:len(sent)]) == stepsKey(sent) {
			main = main[len(sent):]
		}
		ts.main = blockActions(main, base)
		if t == 1 && !setupSent && len(setup) > 0 {
			ts.main = append(zeroDue(setup), ts.main...)
		}
		cancelSteps := blocks[blockKey{t, schemas.PhaseCancel}]
		ts.cancel = blockActions(cancelSteps, firstTs(cancelSteps, 0))
		late := blocks[blockKey{t, schemas.PhaseLate}]
		ts.late = blockActions(late, base)
		ts.answerDue = lastDue(ts.main)
		if t == nTurns && rec.Timing.Total > 0 {
			ts.answerDue = max(ts.answerDue, time.Duration(rec.Timing.Total-base)*time.Millisecond)
		}
		if len(ts.late) > 0 {
			ts.answerDue = min(ts.answerDue, ts.late[0].due)
		}
		switch {
		case t == failTurn && cancelled:
			ts.waitCancel = true
			ts.stop = acp.StopCancelled
			if t <= len(stops) {
				ts.stop = stops[t-1]
			}
		case t == failTurn:
			ts.rpcErr = recordedError(rec.Error)
		case t <= len(stops):
			ts.stop = stops[t-1]
		default:
			ts.stop = acp.StopEndTurn
		}
		for _, blk := range [][]schemas.Step{main, cancelSteps, late} {
			if n := len(blk); n > 0 {
				prevTs = max(prevTs, blk[n-1].Timestamp)
			}
		}
		sc.turns = append(sc.turns, ts)
		if failTurn > 0 && t == failTurn {
			break
		}
	}
	// The usage the prompt answers reported, summed by capture: all of it
	// on the last answer.
	if u := promptUsage(rec.Usage); u != nil {
		for i := len(sc.turns) - 1; i >= 0; i-- {
			if sc.turns[i].rpcErr == nil {
				sc.turns[i].usage = u
				break
			}
		}
	}
	return sc
}

// turnText is the prompt of turn t (1-based).
func turnText(rec *schemas.CaptureRecord, t int) string {
	if t-1 < len(rec.Input.List) {
		return rec.Input.List[t-1]
	}
	return ""
}

func firstTs(steps []schemas.Step, def int64) int64 {
	if len(steps) == 0 {
		return def
	}
	return steps[0].Timestamp
}

func lastDue(acts []action) time.Duration {
	if len(acts) == 0 {
		return 0
	}
	return acts[len(acts)-1].due
}

func zeroDue(acts []action) []action {
	out := make([]action, len(acts))
	for i, a := range acts {
		a.due = 0
		out[i] = a
	}
	return out
}

// recordedError is the JSON-RPC error the replay answers a failed turn
// with: the agent's own error when the record has it; for a run that
// failed otherwise (the agent crashed, did not start), an internal error
// naming the recorded failure.
func recordedError(info *schemas.ErrorInfo) *rpcError {
	if info.Code != nil && (info.Class == schemas.ErrAgentError || info.Class == schemas.ErrAuthRequired) {
		msg := info.Message
		if m := promptErrMessage.FindStringSubmatch(msg); m != nil {
			msg = m[1]
		}
		return &rpcError{Code: int(*info.Code), Message: msg, Data: info.Data}
	}
	return &rpcError{Code: acp.CodeInternalError,
		Message: "replay: the recorded trial failed here (" + info.Class + "): " + info.Message}
}

// promptUsage is the token usage of a record's prompt answers, as a
// PromptResponse usage object, or nil.
func promptUsage(u *schemas.Usage) json.RawMessage {
	if u == nil {
		return nil
	}
	m := map[string]*int64{}
	add := func(k string, v *int64) {
		if v != nil {
			m[k] = v
		}
	}
	add("inputTokens", u.InputTokens)
	add("outputTokens", u.OutputTokens)
	add("totalTokens", u.TotalTokens)
	add("thoughtTokens", u.ThoughtTokens)
	add("cachedReadTokens", u.CachedReadTokens)
	add("cachedWriteTokens", u.CachedWriteTokens)
	if len(m) == 0 {
		return nil
	}
	return mustMarshal(m)
}

// blockActions turns the steps of one block into actions due at their
// timestamps less base. A tool call's later updates (the record keeps
// only its final state and how many updates made it) go where its
// duration puts them: after the steps that arrived before it completed,
// before the next call that reuses its id.
func blockActions(steps []schemas.Step, base int64) []action {
	due := func(ts int64) time.Duration { return time.Duration(max(ts-base, 0)) * time.Millisecond }
	inserts := map[int][]action{}
	var out []action
	for i := range steps {
		out = append(out, inserts[i]...)
		st := &steps[i]
		switch st.Type {
		case schemas.StepMessage, schemas.StepThought, schemas.StepUserMessage:
			out = append(out, chunkActions(st, due(st.Timestamp))...)
		case schemas.StepToolCall:
			first, mid, final := toolCallUpdates(st)
			out = append(out, action{kind: actUpdate, due: due(st.Timestamp), update: first})
			for _, u := range mid {
				out = append(out, action{kind: actUpdate, due: due(st.Timestamp), update: u})
			}
			if final != nil {
				end := st.Timestamp
				if st.Duration != nil {
					end += *st.Duration
				}
				j := i + 1
				for ; j < len(steps); j++ {
					n := &steps[j]
					if n.Timestamp > end || n.Type == schemas.StepToolCall && n.ToolCallID == st.ToolCallID {
						break
					}
				}
				inserts[j] = append(inserts[j], action{kind: actUpdate, due: due(end), update: final})
			}
		case schemas.StepPlan:
			out = append(out, action{kind: actUpdate, due: due(st.Timestamp),
				update: mustMarshal(struct {
					Kind    string          `json:"sessionUpdate"`
					Entries json.RawMessage `json:"entries"`
				}{acp.UpdatePlan, st.Entries})})
		case schemas.StepPermission:
			out = append(out, action{kind: actRequest, due: due(st.Timestamp), method: acp.MethodRequestPermission, step: st, wait: st.Outcome != ""})
		case schemas.StepFSRead, schemas.StepFSWrite, schemas.StepTerminal:
			out = append(out, action{kind: actRequest, due: due(st.Timestamp), method: st.Method, step: st, wait: st.Allowed != nil})
		case schemas.StepEvent:
			switch {
			case st.Update == "stdout_junk":
				line := []byte(st.Text)
				if st.Truncated && st.Bytes != nil && int(*st.Bytes) > len(line) {
					line = append(line, bytes.Repeat([]byte{' '}, int(*st.Bytes)-len(line))...)
				}
				out = append(out, action{kind: actJunk, due: due(st.Timestamp), line: line})
			case st.Method != "" && st.Error != "":
				// A request of a method the client does not serve.
				out = append(out, action{kind: actRequest, due: due(st.Timestamp), method: st.Method, params: st.Raw, step: st, wait: true})
			case st.Method != "":
				out = append(out, action{kind: actNotify, due: due(st.Timestamp), method: st.Method, params: st.Raw})
			case len(st.Raw) > 0:
				out = append(out, action{kind: actUpdate, due: due(st.Timestamp), update: st.Raw})
			}
		default:
			if len(st.Raw) > 0 {
				out = append(out, action{kind: actUpdate, due: due(st.Timestamp), update: st.Raw})
			}
		}
	}
	out = append(out, inserts[len(steps)]...)
	return out
}

// chunkKinds maps message step types to their chunk update kinds.
var chunkKinds = map[string]string{
	schemas.StepMessage:     acp.UpdateAgentMessageChunk,
	schemas.StepThought:     acp.UpdateAgentThoughtChunk,
	schemas.StepUserMessage: acp.UpdateUserMessageChunk,
}

// chunkActions sends a message step as its chunks: the text split into as
// many text chunks as the record counted (less its non-text blocks), then
// the blocks.
func chunkActions(st *schemas.Step, due time.Duration) []action {
	text := st.TextContent()
	n := st.Chunks - len(st.Blocks)
	if n < 1 && (text != "" || len(st.Blocks) == 0) {
		n = 1
	}
	type chunk struct {
		Kind      string          `json:"sessionUpdate"`
		Content   json.RawMessage `json:"content"`
		MessageID string          `json:"messageId,omitempty"`
	}
	var out []action
	for _, piece := range splitText(text, n) {
		c := chunk{Kind: chunkKinds[st.Type], Content: mustMarshal(acp.TextBlock(piece)), MessageID: st.MessageID}
		out = append(out, action{kind: actUpdate, due: due, update: mustMarshal(c)})
	}
	for _, b := range st.Blocks {
		c := chunk{Kind: chunkKinds[st.Type], Content: b, MessageID: st.MessageID}
		out = append(out, action{kind: actUpdate, due: due, update: mustMarshal(c)})
	}
	return out
}

// splitText cuts s into n pieces on rune boundaries, as even as the runes
// allow; pieces past the last rune are empty.
func splitText(s string, n int) []string {
	if n <= 0 {
		return nil
	}
	runes := utf8.RuneCountInString(s)
	out := make([]string, 0, n)
	rest := s
	for i := 0; i < n; i++ {
		take := runes / n
		if i < runes%n {
			take++
		}
		cut := 0
		for k := 0; k < take; k++ {
			_, size := utf8.DecodeRuneInString(rest[cut:])
			cut += size
		}
		out = append(out, rest[:cut])
		rest = rest[cut:]
	}
	if rest != "" { // invalid UTF-8 counted short: keep every byte
		out[n-1] += rest
	}
	return out
}

// toolPatch is a tool_call or tool_call_update object.
type toolPatch struct {
	Kind       string          `json:"sessionUpdate"`
	ToolCallID string          `json:"toolCallId"`
	Title      *string         `json:"title,omitempty"`
	ToolKind   *string         `json:"kind,omitempty"`
	Status     *string         `json:"status,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	Locations  json.RawMessage `json:"locations,omitempty"`
	RawInput   json.RawMessage `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage `json:"rawOutput,omitempty"`
	Name       *string         `json:"name,omitempty"`
}

// toolCallUpdates rebuilds the updates that left a tool call step as
// recorded: the tool_call that starts it, updates in between, and the
// final update (nil when the step had no updates) that completes it, so
// that its duration runs from the first to the last.
func toolCallUpdates(st *schemas.Step) (first json.RawMessage, mid []json.RawMessage, final json.RawMessage) {
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	start := toolPatch{Kind: acp.UpdateToolCall, ToolCallID: st.ToolCallID, Title: str(st.Name), ToolKind: str(st.Kind),
		Locations: st.Locations, RawInput: st.Input, Name: str(st.ToolName)}
	end := toolPatch{Kind: acp.UpdateToolCallUpdate, ToolCallID: st.ToolCallID, Content: st.Content}
	if st.Status != acp.ToolPending {
		s := st.Status
		end.Status = &s
	}
	// The output is the last rawOutput sent, else the content.
	if len(st.Output) > 0 && !bytes.Equal(st.Output, st.Content) {
		end.RawOutput = st.Output
	}
	if st.Updates == 0 {
		start.Status, start.Content, start.RawOutput = end.Status, end.Content, end.RawOutput
		return mustMarshal(start), nil, nil
	}
	for i := 1; i < st.Updates; i++ {
		u := toolPatch{Kind: acp.UpdateToolCallUpdate, ToolCallID: st.ToolCallID}
		if i == st.Updates-1 && st.Duration != nil && !done(st.Status) {
			// It completed once, then changed its status again.
			c := acp.ToolCompleted
			u.Status = &c
		}
		mid = append(mid, mustMarshal(u))
	}
	return mustMarshal(start), mid, mustMarshal(end)
}

func done(status string) bool { return status == acp.ToolCompleted || status == acp.ToolFailed }

// mustMarshal encodes v compactly without HTML escaping, so raw values
// from the record go out with the bytes they came in with.
func mustMarshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("replay: marshal: " + err.Error())
	}
	return json.RawMessage(strings.TrimSuffix(b.String(), "\n"))
}
