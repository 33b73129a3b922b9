package schemas

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchRecord is a capture record shaped like a real one: thoughts,
// messages, tool calls with input and output, a plan.
func benchRecord(i int) []byte {
	rec := CaptureRecord{ID: fmt.Sprintf("case-%d", i), Trial: 1, Input: SingleTurn("Fix the failing test in pkg/foo"),
		Output: strings.Repeat("The fix is done. ", 20), Metadata: map[string]any{"agent": "agent", "category": "bugs"},
		StopReason: "end_turn", Provenance: Provenance{Harness: "x", AgentName: "a"}}
	for s := 0; s < 30; s++ {
		st := Step{Type: StepThought, StepID: fmt.Sprintf("case-%d-t1-s%d", i, s), Timestamp: int64(s * 100), Turn: 1}
		switch s % 3 {
		case 0:
			st.Content = json.RawMessage(`"` + strings.Repeat("thinking about the code ", 10) + `"`)
		case 1:
			st.Type, st.ToolCallID, st.Name, st.Kind, st.Status = StepToolCall, fmt.Sprint("t", s), "Read file", "read", "completed"
			st.Input = json.RawMessage(`{"path":"/repo/pkg/foo/foo.go"}`)
			st.Output = json.RawMessage(`{"content":"` + strings.Repeat("package foo\\nfunc F() int { return 1 }\\n", 10) + `"}`)
		case 2:
			st.Type, st.Content = StepMessage, json.RawMessage(`"I will now edit the file."`)
		}
		rec.Trajectory = append(rec.Trajectory, st)
	}
	b, _ := json.Marshal(rec)
	return b
}

// BenchmarkParseResultLine is the decoding cost of summarize, grade and
// the other readers, in MB/s of JSONL.
func BenchmarkParseResultLine(b *testing.B) {
	lines := make([][]byte, 200)
	size := 0
	for i := range lines {
		lines[i] = benchRecord(i)
		size += len(lines[i]) + 1
	}
	b.SetBytes(int64(size))
	for i := 0; i < b.N; i++ {
		for _, l := range lines {
			if _, err := ParseResultLine(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkContentHash is the cost of a case's content hash, taken once per
// record written and once per case on resume: a case with a multi-line
// input, an expected answer and metadata.
func BenchmarkContentHash(b *testing.B) {
	c := PromptCase{ID: "case-1", Input: SingleTurn(strings.Repeat("Fix the failing test in pkg/foo. ", 40)), Expected: "tests pass",
		Metadata: map[string]any{"category": "bugs", "difficulty": "hard", "tags": []any{"go", "tests"}}, Timeout: Duration(90e9)}
	b.ReportAllocs()
	for b.Loop() {
		if c.ContentHash() == "" {
			b.Fatal("no hash")
		}
	}
}
