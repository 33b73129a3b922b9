package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// FuzzLineStream feeds arbitrary agent output to the line reader: it must
// never panic or stop early on junk, and every line must come out either as
// a message or as junk, never both and never neither.
func FuzzLineStream(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"))
	f.Add([]byte("banner line\n{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{}}}\n"))
	f.Add([]byte("[1,2]\n{\"hello\":1}\n{\"method\":5}\n\r\n   \n{\"id\":null,\"method\":\"x\"}\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"fs/read_text_file\",\"params\":[1]}\n{\"id\":1,\"method\":\"m\",\"result\":1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var junk, notes, msgs int
		s := newLineStream(bytes.NewReader(data), nopWriteCloser{io.Discard}, time.Now, func(Junk) { junk++ }, nil)
		s.notify = func(inbound) { notes++ }
		for {
			var v json.RawMessage
			if err := s.ReadObject(&v); err != nil {
				break
			}
			msgs++
		}
		lines := 0
		for _, l := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(l) != "" {
				lines++
			}
		}
		if got := junk + notes + msgs; got != lines {
			t.Fatalf("%d non-blank lines but %d junk + %d notifications + %d messages", lines, junk, notes, msgs)
		}
	})
}

// FuzzDecodeUpdate decodes arbitrary update objects: never a panic, and a
// known kind always comes with its typed fields.
func FuzzDecodeUpdate(f *testing.F) {
	for _, s := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"messageId":"m"}`,
		`{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","status":"pending","rawInput":{"a":1}}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"t","content":null}`,
		`{"sessionUpdate":"plan","entries":[]}`,
		`{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":1,"currency":"USD"}}`,
		`{"sessionUpdate":"future_thing","x":1}`,
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"image","data":"","mimeType":"image/png"}}`,
		`{"sessionUpdate":5}`, `[]`, `null`, `{"sessionUpdate":"current_mode_update","currentModeId":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		u, err := DecodeUpdate(raw)
		if err != nil || !u.Known {
			return
		}
		switch u.Kind {
		case UpdateAgentMessageChunk, UpdateAgentThoughtChunk, UpdateUserMessageChunk, UpdateCompactionSummaryChunk:
			if u.Chunk == nil {
				t.Fatal("chunk kind without a chunk")
			}
		case UpdateToolCall, UpdateToolCallUpdate:
			if u.ToolCall == nil || u.ToolCall.ToolCallID == "" {
				t.Fatal("tool call without an id")
			}
		case UpdatePlan:
			if u.Plan == nil || u.Plan.Entries[0] != '[' {
				t.Fatal("plan without entries")
			}
		case UpdateUsage:
			if u.Usage == nil {
				t.Fatal("usage without fields")
			}
		}
	})
}
