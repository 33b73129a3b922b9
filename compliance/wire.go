package compliance

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// maxWireEvents bounds the protocol events a probe keeps.
const maxWireEvents = 100000

// wireEvent is one protocol line as the probe saw it.
type wireEvent struct {
	out    bool
	id     string // the raw id, for requests and responses
	method string // for requests and notifications
	kind   string // sessionUpdate of a session/update
}

// wireLog keeps the order of the lines in both directions, so the probe
// can tell which updates came before session/new was answered or after a
// prompt was, and copies them to out.
type wireLog struct {
	mu     sync.Mutex
	out    io.Writer
	events []wireEvent
	start  time.Time
	// sent holds the lines the probe wrote; echoes counts lines the agent
	// wrote back unchanged or requests only a client sends, and firstEcho
	// is the first of them.
	sent      map[string]bool
	echoes    int
	firstEcho string
}

// clientMethods are requests only a client sends to an agent: an agent
// that sends one back is echoing its input.
var clientMethods = map[string]bool{
	"initialize": true, "authenticate": true, "session/new": true, "session/load": true,
	"session/prompt": true, "session/cancel": true, "session/set_mode": true,
}

// tap is the acp.Options.Tap of the probe's client.
func (w *wireLog) tap(out bool, at time.Time, line []byte) {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Update struct {
				Kind string `json:"sessionUpdate"`
			} `json:"update"`
		} `json:"params"`
	}
	json.Unmarshal(line, &env)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.IsZero() {
		w.start = at
	}
	if out {
		if w.sent == nil {
			w.sent = map[string]bool{}
		}
		if len(w.sent) < maxWireEvents {
			w.sent[string(line)] = true
		}
	} else if w.sent[string(line)] || clientMethods[env.Method] {
		w.echoes++
		if w.firstEcho == "" {
			w.firstEcho = string(line)
		}
	}
	if w.out != nil {
		dir := "<-"
		if out {
			dir = "->"
		}
		fmt.Fprintf(w.out, "%6d ms %s %s\n", at.Sub(w.start).Milliseconds(), dir, line)
	}
	if len(w.events) >= maxWireEvents {
		return
	}
	e := wireEvent{out: out, id: string(env.ID), method: env.Method, kind: env.Params.Update.Kind}
	w.events = append(w.events, e)
}

// mark returns the position of the next event.
func (w *wireLog) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

// answerOf returns the position of the answer to the first request of
// method sent at or after from, or -1 when there is none yet.
func (w *wireLog) answerOf(method string, from int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := ""
	for i := from; i < len(w.events); i++ {
		e := w.events[i]
		if id == "" {
			if e.out && e.method == method && e.id != "" {
				id = e.id
			}
			continue
		}
		if !e.out && e.method == "" && e.id == id {
			return i
		}
	}
	return -1
}

// updatesBetween returns the kinds of the session/update notifications at
// positions from (inclusive) to to (exclusive; -1 = the end).
func (w *wireLog) updatesBetween(from, to int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if to < 0 || to > len(w.events) {
		to = len(w.events)
	}
	var kinds []string
	for i := max(from, 0); i < to; i++ {
		e := w.events[i]
		if !e.out && e.method == "session/update" {
			k := e.kind
			if k == "" {
				k = "(no sessionUpdate)"
			}
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// echoed returns how many lines the agent wrote back as a client would
// write them, and the first.
func (w *wireLog) echoed() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.echoes, w.firstEcho
}
