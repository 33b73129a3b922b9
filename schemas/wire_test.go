package schemas_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"harness/schemas"
)

// A record splits into the peer's step kinds (trajectory) and the others
// (events), and reads back as one trajectory in the original order.
func TestRecordFormatSplitsAndRejoinsSteps(t *testing.T) {
	rec := schemas.CaptureRecord{
		ID: "a", Trial: 1, Input: schemas.SingleTurn("hi"), Metadata: map[string]any{},
		Trajectory: []schemas.Step{
			{Type: schemas.StepThought, StepID: "a-t1-s1", Content: json.RawMessage(`"hm"`)},
			{Type: schemas.StepPermission, StepID: "a-t1-s2", OptionID: "allow"},
			{Type: schemas.StepToolCall, StepID: "a-t1-s3", ToolCallID: "c1", ToolName: "Read"},
			{Type: schemas.StepUsage, StepID: "a-t1-s4", Update: "usage_update"},
			{Type: schemas.StepMessage, StepID: "a-t1-s5", Content: json.RawMessage(`"done"`)},
		},
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Trajectory []schemas.Step `json:"trajectory"`
		Events     []schemas.Step `json:"events"`
		Format     int            `json:"format"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if len(wire.Trajectory) != 3 || len(wire.Events) != 2 || wire.Format != schemas.FormatVersion {
		t.Fatalf("trajectory %d steps, events %d, format %d: %s", len(wire.Trajectory), len(wire.Events), wire.Format, b)
	}
	if wire.Trajectory[1].Name != "Read" {
		t.Errorf("tool call written without the name the peer requires: %+v", wire.Trajectory[1])
	}
	var back schemas.CaptureRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range back.Trajectory {
		ids = append(ids, s.StepID)
	}
	if want := []string{"a-t1-s1", "a-t1-s2", "a-t1-s3", "a-t1-s4", "a-t1-s5"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("read back in order %v, want %v", ids, want)
	}
}

// A grader that crashed is written as graderError, never as a score object
// that a pipeline reading .score.pass would count as a failure; both
// formats read back to the same record.
func TestGraderErrorIsNotAScore(t *testing.T) {
	crash := &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "exit status 1"}}
	rec := schemas.CaptureRecord{ID: "a", Trial: 1, Input: schemas.SingleTurn("hi"), Metadata: map[string]any{}, Score: crash}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["score"]; ok {
		t.Errorf("a grader crash was written as score: %s", b)
	}
	if _, ok := m["graderError"]; !ok {
		t.Errorf("no graderError: %s", b)
	}
	old := []byte(`{"id":"a","trial":1,"input":"hi","output":"","trajectory":[],"metadata":{},"timing":{"start":0,"end":0,"sessionCreation":0,"total":0},"toolErrors":false,"provenance":{},"score":{"pass":false,"score":0,"error":{"class":"grader_error","message":"exit status 1"}}}`)
	for _, in := range [][]byte{b, old} {
		var back schemas.CaptureRecord
		if err := json.Unmarshal(in, &back); err != nil {
			t.Fatal(err)
		}
		if back.Score == nil || back.Score.Error == nil || back.Score.Error.Class != schemas.ErrGraderError {
			t.Errorf("read back %+v from %s", back.Score, in)
		}
	}
	pass := schemas.CaptureRecord{ID: "a", Input: schemas.SingleTurn("hi"), Score: &schemas.GraderResult{Pass: true, Score: 1}}
	if b, _ := json.Marshal(pass); !json.Valid(b) || !containsKey(b, "score") || containsKey(b, "graderError") {
		t.Errorf("a verdict must stay in score: %s", b)
	}
}

func containsKey(b []byte, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}
