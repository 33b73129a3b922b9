package export_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/export"
	"harness/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// inputs are the records the export tests convert: the capture golden
// records (every kind of agent behaviour), a format-1 file of an older
// version, and a multi-turn record.
func inputs(t *testing.T) []schemas.CaptureRecord {
	t.Helper()
	var recs []schemas.CaptureRecord
	for _, f := range []string{"../capture/testdata/golden.jsonl", "../testdata/results/capture_a.jsonl"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var r schemas.CaptureRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			recs = append(recs, r)
		}
	}
	return append(recs, multiTurn())
}

func multiTurn() schemas.CaptureRecord {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	return schemas.CaptureRecord{
		ID: "mt", Trial: 2, Input: schemas.Turns{List: []string{"read a.txt", "now say done"}, Multi: true},
		Output: "done", StopReasons: []string{"end_turn", "end_turn"}, StopReason: "end_turn",
		Timing:     schemas.Timing{Start: 1767225600000, End: 1767225600900},
		Provenance: schemas.Provenance{AgentName: "fake", AgentVersion: "1.0", Command: []string{"/opt/fake/bin/agent"}},
		Session:    &schemas.Session{ID: "sess-9"},
		Usage:      &schemas.Usage{InputTokens: ptr(int64(120)), OutputTokens: ptr(int64(30)), CachedReadTokens: ptr(int64(100)), Cost: raw(`{"amount":0.002,"currency":"USD"}`)},
		Score:      &schemas.GraderResult{Pass: true, Score: 1},
		Trajectory: []schemas.Step{
			{Type: schemas.StepCommands, StepID: "mt-t2-s1", Timestamp: 5, Phase: schemas.PhaseSetup, Update: "available_commands_update", Raw: raw(`{"sessionUpdate":"available_commands_update","availableCommands":[]}`)},
			{Type: schemas.StepThought, StepID: "mt-t2-s2", Timestamp: 40, Turn: 1, Content: raw(`"I should read it."`)},
			{Type: schemas.StepMessage, StepID: "mt-t2-s3", Timestamp: 41, Turn: 1, Content: raw(`"Reading."`)},
			{Type: schemas.StepToolCall, StepID: "mt-t2-s4", Timestamp: 42, Turn: 1, ToolCallID: "c1", Name: "Read a.txt", ToolName: "Read", Kind: "read", Status: "completed", Input: raw(`{"path":"a.txt"}`), Output: raw(`"hello"`)},
			{Type: schemas.StepPermission, StepID: "mt-t2-s5", Timestamp: 43, Turn: 1, ToolCallID: "c1", OptionID: "allow", Outcome: "selected"},
			{Type: schemas.StepMessage, StepID: "mt-t2-s6", Timestamp: 60, Turn: 1, Content: raw(`"It says hello."`)},
			{Type: schemas.StepToolCall, StepID: "mt-t2-s7", Timestamp: 500, Turn: 2, ToolCallID: "c1", Name: "echo done", Kind: "execute", Status: "failed", Input: raw(`"echo done"`), Content: raw(`[{"type":"content","content":{"type":"text","text":"denied"}}]`)},
			{Type: schemas.StepMessage, StepID: "mt-t2-s8", Timestamp: 800, Turn: 2, Content: raw(`"done"`)},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./export -update)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s line %d differs:\n got %s\nwant %s", name, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, golden has %d", name, len(gl), len(wl))
	}
}

// Every record exports to a trajectory the repository's ATIF schema and
// cross-field rules accept, and the output is stable.
func TestATIFExportIsValid(t *testing.T) {
	var out bytes.Buffer
	for _, rec := range inputs(t) {
		b, err := json.Marshal(export.ToATIF(&rec))
		if err != nil {
			t.Fatal(err)
		}
		if err := export.ValidateATIF(b); err != nil {
			t.Errorf("record %s: %v\n%s", rec.ID, err, b)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	golden(t, "atif.golden.jsonl", out.Bytes())
}

// The multi-turn record maps as ATIF asks: a system step for the setup
// updates, a user step per turn, text after a tool round in a new agent
// step, each result in the step of its call, events in extra.
func TestATIFShape(t *testing.T) {
	rec := multiTurn()
	tr := export.ToATIF(&rec)
	var shape []string
	for _, s := range tr.Steps {
		d := s.Source
		if s.ReasoningContent != "" {
			d += "+reasoning"
		}
		if s.Message != "" {
			d += "+message"
		}
		if len(s.ToolCalls) > 0 {
			d += "+calls"
		}
		if s.Observation != nil {
			d += "+results"
		}
		if _, ok := s.Extra["events"]; ok {
			d += "+events"
		}
		shape = append(shape, d)
	}
	want := "system+message+events user+message agent+reasoning+message+calls+results+events agent+message user+message agent+calls+results agent+message"
	if got := strings.Join(shape, " "); got != want {
		t.Errorf("steps:\n got %s\nwant %s", got, want)
	}
	if tr.SessionID != "sess-9" || tr.Agent.Name != "fake" || tr.SchemaVersion != export.ATIFVersion {
		t.Errorf("root: %+v", tr)
	}
	if tr.Steps[1].Timestamp != "2026-01-01T00:00:00.000Z" || tr.Steps[4].Timestamp != "2026-01-01T00:00:00.500Z" {
		t.Errorf("timestamps: user steps at %s and %s", tr.Steps[1].Timestamp, tr.Steps[4].Timestamp)
	}
	fm := tr.FinalMetrics
	if fm == nil || *fm.TotalPromptTokens != 120 || *fm.TotalCachedTokens != 100 || *fm.TotalCostUSD != 0.002 || fm.TotalSteps != 7 {
		t.Errorf("final metrics: %+v", fm)
	}
	call := tr.Steps[5].ToolCalls[0]
	if call.FunctionName != "execute" || call.Arguments["input"] != "echo done" {
		t.Errorf("a tool call whose input is not an object: %+v", call)
	}
	if got := *tr.Steps[5].Observation.Results[0].Content; got != "denied" {
		t.Errorf("result from content: %q", got)
	}
}

// The validator is not vacuous: each broken document is rejected, with
// the rule it breaks named.
func TestATIFValidatorRejects(t *testing.T) {
	const good = `{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[
{"step_id":1,"source":"user","message":"hi","timestamp":"2026-03-02T09:15:00.120Z"},
{"step_id":2,"source":"agent","message":"","tool_calls":[{"tool_call_id":"c","function_name":"f","arguments":{}}],"observation":{"results":[{"source_call_id":"c","content":"x"}]},"metrics":{"prompt_tokens":3}}]}`
	if err := export.ValidateATIF([]byte(good)); err != nil {
		t.Fatalf("the valid document: %v", err)
	}
	bad := map[string][2]string{
		"step ids out of order":           {`"step_id":2,"source":"agent"`, `"step_id":3,"source":"agent"`},
		"result naming another step":      {`"source_call_id":"c"`, `"source_call_id":"d"`},
		"tool calls on a user step":       {`"source":"user","message":"hi"`, `"source":"user","message":"hi","tool_calls":[]`},
		"metrics on a user step":          {`"source":"user","message":"hi"`, `"source":"user","message":"hi","metrics":{}`},
		"unknown key":                     {`"message":"hi"`, `"message":"hi","text":"x"`},
		"null arguments":                  {`"arguments":{}`, `"arguments":null`},
		"no session_id before v1.7":       {`"session_id":"s",`, ``},
		"unknown source":                  {`"source":"user"`, `"source":"tool"`},
		"null message":                    {`"message":"hi"`, `"message":null`},
		"text part with an image source":  {`"message":"hi"`, `"message":[{"type":"text","text":"a","source":{"media_type":"image/png","path":"p"}}]`},
		"bad timestamp":                   {`09:15:00.120Z`, `9h15`},
		"no llm calls yet metrics":        {`"metrics":{"prompt_tokens":3}`, `"metrics":{"prompt_tokens":3},"llm_call_count":0`},
		"negative token count":            {`"prompt_tokens":3`, `"prompt_tokens":-3`},
		"unknown version":                 {`ATIF-v1.6`, `ATIF-v2.0`},
		"subagent ref without id or path": {`"content":"x"`, `"content":"x","subagent_trajectory_ref":[{"session_id":"s"}]`},
	}
	for name, r := range bad {
		doc := strings.Replace(good, r[0], r[1], 1)
		if doc == good {
			t.Fatalf("%s: the mutation did not apply", name)
		}
		if err := export.ValidateATIF([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	dup := `{"schema_version":"ATIF-v1.7","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"hi"}],
"subagent_trajectories":[{"schema_version":"ATIF-v1.7","trajectory_id":"x","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"a"}]},
{"schema_version":"ATIF-v1.7","trajectory_id":"x","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"b"}]}]}`
	if err := export.ValidateATIF([]byte(dup)); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Errorf("duplicate subagent trajectory ids: %v", err)
	}
}

// The chat view answers every tool call with exactly one tool message right
// after the assistant message that made it, with arguments as JSON text.
func TestMessagesExport(t *testing.T) {
	var out bytes.Buffer
	for _, rec := range inputs(t) {
		c := export.ToMessages(&rec, true)
		if len(c.Messages) == 0 || c.Messages[0].Role != "user" {
			t.Errorf("record %s: first message %+v", rec.ID, c.Messages)
		}
		pending := map[string]bool{}
		for i, m := range c.Messages {
			switch m.Role {
			case "assistant":
				if len(pending) > 0 {
					t.Errorf("record %s message %d: tool calls %v unanswered", rec.ID, i, pending)
				}
				for _, tc := range m.ToolCalls {
					if !json.Valid([]byte(tc.Function.Arguments)) || tc.Type != "function" || tc.Function.Name == "" {
						t.Errorf("record %s: tool call %+v", rec.ID, tc)
					}
					pending[tc.ID] = true
				}
			case "tool":
				if !pending[m.ToolCallID] || m.Content == nil {
					t.Errorf("record %s message %d: tool message for %q, pending %v", rec.ID, i, m.ToolCallID, pending)
				}
				delete(pending, m.ToolCallID)
			case "user":
			default:
				t.Errorf("record %s: role %q", rec.ID, m.Role)
			}
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	golden(t, "openai.golden.jsonl", out.Bytes())
}

// With a ledger of model calls, each agent step carries the metrics, model
// and count of the calls whose answers streamed into it; the document
// stays valid ATIF, and an unpriced call leaves its step's cost unknown.
func TestATIFStepMetrics(t *testing.T) {
	rec := multiTurn()
	start := rec.Timing.Start
	call := func(at, dur int64, turn int, model string, in, cached, out int64, usd *float64) schemas.ModelCall {
		return schemas.ModelCall{Provider: "anthropic", API: "messages", Model: model, Start: start + at, Duration: dur, Status: 200, Turn: turn,
			InputTokens: ptr(in), CachedTokens: ptr(cached), CacheWriteTokens: ptr(int64(2)), OutputTokens: ptr(out), USD: usd}
	}
	rec.ModelCalls = []schemas.ModelCall{
		call(10, 35, 1, "claude-sonnet-4-5", 10, 100, 7, ptr(0.001)), // streams the thought at 40
		call(50, 20, 1, "claude-sonnet-4-5", 20, 100, 5, ptr(0.002)), // the message at 60, after the tool round
		call(450, 400, 2, "mystery-model", 30, 0, 9, nil),            // the message at 800
	}
	tr := export.ToATIF(&rec)
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := export.ValidateATIF(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var got []string
	for _, s := range tr.Steps {
		if s.Source != export.SourceAgent {
			continue
		}
		if s.Metrics == nil {
			got = append(got, "-")
			continue
		}
		m := s.Metrics
		cost := "?"
		if m.CostUSD != nil {
			cost = fmt.Sprintf("%.3f", *m.CostUSD)
		}
		got = append(got, fmt.Sprintf("%s n=%d p=%d c=%d o=%d $%s", s.ModelName, *s.LLMCallCount, *m.PromptTokens, *m.CachedTokens, *m.CompletionTokens, cost))
	}
	want := []string{
		"claude-sonnet-4-5 n=1 p=112 c=100 o=7 $0.001",
		"claude-sonnet-4-5 n=1 p=122 c=100 o=5 $0.002",
		"-",
		"mystery-model n=1 p=32 c=0 o=9 $?",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("agent steps' metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
