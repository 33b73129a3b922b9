package headless

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"harness/acp"
)

// feed maps lines through a fresh turn of an adapter and returns the
// decoded updates.
func feed(t *testing.T, name string, lines ...string) (*Turn, []acp.Update) {
	t.Helper()
	a, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	turn := a.NewTurn()
	var all []acp.Update
	for _, l := range lines {
		ups, err := turn.Line([]byte(l))
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		for _, raw := range ups {
			u, err := acp.DecodeUpdate(raw)
			if err != nil {
				t.Fatalf("update %s does not decode: %v", raw, err)
			}
			all = append(all, u)
		}
	}
	return turn, all
}

func kinds(ups []acp.Update) string {
	var k []string
	for _, u := range ups {
		k = append(k, u.Kind)
	}
	return strings.Join(k, " ")
}

func TestClaudeEvents(t *testing.T) {
	turn, ups := feed(t, ClaudeStreamJSON,
		`{"type":"system","subtype":"init","session_id":"s1","model":"m","claude_code_version":"2.1.44","tools":["Bash"]}`,
		`{"type":"assistant","message":{"id":"msg1","content":[{"type":"thinking","thinking":"hm","signature":"x"}]}}`,
		`{"type":"assistant","message":{"id":"msg1","content":[{"type":"text","text":"Let me check."}]}}`,
		`{"type":"assistant","message":{"id":"msg1","content":[{"type":"tool_use","id":"t1","name":"TodoWrite","input":{"todos":[{"content":"a","status":"completed","activeForm":"A"}]}}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":[{"type":"text","text":"ok"}],"is_error":false}]}}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}`,
	)
	if got := kinds(ups); got != "headless_event agent_thought_chunk agent_message_chunk tool_call plan tool_call_update usage_update" {
		t.Errorf("updates: %s", got)
	}
	if turn.Session != "s1" || turn.AgentVersion != "2.1.44" || turn.Model != "m" {
		t.Errorf("turn: %+v", turn)
	}
	tc := ups[3].ToolCall
	if *tc.Title != "TodoWrite" || *tc.Kind != "think" || !strings.Contains(string(ups[4].Plan.Entries), `"status":"completed"`) {
		t.Errorf("tool call %+v, plan %s", tc, ups[4].Plan.Entries)
	}
	if string(ups[5].ToolCall.RawOutput) != `"ok"` || *ups[5].ToolCall.Status != "completed" {
		t.Errorf("result %+v", ups[5].ToolCall)
	}
	end := turn.End()
	var u map[string]int64
	json.Unmarshal(end.Usage, &u)
	want := map[string]int64{"inputTokens": 10, "outputTokens": 5, "cachedReadTokens": 3, "cachedWriteTokens": 2, "totalTokens": 20}
	if end.StopReason != "end_turn" || end.Error != "" || !reflect.DeepEqual(u, want) {
		t.Errorf("end %+v usage %v", end, u)
	}
	_, _ = feed(t, ClaudeStreamJSON) // no lines: no end
	errTurn, _ := feed(t, ClaudeStreamJSON, `{"type":"result","subtype":"error_during_execution","is_error":true}`)
	if errTurn.End().Error == "" {
		t.Error("an error result is not an error")
	}
	maxTurn, _ := feed(t, ClaudeStreamJSON, `{"type":"result","subtype":"error_max_turns","is_error":true}`)
	if maxTurn.End().StopReason != "max_turn_requests" {
		t.Errorf("max turns: %+v", maxTurn.End())
	}
}

func TestCodexEvents(t *testing.T) {
	turn, ups := feed(t, CodexJSON,
		`{"type":"thread.started","thread_id":"th1"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"i0","type":"error","message":"metadata not found"}}`,
		`{"type":"item.completed","item":{"id":"i1","type":"reasoning","text":"think"}}`,
		`{"type":"item.started","item":{"id":"i2","type":"command_execution","command":"bash -lc 'false'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"i2","type":"command_execution","command":"bash -lc 'false'","aggregated_output":"boom\n","exit_code":1,"status":"failed"}}`,
		`{"type":"item.completed","item":{"id":"i3","type":"file_change","changes":[{"path":"a.go","kind":"update"}],"status":"completed"}}`,
		`{"type":"item.updated","item":{"id":"i4","type":"todo_list","items":[{"text":"x","completed":true},{"text":"y","completed":false}]}}`,
		`{"type":"item.completed","item":{"id":"i5","type":"agent_message","text":"done"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":50,"output_tokens":40,"reasoning_output_tokens":10}}`,
	)
	if got := kinds(ups); got != "notice agent_thought_chunk tool_call tool_call_update tool_call tool_call_update plan agent_message_chunk" {
		t.Errorf("updates: %s", got)
	}
	if turn.Session != "th1" || turn.End() == nil || turn.End().Error != "" {
		t.Errorf("turn %+v end %+v", turn, turn.End())
	}
	if *ups[3].ToolCall.Status != "failed" || !strings.Contains(string(ups[3].ToolCall.RawOutput), `"exitCode":1`) {
		t.Errorf("failed command: %+v", ups[3].ToolCall)
	}
	if *ups[4].ToolCall.Kind != "edit" || !strings.Contains(string(ups[4].ToolCall.Locations), "a.go") {
		t.Errorf("file change: %+v", ups[4].ToolCall)
	}
	if !strings.Contains(string(ups[6].Plan.Entries), `{"content":"y","priority":"medium","status":"pending"}`) {
		t.Errorf("plan: %s", ups[6].Plan.Entries)
	}
	failed, _ := feed(t, CodexJSON, `{"type":"turn.failed","error":{"message":"quota"}}`)
	if e := failed.End(); e == nil || !strings.Contains(e.Error, "quota") {
		t.Errorf("turn.failed: %+v", e)
	}
}

func TestGeminiEvents(t *testing.T) {
	turn, ups := feed(t, GeminiStreamJSON,
		`{"type":"init","timestamp":"2026-11-23T15:37:39.494Z","session_id":"g1","model":"auto"}`,
		`{"type":"message","role":"user","content":"hi"}`,
		`{"type":"message","role":"assistant","content":"Let me ","delta":true}`,
		`{"type":"message","role":"assistant","content":"check.","delta":true}`,
		`{"type":"tool_use","tool_name":"write_file","tool_id":"w1","parameters":{"file_path":"/w/a.txt","content":"x"}}`,
		`{"type":"tool_result","tool_id":"w1","status":"error","error":{"type":"x","message":"denied"}}`,
		`{"type":"result","status":"success","stats":{"total_tokens":360,"input_tokens":300,"output_tokens":60,"cached":0}}`,
	)
	if got := kinds(ups); got != "headless_event agent_message_chunk agent_message_chunk tool_call tool_call_update" {
		t.Errorf("updates: %s", got)
	}
	if turn.Session != "g1" || *ups[3].ToolCall.Kind != "edit" || *ups[4].ToolCall.Status != "failed" {
		t.Errorf("turn %+v, tool %+v %+v", turn, ups[3].ToolCall, ups[4].ToolCall)
	}
	var u map[string]int64
	json.Unmarshal(turn.End().Usage, &u)
	if u["inputTokens"] != 300 || u["totalTokens"] != 360 {
		t.Errorf("usage %v", u)
	}
	bad, _ := feed(t, GeminiStreamJSON, `{"type":"result","status":"error","error":{"message":"quota"}}`)
	if !strings.Contains(bad.End().Error, "quota") {
		t.Errorf("error result: %+v", bad.End())
	}
}

// Lines that are not JSON objects are errors the caller records; unknown
// events are kept whole.
func TestUnknownAndJunk(t *testing.T) {
	a, _ := Lookup(CodexJSON)
	turn := a.NewTurn()
	if _, err := turn.Line([]byte("Reading additional input from stdin...")); err == nil {
		t.Error("a banner line is not an error")
	}
	ups, err := turn.Line([]byte(`{"type":"future.thing","x":1}`))
	if err != nil || len(ups) != 1 || !strings.Contains(string(ups[0]), `"event":{"type":"future.thing","x":1}`) {
		t.Errorf("unknown event: %s %v", ups, err)
	}
	if _, err := Lookup("aider"); err == nil || !strings.Contains(err.Error(), "claude-stream-json") {
		t.Errorf("unknown adapter: %v", err)
	}
}

// Each adapter adds what its format needs, never twice, then the session
// to continue and the prompt.
func TestCommands(t *testing.T) {
	cases := []struct {
		adapter, session string
		base, want       []string
	}{
		{ClaudeStreamJSON, "", []string{"claude", "--model", "x"}, []string{"claude", "--model", "x", "--output-format", "stream-json", "--verbose", "-p", "--", "PROMPT"}},
		{ClaudeStreamJSON, "s", []string{"claude", "--verbose"}, []string{"claude", "--verbose", "--output-format", "stream-json", "--resume", "s", "-p", "--", "PROMPT"}},
		{CodexJSON, "", []string{"codex", "-m", "o3"}, []string{"codex", "-m", "o3", "exec", "--json", "--skip-git-repo-check", "--", "PROMPT"}},
		{CodexJSON, "th", []string{"codex", "exec", "--json"}, []string{"codex", "exec", "--json", "--skip-git-repo-check", "resume", "th", "--", "PROMPT"}},
		{GeminiStreamJSON, "", []string{"gemini", "--yolo"}, []string{"gemini", "--yolo", "--output-format", "stream-json", "--prompt=PROMPT"}},
		{GeminiStreamJSON, "g", []string{"gemini"}, []string{"gemini", "--output-format", "stream-json", "--resume", "g", "--prompt=PROMPT"}},
	}
	for _, c := range cases {
		a, _ := Lookup(c.adapter)
		base := append([]string(nil), c.base...)
		if got := a.Command(base, "PROMPT", c.session); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %v session %q:\n got %q\nwant %q", c.adapter, c.base, c.session, got, c.want)
		}
		if !reflect.DeepEqual(base, c.base) {
			t.Errorf("%s changed the caller's command: %q", c.adapter, base)
		}
	}
}
