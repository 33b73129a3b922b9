package evaluation

import (
	"encoding/json"
	"io"
	"sync"

	"harness/acp"
	"harness/schemas"
)

// JSONEvent is one line of the JSON event stream: the event's name and its
// fields (those that apply).
type JSONEvent struct {
	Event string `json:"event"`
	// Planned, Started, Finished: units to run, done before, and (at
	// the end) finished and written.
	Total    *int `json:"total,omitempty"`
	Done     *int `json:"done,omitempty"`
	Finished *int `json:"finished,omitempty"`
	Written  *int `json:"written,omitempty"`
	// Started: the agent (nil headless) and the adapter.
	Agent           *acp.Implementation `json:"agent,omitempty"`
	ProtocolVersion int                 `json:"protocolVersion,omitempty"`
	Adapter         string              `json:"adapter,omitempty"`
	// UnitsAdded.
	Added int `json:"added,omitempty"`
	// TurnAnswered, RecordWritten, CaseFinished, StopRequested: the unit
	// or case.
	ID    string `json:"id,omitempty"`
	Trial int    `json:"trial,omitempty"`
	// RecordWritten: how the unit ended; its verdict when graded.
	StopReason string             `json:"stopReason,omitempty"`
	Pass       *bool              `json:"pass,omitempty"`
	Error      *schemas.ErrorInfo `json:"error,omitempty"`
	Usage      *schemas.Usage     `json:"usage,omitempty"`
	Cost       *schemas.Cost      `json:"cost,omitempty"`
	// CaseFinished: graded trials and passes.
	N *int `json:"n,omitempty"`
	C *int `json:"c,omitempty"`
	// Stray: what the agent sent and the session it named.
	What      string `json:"what,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	// Late: a stray update for the session of a case that is over.
	Late bool `json:"late,omitempty"`
	// StopRequested: budget or stop-on.
	Kind string `json:"kind,omitempty"`
	// SummaryWritten: where ("" for the output) and the pass rate.
	Path     string   `json:"path,omitempty"`
	PassRate *float64 `json:"passRate,omitempty"`
	// Finished: whether the run was interrupted, and why it stopped.
	Interrupted bool   `json:"interrupted,omitempty"`
	Stop        string `json:"stop,omitempty"`
}

// JSONEvents writes each event to w as one line of JSON (a JSONEvent),
// rewritten by redact (nil: as is), for front ends that follow a run from
// another process.
func JSONEvents(w io.Writer, redact func([]byte) []byte) Events {
	j := &jsonEvents{w: w, redact: redact}
	return j
}

type jsonEvents struct {
	mu     sync.Mutex
	w      io.Writer
	redact func([]byte) []byte
	err    error
}

func (j *jsonEvents) Event(e Event) {
	line, err := json.Marshal(jsonEventOf(e))
	if err != nil {
		return
	}
	if j.redact != nil {
		line = j.redact(line)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		_, j.err = j.w.Write(append(line, '\n'))
	}
}

func ptr[T any](v T) *T { return &v }

// jsonEventOf is the line of an event.
func jsonEventOf(e Event) JSONEvent {
	switch e := e.(type) {
	case Planned:
		return JSONEvent{Event: "planned", Total: ptr(e.Total), Done: ptr(e.Done)}
	case Started:
		j := JSONEvent{Event: "started", Total: ptr(e.Total), Adapter: e.Adapter}
		if e.Agent != nil {
			j.Agent, j.ProtocolVersion = e.Agent.AgentInfo, e.Agent.ProtocolVersion
		}
		return j
	case UnitsAdded:
		return JSONEvent{Event: "units_added", Added: e.N}
	case TurnAnswered:
		return JSONEvent{Event: "turn_answered", ID: e.Record.ID, Trial: e.Record.Trial, Usage: e.Record.Usage, Error: e.Record.Error}
	case RecordWritten:
		r := e.Record
		j := JSONEvent{Event: "record_written", ID: r.ID, Trial: r.Trial, StopReason: r.StopReason, Error: r.Error, Cost: r.Cost}
		if r.Score != nil && r.Score.Error == nil {
			j.Pass = ptr(r.Score.Pass)
		} else if r.Score != nil && j.Error == nil {
			j.Error = r.Score.Error
		}
		return j
	case CaseFinished:
		return JSONEvent{Event: "case_finished", ID: e.Record.ID, N: ptr(e.Record.N), C: ptr(e.Record.C), PassRate: e.Record.PassRate}
	case Stray:
		return JSONEvent{Event: "stray", What: e.Stray.What, SessionID: e.Stray.SessionID, Late: e.Stray.Late}
	case StopRequested:
		return JSONEvent{Event: "stop_requested", Kind: e.Stop.Kind, ID: e.Stop.ID, Trial: e.Stop.Trial, Error: e.Stop.Error}
	case SummaryWritten:
		return JSONEvent{Event: "summary_written", Path: e.Path, PassRate: e.Summary.PassRate}
	case Finished:
		r := e.Result
		j := JSONEvent{Event: "finished", Total: ptr(r.Units), Done: ptr(r.Done), Finished: ptr(r.Finished), Written: ptr(r.Written),
			Interrupted: r.Interrupted, Cost: r.Spent}
		if r.Stop != nil {
			j.Stop = r.Stop.Kind
		}
		return j
	}
	return JSONEvent{Event: "unknown"}
}
