package fakemodel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// post sends body to srv and returns the status and the body (for SSE,
// the data lines joined by newlines).
func post(t *testing.T, srv *Server, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
			continue
		}
		out = append(out, line)
	}
	return resp.StatusCode, strings.Join(out, "\n")
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Command
	}{
		{"read /a/b.txt", Command{Op: "read", Path: "/a/b.txt", Shell: "cat /a/b.txt"}},
		{"write /a/b.txt hello there", Command{Op: "write", Path: "/a/b.txt", Text: "hello there"}},
		{"bash ls -l", Command{Op: "bash", Shell: "ls -l"}},
		{"<context>\nslow bash sleep 1", Command{Op: "bash", Shell: "sleep 1", Slow: true}},
		{"plan the work", Command{Op: "plan", Shell: "echo hi"}},
		{"what is slowness? hello", Command{Op: "echo", Shell: "echo hi"}},
		{"slow", Command{Op: "echo", Shell: "echo hi", Slow: true}},
		{`tool mcp__task__lookup {"key":"blue"}`, Command{Op: "tool", Shell: "echo hi", Tool: "mcp__task__lookup", Args: map[string]any{"key": "blue"}}},
		{"tool lookup", Command{Op: "tool", Shell: "echo hi", Tool: "lookup", Args: map[string]any{}}},
		{"tool lookup {not json", Command{Op: "echo", Shell: "echo hi"}},
	} {
		if got := ParseCommand(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCommand(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestAnthropicScriptsFromState checks that the reply depends on the
// conversation, not on the order of calls: a side call in between, or the
// same request twice, changes nothing.
func TestAnthropicScriptsFromState(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{})
	defer srv.Close()
	first := `{"model":"m","stream":true,"tools":[{"name":"Bash"},{"name":"Read"}],"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"read /tmp/x"}]}]}`
	side := `{"model":"haiku","stream":true,"messages":[{"role":"user","content":"Command: echo hi"}]}`
	result := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"read /tmp/x"},{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"file body"}]}]}]}`
	for _, body := range []string{first, side, first, result, side} {
		if code, _ := post(t, srv, "/v1/messages?beta=true", body); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	_, out := post(t, srv, "/v1/messages?beta=true", first)
	for _, want := range []string{`"type":"thinking_delta"`, `"name":"Read"`, `"partial_json"`, `"stop_reason":"tool_use"`, "message_stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("tool-call stream lacks %s:\n%s", want, out)
		}
	}
	_, out = post(t, srv, "/v1/messages", strings.Replace(result, `"stream":true`, `"stream":false`, 1))
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal([]byte(out), &msg); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != FinalPrefix+"file body" {
		t.Errorf("final answer %s (%v)", out, err)
	}
	if _, out = post(t, srv, "/v1/messages/count_tokens", `{}`); !strings.Contains(out, `"input_tokens":123`) {
		t.Errorf("count_tokens: %s", out)
	}
	var replies []string
	for _, r := range srv.Requests() {
		replies = append(replies, r.Reply)
	}
	want := "tool:Read side tool:Read final side tool:Read final count_tokens"
	if got := strings.Join(replies, " "); got != want {
		t.Errorf("replies:\n got %s\nwant %s", got, want)
	}
	if r := srv.Requests()[0]; r.Path != "/v1/messages" || r.Query != "beta=true" || r.Prompt != "read /tmp/x" || !strings.Contains(string(r.Body), "system-reminder") {
		t.Errorf("recorded request = %+v", r)
	}
}

func TestAnthropicUsesACPTools(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{})
	defer srv.Close()
	_, out := post(t, srv, "/v1/messages", `{"stream":true,"tools":[{"name":"Bash"},{"name":"mcp__acp__Bash"}],"messages":[{"role":"user","content":"bash ls"}]}`)
	if !strings.Contains(out, `"name":"mcp__acp__Bash"`) || !strings.Contains(out, `timeout`) {
		t.Errorf("want mcp__acp__Bash with a timeout:\n%s", out)
	}
}

// TestAnthropicLoadsDeferredTools checks the turn of a "tool NAME" prompt
// whose tool Claude Code defers: ToolSearch loads it first, its result is
// followed by the call of the tool (now offered), whose result gets the
// final answer; the auto mode's harm grading is answered none.
func TestAnthropicLoadsDeferredTools(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{})
	defer srv.Close()
	prompt := `{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"tool mcp__task__lookup {\"key\":\"blue\"}"}]}`
	search := `{"role":"assistant","content":[{"type":"tool_use","id":"s1","name":"ToolSearch","input":{}}]}`
	loaded := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"s1","content":[{"type":"tool_reference","tool_name":"mcp__task__lookup"}]},{"type":"text","text":"Tool loaded."}]}`
	call := `{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"mcp__task__lookup","input":{}}]}`
	answer := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"mcp-value-of-blue"}]}]}`
	deferred := `"tools":[{"name":"Bash"},{"name":"ToolSearch"}]`
	offered := `"tools":[{"name":"Bash"},{"name":"ToolSearch"},{"name":"mcp__task__lookup","defer_loading":true}]`
	for _, tc := range []struct{ body, want string }{
		{`{"stream":false,` + deferred + `,"messages":[` + prompt + `]}`, `"name":"ToolSearch","input":{"max_results":1,"query":"select:mcp__task__lookup"}`},
		{`{"stream":false,` + offered + `,"messages":[` + prompt + `,` + search + `,` + loaded + `]}`, `"name":"mcp__task__lookup","input":{"key":"blue"}`},
		{`{"stream":false,` + offered + `,"messages":[` + prompt + `,` + search + `,` + loaded + `,` + call + `,` + answer + `]}`, FinalPrefix + "mcp-value-of-blue"},
		// A search that did not load the tool ends the turn.
		{`{"stream":false,` + deferred + `,"messages":[` + prompt + `,` + search + `,` + loaded + `]}`, FinalPrefix},
		{`{"stream":false,"messages":[{"role":"user","content":"Grade it. Respond with <severity>N</severity> ONLY."}]}`, `"text":"\u003cseverity\u003e0\u003c/severity\u003e"`},
	} {
		if _, out := post(t, srv, "/v1/messages", tc.body); !strings.Contains(out, tc.want) {
			t.Errorf("reply to %s\n lacks %s:\n%s", tc.body, tc.want, out)
		}
	}
}

func TestGeminiScripts(t *testing.T) {
	t.Parallel()
	srv := Start(Gemini, Options{})
	defer srv.Close()
	tools := `"tools":[{"functionDeclarations":[{"name":"run_shell_command"},{"name":"read_file"},{"name":"write_file"}]}]`
	_, out := post(t, srv, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"write /tmp/f new text"}]}],`+tools+`}`)
	lines := strings.Split(out, "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"thought":true`) || !strings.Contains(lines[2], `"functionCall":{"name":"write_file","args":{"content":"new text","file_path":"/tmp/f"}}`) ||
		!strings.Contains(lines[2], `"finishReason":"STOP"`) {
		t.Errorf("tool call stream:\n%s", out)
	}
	_, out = post(t, srv, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"bash ls"}]},{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{"output":"a b"}}}]}],`+tools+`}`)
	if !strings.Contains(out, FinalPrefix+"a b") {
		t.Errorf("final: %s", out)
	}
	// The router asks for JSON from a schema.
	_, out = post(t, srv, "/v1beta/models/flash-lite:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"bash ls"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"complexity_reasoning":{"type":"string"},"complexity_score":{"type":"integer","minimum":1,"maximum":100}}}}}`)
	var resp struct {
		Candidates []struct {
			Content struct {
				Parts []struct{ Text string } `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	var router struct {
		Score int `json:"complexity_score"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Candidates) != 1 ||
		json.Unmarshal([]byte(resp.Candidates[0].Content.Parts[0].Text), &router) != nil || router.Score < 1 {
		t.Errorf("router answer: %s", out)
	}
	if _, out = post(t, srv, "/v1beta/models/m:countTokens", `{}`); !strings.Contains(out, "totalTokens") {
		t.Errorf("countTokens: %s", out)
	}
}

func TestOpenAIResponsesScripts(t *testing.T) {
	t.Parallel()
	srv := Start(OpenAIResponses, Options{})
	defer srv.Close()
	tools := `"tools":[{"type":"function","name":"exec_command"},{"type":"function","name":"apply_patch"},{"type":"web_search"}]`
	user := `{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"write /tmp/f hi"}]}`
	_, out := post(t, srv, "/v1/responses", `{"model":"m","stream":true,"input":[`+user+`],`+tools+`}`)
	for _, want := range []string{`"type":"response.reasoning_summary_text.delta"`, `"name":"apply_patch"`, `Add File: /tmp/f`, `"type":"response.completed"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stream lacks %s:\n%s", want, out)
		}
	}
	_, out = post(t, srv, "/v1/responses", `{"model":"m","stream":true,"input":[`+user+`,{"type":"function_call","call_id":"c","name":"apply_patch","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"Success"}],`+tools+`}`)
	if !strings.Contains(out, FinalPrefix+"Success") {
		t.Errorf("final: %s", out)
	}
}

// TestSlowEndsOnClose checks that a slow reply gives up when the server
// closes, so that Close never hangs.
func TestSlowEndsOnClose(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{Slow: time.Minute})
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json",
			strings.NewReader(`{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"slow bash ls"}]}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	for len(srv.Requests()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	srv.Close()
	<-done
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %s", d)
	}
	if r := srv.Requests(); len(r) != 1 || r[0].Reply != "cancelled" {
		t.Errorf("requests = %+v", r)
	}
}

func TestRequestLimit(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{MaxRequests: 2})
	defer srv.Close()
	var codes []int
	for i := 0; i < 3; i++ {
		code, _ := post(t, srv, "/v1/messages/count_tokens", `{}`)
		codes = append(codes, code)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != http.StatusServiceUnavailable || len(srv.Requests()) != 2 {
		t.Errorf("codes %v, %d recorded", codes, len(srv.Requests()))
	}
}

// streamed joins the text and tool input deltas of an Anthropic stream.
func streamed(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		var ev struct {
			Delta struct {
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil {
			b.WriteString(ev.Delta.Text + ev.Delta.PartialJSON)
		}
	}
	return b.String()
}

func TestParseScript(t *testing.T) {
	t.Parallel()
	s := ParseScript("<context>\nslow tool Write {\"file_path\":\"a\"}\n  then bash cat {{prev.file_path}}\nthen read b\nthen nothing to do")
	want := []string{"<context>\nslow tool Write {\"file_path\":\"a\"}", "bash cat {{prev.file_path}}", "read b", "nothing to do"}
	if !reflect.DeepEqual(s.Steps, want) {
		t.Fatalf("steps %q, want %q", s.Steps, want)
	}
	inputs := map[string]string{"file_path": "/w/a.txt"}
	lookup := func(k string) (string, bool) { v, ok := inputs[k]; return v, ok }
	for i, w := range []Command{
		{Op: "tool", Shell: "echo hi", Tool: "Write", Args: map[string]any{"file_path": "a"}, Slow: true},
		{Op: "bash", Shell: "cat /w/a.txt"},
		{Op: "read", Path: "b", Shell: "cat b"},
		{Op: "echo", Shell: "echo hi"},
	} {
		got, ok, err := s.Step(i, lookup)
		if !ok || err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("step %d = %+v, %v, %v; want %+v", i, got, ok, err, w)
		}
	}
	if _, ok, _ := s.Step(4, lookup); ok {
		t.Error("a step past the script's end")
	}
	delete(inputs, "file_path")
	if _, ok, err := s.Step(1, lookup); !ok || err == nil || !strings.Contains(err.Error(), `"file_path"`) {
		t.Errorf("unresolved step: %v, %v", ok, err)
	}
	if got := ParseScript("bash ls").Steps; len(got) != 1 || got[0] != "bash ls" {
		t.Errorf("a one-command prompt's script: %q", got)
	}
}

// TestAnthropicPlaysAScript checks that a scripted prompt's calls come one
// a request, chosen by the tool results the turn holds, that a step's
// {{prev.KEY}} comes from the conversation's earlier tool calls (an earlier
// turn's included), and that the final answer follows the last step.
func TestAnthropicPlaysAScript(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{})
	defer srv.Close()
	tools := `"tools":[{"name":"Bash"},{"name":"Read"},{"name":"Write"},{"name":"Edit"}]`
	prompt := `{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"write notes.txt one\nthen tool Edit {\"file_path\":\"notes.txt\",\"old_string\":\"one\",\"new_string\":\"two\"}\nthen bash cat {{prev.file_path}}"}]}`
	call := func(id, name, input string) string {
		return `{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}]}`
	}
	result := func(id, text string) string {
		return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"` + text + `"},{"type":"text","text":"<system-reminder>r</system-reminder>"}]}`
	}
	msgs := []string{prompt}
	body := func() string { return `{"stream":true,` + tools + `,"messages":[` + strings.Join(msgs, ",") + `]}` }
	for i, want := range []string{`"name":"Write"`, `"name":"Edit"`, `{"command":"cat notes.txt"`, FinalPrefix + "two"} {
		_, out := post(t, srv, "/v1/messages", body())
		if out += "\n" + streamed(out); !strings.Contains(out, want) {
			t.Fatalf("request %d: want %s in\n%s", i+1, want, out)
		}
		switch i {
		case 0:
			msgs = append(msgs, call("t1", "Write", `{"file_path":"notes.txt","content":"one"}`), result("t1", "written"))
		case 1:
			msgs = append(msgs, call("t2", "Edit", `{"file_path":"notes.txt","old_string":"one","new_string":"two"}`), result("t2", "edited"))
		case 2:
			msgs = append(msgs, call("t3", "Bash", `{"command":"cat notes.txt"}`), result("t3", "two"))
		}
	}
	// A next turn names the file of the first: taken from the history.
	msgs = append(msgs, `{"role":"assistant","content":[{"type":"text","text":"done"}]}`,
		`{"role":"user","content":[{"type":"text","text":"read {{prev.file_path}}"}]}`)
	if _, out := post(t, srv, "/v1/messages", body()); !strings.Contains(out, `"name":"Read"`) || !strings.Contains(streamed(out), `{"file_path":"notes.txt"}`) {
		t.Errorf("second turn: want a Read of notes.txt:\n%s", out)
	}
	// Without the history, the same prompt cannot be played.
	_, out := post(t, srv, "/v1/messages", `{"stream":false,`+tools+`,"messages":[{"role":"user","content":"read {{prev.file_path}}"}]}`)
	if !strings.Contains(out, Unresolved) || strings.Contains(out, "tool_use") {
		t.Errorf("a step with no history: %s", out)
	}
	var replies []string
	for _, r := range srv.Requests() {
		replies = append(replies, r.Reply)
	}
	if got, want := strings.Join(replies, " "), "tool:Write tool:Edit tool:Bash final tool:Read unresolved"; got != want {
		t.Errorf("replies:\n got %s\nwant %s", got, want)
	}
}

// TestAnthropicAnswersSuggestionModeInText checks Claude Code's after-turn
// request for what the user might type next (as claude-agent-acp 0.101.0
// sends it: a finished turn, then the suggestion prompt as a string, with
// the tools offered): the answer is plain text, not a tool call.
func TestAnthropicAnswersSuggestionModeInText(t *testing.T) {
	t.Parallel()
	srv := Start(Anthropic, Options{})
	defer srv.Close()
	suggest := SuggestionMarker + ` Suggest what the user might naturally type next into Claude Code.]\n\nFIRST: Look at the user's recent messages and original request.\n\nReply with ONLY the suggestion, no quotes or explanation.`
	body := `{"model":"claude-opus-5-5","stream":%s,"tools":[{"name":"Bash"},{"name":"Read"},{"name":"Write"}],"messages":[` +
		`{"role":"user","content":[{"type":"text","text":"bash ls"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"` + FinalPrefix + `a.txt"}]},` +
		`{"role":"system","content":"x"},` +
		`{"role":"user","content":"` + suggest + `"}]}`
	_, out := post(t, srv, "/v1/messages", fmt.Sprintf(body, "true"))
	if strings.Contains(out, "tool_use") || !strings.Contains(out, `"stop_reason":"end_turn"`) || streamed(out) != SuggestionReply {
		t.Errorf("streamed suggestion: want text and no tool call:\n%s", out)
	}
	_, out = post(t, srv, "/v1/messages", fmt.Sprintf(body, "false"))
	var msg struct {
		Content []struct{ Type, Text string } `json:"content"`
		Stop    string                        `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(out), &msg); err != nil || len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != SuggestionReply || msg.Stop != "end_turn" {
		t.Errorf("suggestion %s (%v), want the text %q alone", out, err, SuggestionReply)
	}
	var replies []string
	for _, r := range srv.Requests() {
		replies = append(replies, r.Reply)
	}
	if got := strings.Join(replies, " "); got != "suggestion suggestion" {
		t.Errorf("replies %s, want suggestion suggestion", got)
	}
}
