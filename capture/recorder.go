package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"harness/acp"
	"harness/sandbox/egress"
	"harness/schemas"
)

// maxTerminalText caps the command output a terminal step keeps.
const maxTerminalText = 64 << 10

// Recorder turns the protocol traffic of one session into trajectory steps.
// It implements acp.Observer. Timestamps are taken when a message arrives:
// the read loop hands it over at once.
type Recorder struct {
	mu sync.Mutex

	caseStart time.Time
	// shift moves what arrived before resumed (a prepared case's setup)
	// to just before it, when the case's clock was restarted (Restart).
	shift   time.Duration
	resumed time.Time
	turn    int
	phase   string
	sealed  bool

	steps     []*stepState
	tools     map[string]*stepState
	requests  map[*acp.Request]*stepState
	lastChunk *stepState

	outputs       []strings.Builder // agent message text per turn (index 0: setup)
	firstTurn     time.Time         // when turn 1 began
	firstResponse *time.Time
	plan          json.RawMessage
	usage         schemas.Usage
	hasUsage      bool
	toolErrors    bool
}

type stepState struct {
	step      schemas.Step
	at        time.Time
	text      strings.Builder
	firstSeen time.Time
	// rawOutput records that the tool call has sent rawOutput, which wins
	// over content as the step's output from then on.
	rawOutput bool
}

// NewRecorder starts a recorder for a case that began at start. Until
// BeginTurn is called, steps are marked as setup.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{
		caseStart: start,
		phase:     schemas.PhaseSetup,
		tools:     map[string]*stepState{},
		requests:  map[*acp.Request]*stepState{},
		outputs:   make([]strings.Builder, 1),
	}
}

var _ acp.Observer = (*Recorder)(nil)

// Restart moves the case's clock to start, at now: a case prepared ahead
// that waited, once prepared, for its turn to play starts its clock as if
// its preparation had begun at start (see timing.start). What arrived
// before now moves with it, so that it keeps its place in the case's time;
// what arrived while the case waited is put at now.
func (r *Recorder) Restart(start, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shift += start.Sub(r.caseStart)
	r.caseStart, r.resumed = start, now
}

// sinceStart is the time of an arrival at since the case started, in
// milliseconds; r.mu is held.
func (r *Recorder) sinceStart(at time.Time) int64 {
	if at.Before(r.resumed) {
		at = at.Add(r.shift)
		if at.After(r.resumed) {
			at = r.resumed
		}
	}
	return at.Sub(r.caseStart).Milliseconds()
}

// BeginTurn starts turn n (1-based) at time at.
func (r *Recorder) BeginTurn(n int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turn, r.phase = n, ""
	if n == 1 {
		r.firstTurn = at
	}
	for len(r.outputs) <= n {
		r.outputs = append(r.outputs, strings.Builder{})
	}
	r.lastChunk = nil
}

// Responded reports whether anything arrived in turn 1.
func (r *Recorder) Responded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstResponse != nil
}

// MarkCancelled marks the steps that follow as arriving after session/cancel.
func (r *Recorder) MarkCancelled() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase = schemas.PhaseCancel
}

// Answered marks the turn answered as its answer is read: whatever the
// agent sends after it is late (acp.Answerer).
func (r *Recorder) Answered(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phase == "" {
		r.phase = schemas.PhaseLate
	}
}

// EndTurn marks the steps that follow as late: the prompt has answered.
// A usage report in the answer is added to the record's usage.
func (r *Recorder) EndTurn(resp *acp.PromptResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phase != schemas.PhaseCancel {
		r.phase = schemas.PhaseLate
	}
	if resp != nil && len(resp.Usage) > 0 {
		var u struct {
			InputTokens, OutputTokens, TotalTokens             *int64
			ThoughtTokens, CachedReadTokens, CachedWriteTokens *int64
		}
		if json.Unmarshal(resp.Usage, &u) == nil {
			add := func(dst **int64, v *int64) {
				if v == nil {
					return
				}
				if *dst == nil {
					*dst = new(int64)
				}
				**dst += *v
				r.hasUsage = true
			}
			add(&r.usage.InputTokens, u.InputTokens)
			add(&r.usage.OutputTokens, u.OutputTokens)
			add(&r.usage.TotalTokens, u.TotalTokens)
			add(&r.usage.ThoughtTokens, u.ThoughtTokens)
			add(&r.usage.CachedReadTokens, u.CachedReadTokens)
			add(&r.usage.CachedWriteTokens, u.CachedWriteTokens)
		}
	}
}

// newStep appends a step stamped with the arrival time at; r.mu is held.
func (r *Recorder) newStep(typ string, at time.Time) *stepState {
	s := &stepState{at: at, firstSeen: at}
	s.step.Type = typ
	s.step.Turn = r.turn
	s.step.Phase = r.phase
	r.steps = append(r.steps, s)
	r.lastChunk = nil
	if r.turn > 0 && r.phase == "" && r.firstResponse == nil && r.turn == 1 {
		t := at
		r.firstResponse = &t
	}
	return s
}

// Update records one session/update.
func (r *Recorder) Update(at time.Time, u acp.Update, decodeErr error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return
	}
	if decodeErr != nil {
		s := r.newStep(schemas.StepEvent, at)
		s.step.Update = u.Kind
		s.step.Error = "malformed update: " + decodeErr.Error()
		s.step.Raw = u.Raw
		return
	}
	switch u.Kind {
	case acp.UpdateAgentMessageChunk:
		r.chunk(schemas.StepMessage, at, u.Chunk)
	case acp.UpdateAgentThoughtChunk:
		r.chunk(schemas.StepThought, at, u.Chunk)
	case acp.UpdateUserMessageChunk:
		r.chunk(schemas.StepUserMessage, at, u.Chunk)
	case acp.UpdateToolCall, acp.UpdateToolCallUpdate:
		r.toolCall(at, u.ToolCall, u.Kind == acp.UpdateToolCall)
	case acp.UpdatePlan:
		s := r.newStep(schemas.StepPlan, at)
		s.step.Entries = u.Plan.Entries
		r.plan = u.Plan.Entries
	case acp.UpdateUsage:
		r.rawStep(schemas.StepUsage, at, u)
		r.usage.Used, r.usage.Size, r.usage.Cost = u.Usage.Used, u.Usage.Size, u.Usage.Cost
		r.hasUsage = true
	case acp.UpdateCurrentMode:
		r.rawStep(schemas.StepMode, at, u)
	case acp.UpdateNotice:
		r.rawStep(schemas.StepNotice, at, u)
	case acp.UpdateSessionInfo:
		r.rawStep(schemas.StepSessionInfo, at, u)
	case acp.UpdateConfigOption:
		r.rawStep(schemas.StepConfig, at, u)
	case acp.UpdateAvailableCommands:
		r.rawStep(schemas.StepCommands, at, u)
	case acp.UpdateCompaction, acp.UpdateCompactionSummaryChunk:
		r.rawStep(schemas.StepCompaction, at, u)
	default:
		r.rawStep(schemas.StepEvent, at, u)
	}
}

func (r *Recorder) rawStep(typ string, at time.Time, u acp.Update) {
	s := r.newStep(typ, at)
	s.step.Update = u.Kind
	s.step.Raw = u.Raw
}

// chunk merges a message, thought or user chunk into the previous step when
// that step is of the same kind, turn and phase and has the same messageId
// (or both have none); otherwise it starts a new step. Text is concatenated
// exactly; non-text blocks are kept in order.
func (r *Recorder) chunk(typ string, at time.Time, c *acp.ContentChunk) {
	id := ""
	if c.MessageID != nil {
		id = *c.MessageID
	}
	s := r.lastChunk
	if s == nil || s.step.Type != typ || s.step.MessageID != id || s.step.Turn != r.turn || s.step.Phase != r.phase {
		s = r.newStep(typ, at)
		s.step.MessageID = id
	}
	r.lastChunk = s
	s.step.Chunks++
	if c.Type == "text" {
		s.text.WriteString(c.Text)
		// Text that arrives after the prompt answered is on the
		// trajectory (phase late), not in the turn's output: the answer
		// is what the agent said before it answered.
		if typ == schemas.StepMessage && r.phase != schemas.PhaseLate {
			r.outputs[r.turn].WriteString(c.Text)
		}
	} else {
		s.step.Blocks = append(s.step.Blocks, c.Content)
	}
}

// toolCall upserts a tool call step by its id: fields present in the
// update replace the stored ones; absent fields stay.
func (r *Recorder) toolCall(at time.Time, p *acp.ToolCallPatch, start bool) {
	s := r.tools[p.ToolCallID]
	if s != nil && start && s.step.Turn < r.turn {
		// An id an earlier turn used, started again: a new call (agents
		// number their calls per turn), not an update of the old one.
		s = nil
	}
	if s == nil {
		s = r.newStep(schemas.StepToolCall, at)
		s.step.ToolCallID = p.ToolCallID
		s.step.Status = acp.ToolPending
		r.tools[p.ToolCallID] = s
	} else {
		s.step.Updates++
	}
	st := &s.step
	if p.Title != nil {
		st.Name = *p.Title
	}
	if p.Name != nil {
		st.ToolName = *p.Name
	}
	if p.Kind != nil {
		st.Kind = *p.Kind
	}
	if p.RawInput != nil {
		st.Input = p.RawInput
	}
	if p.Content != nil {
		st.Content = p.Content
	}
	if p.Locations != nil {
		st.Locations = p.Locations
	}
	if p.RawOutput != nil {
		st.Output, s.rawOutput = p.RawOutput, true
	} else if p.Content != nil && !s.rawOutput {
		st.Output = p.Content
	}
	if p.Status != nil {
		st.Status = *p.Status
		if (st.Status == acp.ToolCompleted || st.Status == acp.ToolFailed) && st.Duration == nil {
			d := at.Sub(s.firstSeen).Milliseconds()
			st.Duration = &d
		}
		if st.Status == acp.ToolFailed {
			r.toolErrors = true
		}
	}
}

// Notify records a notification other than session/update.
func (r *Recorder) Notify(at time.Time, method string, params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return
	}
	s := r.newStep(schemas.StepEvent, at)
	s.step.Method = method
	s.step.Raw = params
}

// Junk records a line on stdout that was not a JSON-RPC message.
func (r *Recorder) Junk(j acp.Junk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return
	}
	r.junkStep(j)
}

func (r *Recorder) junkStep(j acp.Junk) {
	s := r.newStep(schemas.StepEvent, j.At)
	s.step.Update = "stdout_junk"
	s.step.Error = j.Reason
	s.step.Text = string(j.Line)
	if j.Size > len(j.Line) {
		s.step.Truncated = true
		b := int64(j.Size)
		s.step.Bytes = &b
	}
}

// RequestStarted records an agent request as it arrives.
func (r *Recorder) RequestStarted(req *acp.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return
	}
	var s *stepState
	switch req.Method {
	case acp.MethodRequestPermission:
		s = r.newStep(schemas.StepPermission, req.At)
		var p struct {
			ToolCall json.RawMessage `json:"toolCall"`
			Options  json.RawMessage `json:"options"`
		}
		json.Unmarshal(req.Params, &p)
		s.step.ToolCall, s.step.Options = p.ToolCall, p.Options
		var tc struct {
			ID string `json:"toolCallId"`
		}
		json.Unmarshal(p.ToolCall, &tc)
		s.step.ToolCallID = tc.ID
	case acp.MethodReadTextFile, acp.MethodWriteTextFile:
		typ := schemas.StepFSRead
		if req.Method == acp.MethodWriteTextFile {
			typ = schemas.StepFSWrite
		}
		s = r.newStep(typ, req.At)
		var p struct {
			Path    string  `json:"path"`
			Content *string `json:"content"`
		}
		json.Unmarshal(req.Params, &p)
		s.step.Path = p.Path
		if p.Content != nil {
			n := int64(len(*p.Content))
			s.step.Bytes = &n
		}
	case acp.MethodTerminalCreate, acp.MethodTerminalOutput, acp.MethodTerminalWaitForExit,
		acp.MethodTerminalKill, acp.MethodTerminalRelease:
		s = r.newStep(schemas.StepTerminal, req.At)
		var p acp.CreateTerminalRequest
		var t acp.TerminalRequest
		json.Unmarshal(req.Params, &p)
		json.Unmarshal(req.Params, &t)
		s.step.Command, s.step.Args, s.step.TerminalID = p.Command, p.Args, t.TerminalID
		if p.Cwd != nil {
			s.step.Cwd = *p.Cwd
		}
	default:
		s = r.newStep(schemas.StepEvent, req.At)
		s.step.Raw = req.Params
	}
	s.step.Method = req.Method
	r.requests[req] = s
}

// RequestDone records the answer given to an agent request.
func (r *Recorder) RequestDone(req *acp.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.requests[req]
	if s == nil {
		return
	}
	delete(r.requests, req)
	allowed := req.Err == nil
	s.step.Reason = req.Note
	if req.Err != nil {
		s.step.Error = fmt.Sprintf("%d %s", req.Err.Code, req.Err.Message)
	}
	switch s.step.Type {
	case schemas.StepPermission:
		var res acp.RequestPermissionResponse
		json.Unmarshal(req.Result, &res)
		s.step.Outcome, s.step.OptionID = res.Outcome.Outcome, res.Outcome.OptionID
		if req.Err != nil {
			s.step.Outcome = "error"
		}
		return
	case schemas.StepFSRead:
		var res acp.ReadTextFileResponse
		if json.Unmarshal(req.Result, &res) == nil && allowed {
			n := int64(len(res.Content))
			s.step.Bytes = &n
		}
	case schemas.StepTerminal:
		var res struct {
			TerminalID string           `json:"terminalId"`
			Output     *string          `json:"output"`
			Truncated  bool             `json:"truncated"`
			ExitStatus json.RawMessage  `json:"exitStatus"`
			ExitCode   *json.RawMessage `json:"exitCode"`
			Signal     *json.RawMessage `json:"signal"`
		}
		json.Unmarshal(req.Result, &res)
		if res.TerminalID != "" {
			s.step.TerminalID = res.TerminalID
		}
		if res.Output != nil {
			out := *res.Output
			if len(out) > maxTerminalText {
				out = out[len(out)-maxTerminalText:]
				s.step.Truncated = true
			}
			s.step.Text = out
			s.step.Truncated = s.step.Truncated || res.Truncated
			n := int64(len(*res.Output))
			s.step.Bytes = &n
		}
		if len(res.ExitStatus) > 0 {
			s.step.ExitStatus = res.ExitStatus
		} else if req.Method == acp.MethodTerminalWaitForExit && allowed {
			s.step.ExitStatus = req.Result
		}
	case schemas.StepEvent:
		return
	}
	s.step.Allowed = &allowed
}

// Result is what a sealed recorder hands back.
type Result struct {
	Steps      []schemas.Step
	Output     string
	Plan       json.RawMessage
	Usage      *schemas.Usage
	ToolErrors bool
	// FirstResponse is the time from the first prompt to the agent's first
	// update of that turn, when there was one.
	FirstResponse *time.Duration
}

// Seal ends the recording and returns the trajectory, with step ids
// "<prefix>-s<n>". Later messages are ignored.
func (r *Recorder) Seal(prefix string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealed = true
	steps := make([]schemas.Step, len(r.steps))
	for i, s := range r.steps {
		st := s.step
		st.StepID = fmt.Sprintf("%s-s%d", prefix, i+1)
		st.Timestamp = r.sinceStart(s.at)
		switch st.Type {
		case schemas.StepMessage, schemas.StepThought, schemas.StepUserMessage:
			st.Content = marshalText(s.text.String())
		}
		steps[i] = st
	}
	res := Result{
		Steps:      steps,
		Plan:       r.plan,
		ToolErrors: r.toolErrors,
	}
	if r.firstResponse != nil {
		d := r.firstResponse.Sub(r.firstTurn)
		res.FirstResponse = &d
	}
	last := len(r.outputs) - 1
	res.Output = r.outputs[last].String()
	if r.hasUsage {
		u := r.usage
		res.Usage = &u
	}
	return res
}

// Network records connections out of the sandbox as network steps, in
// time order among the case's other steps.
func (r *Recorder) Network(conns []egress.Connection) { r.PhaseNetwork("", conns) }

// PhaseNetwork records connections a phase other than the agent's made
// (schemas.PhaseVerifier: a task's verifier) as network steps of that
// phase, in time order among the case's other steps.
func (r *Recorder) PhaseNetwork(phase string, conns []egress.Connection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed || len(conns) == 0 {
		return
	}
	for _, c := range conns {
		s := &stepState{at: c.At, firstSeen: c.At}
		s.step = networkStep(c)
		s.step.Phase = phase
		r.steps = append(r.steps, s)
	}
	sort.SliceStable(r.steps, func(i, j int) bool { return r.steps[i].at.Before(r.steps[j].at) })
}

// networkStep is a connection as a network step.
func networkStep(c egress.Connection) schemas.Step {
	allowed := c.Allowed
	out, in := c.BytesOut, c.BytesIn
	d := c.Duration.Milliseconds()
	return schemas.Step{Type: schemas.StepNetwork, Host: c.Host, Port: c.Port, Allowed: &allowed,
		BytesOut: &out, BytesIn: &in, Duration: &d, Error: c.Error, Open: c.Open}
}

// marshalText encodes s as a JSON string without HTML escaping, so agent
// text keeps its "<", ">" and "&".
func marshalText(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// TurnOutput is the agent's message text of turn n so far.
func (r *Recorder) TurnOutput(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 0 || n >= len(r.outputs) {
		return ""
	}
	return r.outputs[n].String()
}

// SimulatedUser records a turn a simulated user wrote, in the turn it
// opens: a step of its own, so that the trajectory tells the user's turns
// from the agent's.
func (r *Recorder) SimulatedUser(at time.Time, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	phase := r.phase
	r.phase = ""
	s := r.newStep(schemas.StepSimUser, at)
	r.phase = phase
	s.step.Content = marshalText(text)
}

// SimulatedUserStop records that the simulated user ended the
// conversation after the last turn, with its reason.
func (r *Recorder) SimulatedUserStop(at time.Time, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	phase := r.phase
	r.phase = ""
	s := r.newStep(schemas.StepSimUser, at)
	r.phase = phase
	s.step.Outcome, s.step.Reason = "stop", reason
}
