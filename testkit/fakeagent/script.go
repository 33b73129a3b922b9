package fakeagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// step is one step of a JSON script; exactly one action field is set.
type step struct {
	Update           json.RawMessage `json:"update"`
	SessionID        *string         `json:"sessionId"`
	Message          *string         `json:"message"`
	Thought          *string         `json:"thought"`
	MessageID        string          `json:"messageId"`
	Raw              *string         `json:"raw"`
	Stderr           *string         `json:"stderr"`
	Touch            *string         `json:"touch"`
	Sleep            *int            `json:"sleep"`
	IgnoreCancel     bool            `json:"ignoreCancel"`
	WaitCancel       bool            `json:"waitCancel"`
	Request          *scriptRequest  `json:"request"`
	ExpectAnswer     *bool           `json:"expectAnswer"`
	ReportLastAnswer bool            `json:"reportLastAnswer"`
	Stop             *string         `json:"stop"`
	Usage            json.RawMessage `json:"usage"`
	Result           json.RawMessage `json:"result"`
	Error            *rpcError       `json:"error"`
	Exit             *int            `json:"exit"`
	Hang             bool            `json:"hang"`
	After            []step          `json:"after"`
}

type scriptRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// sessionScoped lists the agent-to-client methods whose params get the
// session id when a script leaves it out.
var sessionScoped = map[string]bool{
	"session/request_permission": true,
	"fs/read_text_file":          true,
	"fs/write_text_file":         true,
	"terminal/create":            true,
	"terminal/output":            true,
	"terminal/wait_for_exit":     true,
	"terminal/kill":              true,
	"terminal/release":           true,
}

// isScript reports whether the prompt text is a JSON object with "script".
func isScript(text string) bool {
	s := strings.TrimSpace(text)
	if !strings.HasPrefix(s, "{") {
		return false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &probe) != nil {
		return strings.Contains(s, `"script"`) // broken script: reported by playScript
	}
	_, ok := probe["script"]
	return ok
}

func (st *step) validate() error {
	n := 0
	for _, set := range []bool{st.Update != nil, st.Message != nil, st.Thought != nil, st.Raw != nil, st.Stderr != nil, st.Touch != nil,
		st.Sleep != nil, st.IgnoreCancel, st.WaitCancel, st.Request != nil, st.ReportLastAnswer, st.Stop != nil,
		st.Result != nil, st.Error != nil, st.Exit != nil, st.Hang, st.After != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("want exactly one action, found %d", n)
	}
	if st.Request != nil && st.Request.Method == "" {
		return fmt.Errorf("request without method")
	}
	for i := range st.After {
		if err := st.After[i].validate(); err != nil {
			return fmt.Errorf("after[%d]: %v", i, err)
		}
	}
	return nil
}

// scriptState is what a playing script remembers.
type scriptState struct {
	lastAnswer string
	after      []step
}

func (t *turn) playScript(text string) {
	var sc struct {
		Script []step `json:"script"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		t.answerErr(-32602, "Invalid params: fakeagent script: "+err.Error(), nil)
		return
	}
	for i := range sc.Script {
		if err := sc.Script[i].validate(); err != nil {
			t.answerErr(-32602, fmt.Sprintf("Invalid params: fakeagent script step %d: %v", i, err), nil)
			return
		}
	}
	state := &scriptState{}
	if !t.playSteps(sc.Script, state) {
		return
	}
	if len(state.after) > 0 && state.after[0].Exit != nil {
		t.a.quitting.Store(true)
	}
	if !t.answered {
		if t.cancelled() {
			t.answer("cancelled")
		} else {
			t.answer("end_turn")
		}
	}
	after := state.after
	state.after = nil
	t.playSteps(after, state)
}

// playSteps plays steps and reports whether the script should go on (false
// after exit, hang, or a cancellation that answered the prompt).
func (t *turn) playSteps(steps []step, st *scriptState) bool {
	for _, s := range steps {
		if !t.answered && t.cancelled() {
			t.answer("cancelled")
			return false
		}
		switch {
		case s.Update != nil:
			sid := t.s.id
			if s.SessionID != nil {
				sid = *s.SessionID
			}
			t.a.notify("session/update", obj{"sessionId": sid, "update": s.Update})
		case s.Message != nil:
			t.update(chunk("agent_message_chunk", *s.Message, s.MessageID))
		case s.Thought != nil:
			t.update(chunk("agent_thought_chunk", *s.Thought, s.MessageID))
		case s.Raw != nil:
			t.a.writeLine([]byte(*s.Raw))
		case s.Stderr != nil:
			t.a.errorf("%s", *s.Stderr)
		case s.Touch != nil:
			path := *s.Touch
			if !filepath.IsAbs(path) {
				path = filepath.Join(t.s.cwd, path)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.a.errorf("touch: %v", err)
			}
		case s.Sleep != nil:
			if t.sleep(*s.Sleep) {
				select {
				case <-t.a.done:
					return false
				default:
				}
				if !t.answered {
					t.answer("cancelled")
					return false
				}
			}
		case s.IgnoreCancel:
			t.ignoreCancel = true
		case s.WaitCancel:
			select {
			case <-t.cancelCh:
			case <-t.a.done:
				return false
			}
		case s.Request != nil:
			params := t.scriptParams(s.Request)
			if s.ExpectAnswer != nil && !*s.ExpectAnswer {
				t.a.startCall(s.Request.Method, params)
				continue
			}
			r := t.a.call(s.Request.Method, params)
			if r.Error != nil {
				b, _ := json.Marshal(obj{"error": r.Error})
				st.lastAnswer = string(b)
			} else {
				res := r.Result
				if res == nil {
					res = json.RawMessage("null")
				}
				b, _ := json.Marshal(obj{"result": res})
				st.lastAnswer = string(b)
			}
		case s.ReportLastAnswer:
			t.msg(st.lastAnswer, "")
		case s.Stop != nil:
			res := obj{"stopReason": *s.Stop}
			if s.Usage != nil {
				res["usage"] = s.Usage
			}
			t.answerResult(res)
		case s.Result != nil:
			t.answerResult(s.Result)
		case s.Error != nil:
			var data any
			if s.Error.Data != nil {
				data = s.Error.Data
			}
			t.answerErr(s.Error.Code, s.Error.Message, data)
		case s.Exit != nil:
			t.exit(*s.Exit)
			return false
		case s.Hang:
			t.hang()
			return false
		case s.After != nil:
			st.after = append(st.after, s.After...)
		}
	}
	return true
}

// scriptParams returns the request params, adding the session id for
// session-scoped methods when the script left it out.
func (t *turn) scriptParams(r *scriptRequest) any {
	p := bytes.TrimSpace(r.Params)
	if len(p) == 0 {
		if sessionScoped[r.Method] {
			return obj{"sessionId": t.s.id}
		}
		return obj{}
	}
	if !sessionScoped[r.Method] || p[0] != '{' {
		return json.RawMessage(p)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return json.RawMessage(p)
	}
	if _, ok := m["sessionId"]; !ok {
		sid, _ := json.Marshal(t.s.id)
		m["sessionId"] = sid
	}
	return m
}
