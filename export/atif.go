// Package export turns capture records into the trajectory formats other
// tools read: Harbor's Agent Trajectory Interchange Format (ATIF) and the
// chat-completions message list fine-tuning and RFT pipelines take.
package export

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"harness/schemas"
)

// ATIFVersion is the ATIF version Export writes.
const ATIFVersion = "ATIF-v1.7"

// Trajectory is an ATIF document: one run of an agent.
type Trajectory struct {
	SchemaVersion string         `json:"schema_version"`
	SessionID     string         `json:"session_id,omitempty"`
	TrajectoryID  string         `json:"trajectory_id,omitempty"`
	Agent         Agent          `json:"agent"`
	Steps         []Step         `json:"steps"`
	Notes         string         `json:"notes,omitempty"`
	FinalMetrics  *FinalMetrics  `json:"final_metrics,omitempty"`
	Extra         map[string]any `json:"extra,omitempty"`
}

// Agent names the agent system that ran.
type Agent struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	ModelName string         `json:"model_name,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
}

// Step is one ATIF step: a system event, a user message or an agent turn.
type Step struct {
	StepID           int          `json:"step_id"`
	Timestamp        string       `json:"timestamp,omitempty"`
	Source           string       `json:"source"`
	Message          string       `json:"message"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall   `json:"tool_calls,omitempty"`
	Observation      *Observation `json:"observation,omitempty"`
	// ModelName, Metrics and LLMCallCount are an agent step's model calls,
	// from the record's ledger (modelCalls).
	ModelName    string         `json:"model_name,omitempty"`
	Metrics      *Metrics       `json:"metrics,omitempty"`
	LLMCallCount *int           `json:"llm_call_count,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Metrics are the token counts and cost of a step's model calls.
// PromptTokens include the cached ones (CachedTokens) and the cache
// writes; Extra holds cache_write_tokens and reasoning_tokens.
type Metrics struct {
	PromptTokens     *int64         `json:"prompt_tokens,omitempty"`
	CompletionTokens *int64         `json:"completion_tokens,omitempty"`
	CachedTokens     *int64         `json:"cached_tokens,omitempty"`
	CostUSD          *float64       `json:"cost_usd,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// ToolCall is one tool call an agent step issued.
type ToolCall struct {
	ToolCallID   string         `json:"tool_call_id"`
	FunctionName string         `json:"function_name"`
	Arguments    map[string]any `json:"arguments"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// Observation holds the results of a step's tool calls.
type Observation struct {
	Results []ObservationResult `json:"results"`
}

// ObservationResult is the result of one tool call of the same step.
type ObservationResult struct {
	SourceCallID string         `json:"source_call_id,omitempty"`
	Content      *string        `json:"content,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// FinalMetrics are the run's totals.
type FinalMetrics struct {
	TotalPromptTokens     *int64         `json:"total_prompt_tokens,omitempty"`
	TotalCompletionTokens *int64         `json:"total_completion_tokens,omitempty"`
	TotalCachedTokens     *int64         `json:"total_cached_tokens,omitempty"`
	TotalCostUSD          *float64       `json:"total_cost_usd,omitempty"`
	TotalSteps            int            `json:"total_steps"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// ATIF sources.
const (
	SourceSystem = "system"
	SourceUser   = "user"
	SourceAgent  = "agent"
)

// atifTime formats epoch milliseconds as ATIF's safest timestamp form.
func atifTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ToATIF converts one capture record into an ATIF trajectory.
//
// Each user turn is a user step. What the agent streams in the turn is cut
// into agent steps the way ATIF asks when the model's call boundaries are
// not known: text after a tool round starts a new step, and a tool call's
// result sits in the step that issued it. Thoughts become
// reasoning_content, messages the step's message. The steps ATIF has no
// place for (permissions, file and terminal requests, usage, modes...) ride
// along, as recorded, in the extra.events of the step they happened in;
// updates that came before the first turn are a system step. The record's
// totals are final_metrics. With a ledger of model calls (modelCalls),
// each agent step also gets the metrics, model and count of its calls: a
// call belongs to the last agent step of its turn that began before the
// call ended (its answer streamed into that step), else to the turn's
// first agent step.
func ToATIF(rec *schemas.CaptureRecord) Trajectory {
	b := atifBuilder{rec: rec}
	b.build()
	b.stepMetrics()
	t := Trajectory{
		SchemaVersion: ATIFVersion,
		SessionID:     fmt.Sprintf("%s-t%d", rec.ID, max(rec.Trial, 1)),
		TrajectoryID:  fmt.Sprintf("%s-t%d", rec.ID, max(rec.Trial, 1)),
		Agent:         atifAgent(rec),
		Steps:         b.steps,
		FinalMetrics:  finalMetrics(rec, len(b.steps)),
		Extra:         recordExtra(rec),
	}
	if rec.Session != nil && rec.Session.ID != "" {
		t.SessionID = rec.Session.ID
	}
	if rec.Error != nil {
		t.Notes = fmt.Sprintf("the run ended with %s: %s", rec.Error.Class, rec.Error.Message)
	}
	return t
}

func atifAgent(rec *schemas.CaptureRecord) Agent {
	p := rec.Provenance
	a := Agent{Name: p.AgentName, Version: p.AgentVersion}
	if a.Name == "" && len(p.Command) > 0 {
		a.Name = path.Base(p.Command[0])
	}
	if a.Name == "" {
		a.Name = "unknown"
	}
	if a.Version == "" {
		a.Version = "unknown"
	}
	extra := map[string]any{}
	if p.AgentTitle != "" {
		extra["title"] = p.AgentTitle
	}
	if len(p.Command) > 0 {
		extra["command"] = p.Command
	}
	if p.ProtocolVersion > 0 {
		extra["acp_protocol_version"] = p.ProtocolVersion
	}
	if len(extra) > 0 {
		a.Extra = extra
	}
	return a
}

func recordExtra(rec *schemas.CaptureRecord) map[string]any {
	e := map[string]any{"harness_record_id": rec.ID, "trial": max(rec.Trial, 1)}
	if rec.StopReason != "" {
		e["stop_reason"] = rec.StopReason
	}
	if rec.Score != nil {
		if rec.Score.Error != nil {
			e["grader_error"] = rec.Score.Error
		} else {
			e["pass"], e["score"] = rec.Score.Pass, rec.Score.Score
		}
	}
	if rec.Error != nil {
		e["error"] = rec.Error
	}
	if rec.Expected != "" {
		e["expected"] = rec.Expected
	}
	if len(rec.Metadata) > 0 {
		e["metadata"] = rec.Metadata
	}
	if rec.Provenance.Harness != "" {
		e["harness_version"] = rec.Provenance.Harness
	}
	return e
}

func finalMetrics(rec *schemas.CaptureRecord, steps int) *FinalMetrics {
	m := &FinalMetrics{TotalSteps: steps}
	u := rec.Usage
	if u == nil {
		return m
	}
	m.TotalPromptTokens = u.InputTokens
	m.TotalCompletionTokens = u.OutputTokens
	// ATIF's cached tokens are a subset of the prompt tokens; a count that
	// cannot be one is kept in extra only.
	if u.CachedReadTokens != nil && u.InputTokens != nil && *u.CachedReadTokens <= *u.InputTokens {
		m.TotalCachedTokens = u.CachedReadTokens
	}
	extra := map[string]any{}
	for k, v := range map[string]*int64{
		"thought_tokens": u.ThoughtTokens, "total_tokens": u.TotalTokens,
		"cached_read_tokens": u.CachedReadTokens, "cached_write_tokens": u.CachedWriteTokens,
		"context_used": u.Used, "context_size": u.Size,
	} {
		if v != nil {
			extra[k] = *v
		}
	}
	if len(u.Cost) > 0 {
		var cost struct {
			Amount   *float64 `json:"amount"`
			Currency string   `json:"currency"`
		}
		if json.Unmarshal(u.Cost, &cost) == nil && cost.Amount != nil && strings.EqualFold(cost.Currency, "USD") {
			m.TotalCostUSD = cost.Amount
		} else {
			extra["cost"] = u.Cost
		}
	}
	if len(extra) > 0 {
		m.Extra = extra
	}
	return m
}

type atifBuilder struct {
	rec   *schemas.CaptureRecord
	steps []Step
	// began is when each step began (epoch ms; -1 for a step that is not
	// an agent step).
	began []int64
	// cur is the index of the agent step being filled, -1 for none.
	cur int
	// calls maps a tool call id to the index of the agent step that issued
	// it, so a result lands with its call.
	calls map[string]int
}

func (b *atifBuilder) add(s Step) *Step {
	s.StepID = len(b.steps) + 1
	b.steps = append(b.steps, s)
	b.began = append(b.began, -1)
	return &b.steps[len(b.steps)-1]
}

// stepMetrics puts each model call of the ledger on its agent step.
func (b *atifBuilder) stepMetrics() {
	type sum struct {
		calls                      int
		prompt, cached, write, out int64
		reasoning                  int64
		usd                        float64
		unpriced                   bool
		models                     map[string]bool
	}
	sums := map[int]*sum{}
	for i := range b.rec.ModelCalls {
		c := &b.rec.ModelCalls[i]
		end := c.Start + c.Duration
		owner := -1
		for j := range b.steps {
			s := &b.steps[j]
			if s.Source != SourceAgent || (c.Turn > 0 && stepTurn(s) != c.Turn) {
				continue
			}
			if owner < 0 || b.began[j] <= end {
				owner = j
			}
			if b.began[j] > end {
				break
			}
		}
		if owner < 0 {
			continue
		}
		m := sums[owner]
		if m == nil {
			m = &sum{models: map[string]bool{}}
			sums[owner] = m
		}
		v := func(p *int64) int64 {
			if p == nil || *p < 0 {
				return 0
			}
			return *p
		}
		m.calls++
		m.cached += v(c.CachedTokens)
		m.write += v(c.CacheWriteTokens)
		m.prompt += v(c.InputTokens) + v(c.CachedTokens) + v(c.CacheWriteTokens)
		m.out += v(c.OutputTokens)
		m.reasoning += v(c.ReasoningTokens)
		if c.USD != nil {
			m.usd += *c.USD
		} else if v(c.InputTokens)+v(c.OutputTokens)+v(c.CachedTokens)+v(c.CacheWriteTokens) > 0 {
			m.unpriced = true
		}
		if c.Model != "" {
			m.models[c.Model] = true
		}
	}
	for j, m := range sums {
		s := &b.steps[j]
		n := m.calls
		s.LLMCallCount = &n
		met := &Metrics{PromptTokens: &m.prompt, CompletionTokens: &m.out, CachedTokens: &m.cached,
			Extra: map[string]any{"cache_write_tokens": m.write, "reasoning_tokens": m.reasoning}}
		if !m.unpriced {
			usd := m.usd
			met.CostUSD = &usd
		}
		s.Metrics = met
		if len(m.models) == 1 {
			for name := range m.models {
				s.ModelName = name
			}
		}
	}
}

func (b *atifBuilder) at(st *schemas.Step) string {
	return atifTime(b.rec.Timing.Start + st.Timestamp)
}

func (b *atifBuilder) build() {
	rec := b.rec
	b.calls, b.cur = map[string]int{}, -1
	turns := rec.Input.List
	turn := 0
	var setup []schemas.Step
	flushSetup := func() {
		if len(setup) > 0 {
			b.add(Step{Source: SourceSystem, Timestamp: b.at(&setup[0]), Message: "session setup",
				Extra: map[string]any{"events": setup}})
			setup = nil
		}
	}
	for i := range rec.Trajectory {
		st := &rec.Trajectory[i]
		if st.Phase == schemas.PhaseSetup && turn == 0 {
			setup = append(setup, *st)
			continue
		}
		flushSetup()
		// Records of older versions have no turn on single-turn steps.
		t := max(st.Turn, 1)
		for t > turn && turn < len(turns) {
			turn++
			b.userStep(turn, st)
		}
		b.agentStep(st, t)
	}
	flushSetup()
	// Turns the agent was given and answered with nothing still happened:
	// those that ended (one stop reason each), and the one an error cut.
	sent := len(rec.StopReasons)
	if sent == 0 && rec.StopReason != "" {
		sent = 1
	}
	if rec.Error != nil {
		sent++
	}
	for turn < min(max(sent, 1), len(turns)) {
		turn++
		b.userStep(turn, nil)
	}
}

func (b *atifBuilder) userStep(turn int, first *schemas.Step) {
	ts := atifTime(b.rec.Timing.Start)
	if first != nil && turn > 1 {
		ts = b.at(first)
	}
	s := Step{Source: SourceUser, Message: b.rec.Input.List[turn-1], Timestamp: ts}
	if len(b.rec.Input.List) > 1 {
		s.Extra = map[string]any{"turn": turn}
	}
	b.add(s)
	b.cur = -1
}

// agentStep puts one recorded step into the current agent step, starting a
// new one when text follows a tool round.
func (b *atifBuilder) agentStep(st *schemas.Step, turn int) {
	start := func() *Step {
		s := b.add(Step{Source: SourceAgent, Timestamp: b.at(st), Extra: map[string]any{"turn": turn}})
		b.began[len(b.began)-1] = b.rec.Timing.Start + st.Timestamp
		if st.Phase != "" {
			s.Extra["phase"] = st.Phase
		}
		b.cur = len(b.steps) - 1
		return s
	}
	// Pointers into b.steps last only until the next add.
	var cur *Step
	if b.cur >= 0 {
		cur = &b.steps[b.cur]
	}
	textAfterTools := cur != nil && len(cur.ToolCalls) > 0
	newPhase := cur != nil && phaseOf(cur) != st.Phase
	switch st.Type {
	case schemas.StepThought, schemas.StepMessage:
		if cur == nil || textAfterTools || newPhase {
			cur = start()
		}
		text := st.TextContent()
		if st.Type == schemas.StepThought {
			cur.ReasoningContent += text
		} else {
			cur.Message += text
		}
	case schemas.StepToolCall:
		if i, seen := b.calls[st.ToolCallID]; seen && stepTurn(&b.steps[i]) == turn {
			b.toolResult(&b.steps[i], st)
			return
		}
		if cur == nil || newPhase {
			cur = start()
		}
		cur.ToolCalls = append(cur.ToolCalls, toolCall(st))
		b.calls[st.ToolCallID] = b.cur
		b.toolResult(cur, st)
	default:
		if cur == nil {
			cur = start() // agent steps always have extra (their turn)
		}
		events, _ := cur.Extra["events"].([]schemas.Step)
		cur.Extra["events"] = append(events, *st)
	}
}

func phaseOf(s *Step) string {
	p, _ := s.Extra["phase"].(string)
	return p
}

func stepTurn(s *Step) int {
	t, _ := s.Extra["turn"].(int)
	return t
}

func toolCall(st *schemas.Step) ToolCall {
	tc := ToolCall{ToolCallID: st.ToolCallID, FunctionName: FunctionName(st), Arguments: map[string]any{}}
	if len(st.Input) > 0 {
		var v any
		if json.Unmarshal(st.Input, &v) == nil {
			if m, ok := v.(map[string]any); ok {
				tc.Arguments = m
			} else if v != nil {
				tc.Arguments = map[string]any{"input": v}
			}
		}
	}
	extra := map[string]any{}
	if st.Name != "" {
		extra["title"] = st.Name
	}
	if st.Kind != "" {
		extra["kind"] = st.Kind
	}
	if st.Status != "" {
		extra["status"] = st.Status
	}
	if st.Duration != nil {
		extra["duration_ms"] = *st.Duration
	}
	if len(st.Locations) > 0 {
		extra["locations"] = st.Locations
	}
	if len(extra) > 0 {
		tc.Extra = extra
	}
	return tc
}

// toolResult puts (or replaces) the result of a tool call in its step.
func (b *atifBuilder) toolResult(s *Step, st *schemas.Step) {
	content, ok := ToolOutput(st)
	if !ok && st.Status == "" {
		return
	}
	r := ObservationResult{SourceCallID: st.ToolCallID}
	if ok {
		r.Content = &content
	}
	if st.Status == "failed" {
		r.Extra = map[string]any{"status": "failed"}
	}
	if s.Observation == nil {
		s.Observation = &Observation{Results: []ObservationResult{}}
	}
	for i := range s.Observation.Results {
		if s.Observation.Results[i].SourceCallID == st.ToolCallID {
			s.Observation.Results[i] = r
			return
		}
	}
	s.Observation.Results = append(s.Observation.Results, r)
}

// ToolOutput is a tool call's result as text: its raw output (a JSON string
// as is, anything else as compact JSON), else the text of its content.
func ToolOutput(st *schemas.Step) (string, bool) {
	if len(st.Output) > 0 && string(st.Output) != "null" {
		var s string
		if json.Unmarshal(st.Output, &s) == nil {
			return s, true
		}
		return string(st.Output), true
	}
	if len(st.Content) > 0 {
		var parts []struct {
			Type    string `json:"type"`
			Content struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(st.Content, &parts) == nil {
			var texts []string
			for _, p := range parts {
				if p.Type == "content" && p.Content.Type == "text" {
					texts = append(texts, p.Content.Text)
				}
			}
			if len(texts) > 0 {
				return strings.Join(texts, "\n"), true
			}
		}
	}
	return "", false
}

// FunctionName is the name a tool call is exported under: the agent's own
// tool name when it sent one, else the ACP kind, else "tool"; kept to the
// characters and length function names may have in chat formats.
func FunctionName(st *schemas.Step) string {
	name := st.ToolName
	if name == "" {
		name = st.Kind
	}
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "tool"
	}
	return b.String()
}
