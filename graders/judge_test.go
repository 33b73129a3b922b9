package graders

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/schemas"
)

const secret = "sk-test-SECRET-0123456789"

// fakeLLM is an httptest server that records requests and answers each
// with the next scripted reply.
type fakeLLM struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []*http.Request
	bodies  []map[string]any
	replies []fakeReply
}

type fakeReply struct {
	status int
	header map[string]string
	body   string
}

func newFakeLLM(t *testing.T, replies ...fakeReply) *fakeLLM {
	f := &fakeLLM{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %s", b)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, r)
		f.bodies = append(f.bodies, body)
		n := len(f.reqs)
		f.mu.Unlock()
		if n > len(f.replies) {
			t.Errorf("unexpected request %d", n)
			w.WriteHeader(500)
			return
		}
		rep := f.replies[n-1]
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		if rep.status == 0 {
			rep.status = 200
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func openAIReply(content string) fakeReply {
	return fakeReply{body: string(mustJSON(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
	}))}
}

func anthropicReply(input any) fakeReply {
	return fakeReply{body: string(mustJSON(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "stop_reason": "tool_use",
		"content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "grade", "input": input}},
		"usage":   map[string]any{"input_tokens": 70, "output_tokens": 15},
	}))}
}

func envFunc(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func noSecret(t *testing.T, r schemas.GraderResult) {
	t.Helper()
	if b := mustJSON(r); strings.Contains(string(b), secret) {
		t.Fatalf("the API key leaked into the result: %s", b)
	}
}

// Seed 002's quality judge against OpenAI chat completions: exact request
// shape, 429 then success, usage recorded, key kept out of the result.
func TestJudgeOpenAI(t *testing.T) {
	srv := newFakeLLM(t,
		fakeReply{status: 429, header: map[string]string{"Retry-After": "0"}, body: `{"error":{"message":"rate limited"}}`},
		openAIReply(`{"score": 0.8, "reasoning": "good <answer> & clear"}`))
	g := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": secret})})
	if g.Name() != "judge:"+fx("seed002/quality-judge.yaml") {
		t.Errorf("name %q", g.Name())
	}
	rec := record("a < b && c", "")
	r := grade(t, g, rec)
	wantOK(t, r, true, 0.8)
	noSecret(t, r)
	if r.Reasoning != "good <answer> & clear" {
		t.Errorf("reasoning %q", r.Reasoning)
	}
	if len(srv.reqs) != 2 {
		t.Fatalf("%d requests, want 2 (429 then success)", len(srv.reqs))
	}
	req, body := srv.reqs[1], srv.bodies[1]
	if req.Method != "POST" || req.URL.Path != "/v1/chat/completions" {
		t.Errorf("%s %s", req.Method, req.URL.Path)
	}
	if req.Header.Get("Authorization") != "Bearer "+secret || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", req.Header)
	}
	if body["model"] != "gpt-4o-mini" || body["temperature"] != 0.0 || body["max_tokens"] != 256.0 {
		t.Errorf("body %v", body)
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	m0 := msgs[0].(map[string]any)
	content := m0["content"].(string)
	if m0["role"] != "user" || !strings.Contains(content, "## Assistant's Response\na < b && c\n") ||
		!strings.Contains(content, `"tool_call_id": "call_1"`) || !strings.HasPrefix(content, "You are evaluating an AI assistant's response.") {
		t.Errorf("prompt not rendered raw:\n%s", content)
	}
	rf := body["response_format"].(map[string]any)
	js := rf["json_schema"].(map[string]any)
	wantSchema := map[string]any{"type": "object", "properties": map[string]any{
		"score": map[string]any{"type": "number", "minimum": 0.0, "maximum": 1.0}, "reasoning": map[string]any{"type": "string"}},
		"required": []any{"score"}}
	if rf["type"] != "json_schema" || js["name"] != "grader_result" || !reflect.DeepEqual(js["schema"], wantSchema) {
		t.Errorf("response_format %v", rf)
	}
	var usage map[string]any
	json.Unmarshal(r.Usage, &usage)
	if usage["inputTokens"] != 50.0 || usage["outputTokens"] != 10.0 || usage["calls"] != 1.0 {
		t.Errorf("usage %s", r.Usage)
	}
	if r.Outcome["score"] != 0.8 {
		t.Errorf("outcome %v", r.Outcome)
	}
}

// An invalid reply is retried once with the validation errors.
func TestJudgeInvalidThenValid(t *testing.T) {
	srv := newFakeLLM(t,
		openAIReply(`{"score": 7, "reasoning": "way too high"}`),
		openAIReply(`{"score": 0.2, "reasoning": "fixed"}`))
	g := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": secret})})
	r := grade(t, g, record("x", ""))
	wantOK(t, r, false, 0.2)
	msgs := srv.bodies[1]["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("retry messages %v", msgs)
	}
	a := msgs[1].(map[string]any)
	u := msgs[2].(map[string]any)
	if a["role"] != "assistant" || a["content"] != `{"score": 7, "reasoning": "way too high"}` || u["role"] != "user" ||
		!strings.Contains(u["content"].(string), "/score") || !strings.Contains(u["content"].(string), "maximum") {
		t.Errorf("retry conversation %v", msgs)
	}
	var usage map[string]any
	json.Unmarshal(r.Usage, &usage)
	if usage["calls"] != 2.0 || usage["inputTokens"] != 100.0 {
		t.Errorf("usage %s", r.Usage)
	}

	// Two invalid replies: grader_invalid.
	srv2 := newFakeLLM(t, openAIReply(`not json`), openAIReply(`{"reasoning": "no score"}`))
	g2 := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv2.URL + "/v1", "OPENAI_API_KEY": secret})})
	wantErr(t, grade(t, g2, record("x", "")), schemas.ErrGraderInvalid, "missing property 'score'")
}

// Errors from the API never carry the key, even when the server echoes it.
func TestJudgeErrorsHideKey(t *testing.T) {
	srv := newFakeLLM(t, fakeReply{status: 401, body: `{"error":"bad key ` + secret + `"}`})
	g := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": secret})})
	r := grade(t, g, record("x", ""))
	wantErr(t, r, schemas.ErrGraderError, "HTTP 401")
	noSecret(t, r)
	if len(srv.reqs) != 1 {
		t.Errorf("a 401 must not be retried (%d requests)", len(srv.reqs))
	}
	// 5xx until the budget runs out.
	five := fakeReply{status: 503, header: map[string]string{"Retry-After": "0"}, body: `{}`}
	srv2 := newFakeLLM(t, five, five, five, five, five)
	g2 := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv2.URL + "/v1", "OPENAI_API_KEY": secret})})
	wantErr(t, grade(t, g2, record("x", "")), schemas.ErrGraderError, "HTTP 503")
	if len(srv2.reqs) != 5 {
		t.Errorf("%d requests, want 5", len(srv2.reqs))
	}
}

func TestJudgeTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	g := load(t, fx("seed002/quality-judge.yaml"), Options{Timeout: 200 * time.Millisecond, Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": secret})})
	start := time.Now()
	wantErr(t, grade(t, g, record("x", "")), schemas.ErrGraderTimeout, "did not answer within 200ms")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

// Seed 002's tool-usage judge against Anthropic messages: forced tool use,
// exact headers and body, retry through a tool_result error.
func TestJudgeAnthropic(t *testing.T) {
	srv := newFakeLLM(t,
		anthropicReply(map[string]any{"score": 1}),
		anthropicReply(map[string]any{"score": 1, "reasoning": "right tool"}))
	g := load(t, fx("seed002/tool-usage-judge.json"), Options{Getenv: envFunc(map[string]string{
		"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": secret})})
	rec := record("Read a.go", "")
	rec.Metadata["tools"] = []any{"Read", "Write"}
	r := grade(t, g, rec)
	wantOK(t, r, true, 1)
	noSecret(t, r)
	if r.Reasoning != "right tool" {
		t.Errorf("reasoning %q", r.Reasoning)
	}
	req, body := srv.reqs[0], srv.bodies[0]
	if req.URL.Path != "/v1/messages" || req.Header.Get("x-api-key") != secret || req.Header.Get("anthropic-version") != "2023-06-01" ||
		req.Header.Get("Authorization") != "" || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s headers %v", req.URL.Path, req.Header)
	}
	if body["model"] != "claude-haiku-4-5" || body["max_tokens"] != 256.0 || body["temperature"] != 0.0 {
		t.Errorf("body %v", body)
	}
	tools := body["tools"].([]any)
	tool := tools[0].(map[string]any)
	if tool["name"] != "grade" || tool["input_schema"].(map[string]any)["required"] == nil {
		t.Errorf("tools %v", tools)
	}
	if tc := body["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != "grade" {
		t.Errorf("tool_choice %v", tc)
	}
	prompt := body["messages"].([]any)[0].(map[string]any)["content"].(string)
	if !strings.Contains(prompt, "## User Request\nWhat is 15 + 27?\n") || !strings.Contains(prompt, `"name": "Read"`) ||
		!strings.Contains(prompt, "## Available Tools\n[\n  \"Read\",") {
		t.Errorf("prompt:\n%s", prompt)
	}
	// The first reply lacked reasoning (required): retried via tool_result.
	msgs := srv.bodies[1]["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("retry messages %v", msgs)
	}
	res := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	if res["type"] != "tool_result" || res["tool_use_id"] != "toolu_1" || res["is_error"] != true ||
		!strings.Contains(res["content"].(string), "reasoning") {
		t.Errorf("tool_result %v", res)
	}
	var usage map[string]any
	json.Unmarshal(r.Usage, &usage)
	if usage["inputTokens"] != 140.0 || usage["outputTokens"] != 30.0 {
		t.Errorf("usage %s", r.Usage)
	}
}

func TestJudgeLoadErrors(t *testing.T) {
	env := Options{Getenv: envFunc(map[string]string{"OPENAI_API_KEY": secret})}
	cases := []struct{ name, text, field, msg string }{
		{"typo.yaml", "type: llm-judge\nmodel: m\nprompt: 'Rate {{respons}}'\n", "prompt", "unknown variable {{respons}}"},
		{"dotted.yaml", "type: llm-judge\nmodel: m\nprompt: 'Rate {{response.text}}'\n", "prompt", "unknown variable"},
		{"nomodel.yaml", "type: llm-judge\nprompt: 'Rate {{response}}'\n", "model", "missing"},
		{"temp.yaml", "type: llm-judge\nmodel: m\ntemperature: hot\nprompt: '{{response}}'\n", "temperature", "must be a number"},
		{"schema.json", `{"type":"llm-judge","model":"m","prompt":"{{response}}","outputSchema":{"type":"frobnicate"}}`, "outputSchema", "invalid JSON Schema"},
		{"prov.yaml", "type: llm-judge\nmodel: m\nprovider: gemini\nprompt: '{{response}}'\n", "provider", "unknown provider"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.name, c.text)
			_, err := Load(p, env)
			wantConfigErr(t, err, p, c.field, c.msg)
		})
	}
	// No key and no explicit base URL.
	p := writeConfig(t, "nokey.yaml", "type: llm-judge\nmodel: m\napiKeyEnv: MY_KEY\nprompt: '{{response}}'\n")
	_, err := Load(p, Options{Getenv: envFunc(nil)})
	wantConfigErr(t, err, p, "apiKeyEnv", "MY_KEY is not set")
}

func wantConfigErr(t *testing.T, err error, file, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error about %s", field)
	}
	s := err.Error()
	if !strings.Contains(s, file) || !strings.Contains(s, `field "`+field+`"`) || !strings.Contains(s, msg) {
		t.Fatalf("error %q: want file %s, field %q, %q", s, file, field, msg)
	}
}

// The agentv target proxy: budget, token, and the key kept from the grader.
func TestTargetProxy(t *testing.T) {
	needPython(t)
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		msgs := body["messages"].([]any)
		if r.URL.Path != "/chat/completions" || len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" || body["response_format"] != nil {
			t.Errorf("proxy request %s %v", r.URL.Path, body)
		}
		io.WriteString(w, openAIReply(`{"relevant": true}`).body)
	}))
	defer srv.Close()
	t.Setenv("JUDGE_KEY", secret) // in the harness's env: must not reach the grader
	g := load(t, fx("proxy/target.yaml"), Options{Getenv: envFunc(map[string]string{"OPENAI_BASE_URL": srv.URL, "JUDGE_KEY": secret})})
	r := grade(t, g, record("an answer", ""))
	for _, c := range r.Checks {
		if !c.Pass {
			t.Errorf("check %q failed: %s", c.Text, c.Reason)
		}
	}
	wantOK(t, r, true, 1)
	noSecret(t, r)
	if len(auth) != 1 || auth[0] != "Bearer "+secret {
		t.Errorf("upstream calls %v", len(auth))
	}
	if tp := r.Outcome["targetProxy"].(map[string]any); tp["calls"] != 1 || tp["refused"] != 1 {
		t.Errorf("outcome %v", r.Outcome)
	}
}

// Seed 002's combined grader: 0.6 judge + 0.2 format + 0.2 length.
func TestCompositeSeed002(t *testing.T) {
	srv := newFakeLLM(t, openAIReply(`{"score": 0.5, "reasoning": "ok"}`))
	g := load(t, fx("seed002/combined.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": secret})})
	// Valid JSON (format 1.0), 60 chars (length 1.0): 0.6*0.5 + 0.2 + 0.2 = 0.7
	out := `{"answer": 42, "explanation": "fifteen plus twenty-seven"}`
	r := grade(t, g, record(out, ""))
	if r.Error != nil || !r.Pass || r.Score < 0.7-1e-9 || r.Score > 0.7+1e-9 {
		t.Fatalf("got %+v", r)
	}
	if subs := r.Outcome["graders"].([]schemas.GraderResult); len(subs) != 3 || subs[0].Score != 0.5 {
		t.Errorf("subs %+v", subs)
	}
	if len(r.Checks) != 3 || *r.Checks[0].Score != 0.5 {
		t.Errorf("checks %+v", r.Checks)
	}
	// Per-grader weight and a configured threshold of 0.7.
	c := load(t, fx("seed002/combined-weight.yaml"), Options{})
	wantOK(t, grade(t, c, record("not json", "")), false, 0.5)
	wantOK(t, grade(t, c, record(`{"a":1}`, "")), true, 1)
	// --threshold overrides the file's.
	th := 0.4
	c = load(t, fx("seed002/combined-weight.yaml"), Options{Threshold: &th})
	wantOK(t, grade(t, c, record("not json", "")), true, 0.5)
}

func TestCompositeSubError(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/c.yaml"
	crash, _ := absFx("errors/crash.sh")
	ok, _ := absFx("errors/ok.sh")
	os.WriteFile(p, []byte("graders: ["+crash+", "+ok+"]\nweights: [0.5, 0.5]\n"), 0o644)
	r := grade(t, load(t, p, Options{}), record("x", ""))
	wantErr(t, r, schemas.ErrGraderError, "1 of 2 graders failed")
}

func absFx(p string) (string, error) {
	wd, err := os.Getwd()
	return wd + "/" + fx(p), err
}

// Config errors name the file and the field.
func TestConfigErrors(t *testing.T) {
	js := "{type: script, script: 'function grade(i){return 1}'"
	cases := []struct{ name, text, field, msg string }{
		{"sum.yaml", "graders: [" + js + "}, " + js + "}]\nweights: [0.5, 0.4]\n", "weights", "must sum to 1, they sum to 0.9"},
		{"count.yaml", "graders: [" + js + "}]\nweights: [0.5, 0.5]\n", "weights", "2 entries for 1 graders"},
		{"each.yaml", "graders: [" + js + ", weight: 0.7}, " + js + ", weight: 0.2}]\n", "graders[*].weight", "must sum to 1"},
		{"missingw.yaml", "graders: [" + js + ", weight: 1}, " + js + "}]\n", "graders[1].weight", "missing"},
		{"wtype.yaml", "graders: [" + js + ", weight: heavy}]\n", "graders[0].weight", "must be a number"},
		{"nested.yaml", "graders:\n  - type: script\n    command: 42\n", "graders[0].command", "must be an array"},
		{"unknown.json", `{"type":"script","script":"function grade(){return 1}","scirpt":1}`, "scirpt", "unknown field"},
		{"type.yaml", "type: regex\n", "type", `"regex" is an assertion, not a grader type: give it to an assert grader, {type: assert, assert: [{type: regex, ...}]}`},
		{"typo.yaml", "type: scrpt\n", "type", `unknown grader type "scrpt": did you mean "script"? (want llm-judge, script, tests, assert, composite, cases or file)`},
		{"typo2.yaml", "type: contans\n", "type", `unknown grader type "contans": did you mean the assertion "contains", in an assert grader`},
		{"nope.yaml", "type: nope\n", "type", `unknown grader type "nope" (want llm-judge,`},
		{"nothing.yaml", "name: x\n", "type", "missing"},
		{"both.yaml", "type: script\ncommand: [ls]\nscript: 'function grade(){return 1}'\n", "script", "not both"},
		{"cmd.yaml", "type: script\ncommand: [./no-such-grader]\n", "command", "cannot run"},
		{"thr.yaml", "threshold: 2\ngraders: [" + js + "}]\n", "threshold", "between 0 and 1"},
		{"timeout.yaml", "type: script\ntimeout: soon\nscript: 'function grade(){return 1}'\n", "timeout", "duration"},
		{"jsbad.yaml", "type: script\nscript: 'function grade( {'\n", "script", "SyntaxError"},
		{"target.yaml", "type: script\ncommand: [ls]\ntarget: {max_calls: 0, model: m}\n", "target.max_calls", "positive integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.name, c.text)
			_, err := Load(p, Options{Getenv: envFunc(map[string]string{"OPENAI_API_KEY": "k"})})
			wantConfigErr(t, err, p, c.field, c.msg)
		})
	}
	// Syntax errors name the file (and the line for JSON).
	p := writeConfig(t, "bad.json", "{\n  \"type\": \"script\",\n  \"script\": oops\n}")
	if _, err := Load(p, Options{}); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("got %v", err)
	}
	p = writeConfig(t, "bad.yaml", "type: script\n  script: [\n")
	if _, err := Load(p, Options{}); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "invalid YAML") {
		t.Errorf("got %v", err)
	}
}

func TestShellCommandString(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	p := writeConfig(t, "s.yaml", "type: script\ncommand: 'cat >/dev/null; echo \"{\\\"score\\\": 0.6}\"'\n")
	wantOK(t, grade(t, load(t, p, Options{}), record("x", "")), true, 0.6)
}

// TestJudgeDefects: the JSON variables reach the prompt unescaped, and a
// retry sends the reply's content back whole, block kinds the judge does
// not know (thinking) included.
func TestJudgeDefects(t *testing.T) {
	first := fakeReply{body: string(mustJSON(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
		"content": []any{
			map[string]any{"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "grade", "input": map[string]any{"score": 5}},
		},
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	}))}
	srv := newFakeLLM(t, first, anthropicReply(map[string]any{"score": 1, "pass": true}))
	cfg := writeConfig(t, "j.json", string(mustJSON(map[string]any{
		"type": "llm-judge", "provider": "anthropic", "model": "m",
		"prompt": "Calls: {{toolCalls}} Said: {{response}}",
	})))
	g := load(t, cfg, Options{Getenv: envFunc(map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": secret})})
	rec := record("a <b> & c", "")
	rec.Trajectory = append(rec.Trajectory, schemas.Step{Type: schemas.StepToolCall, StepID: "s9", ToolCallID: "t1", Name: "Run <x> & y",
		Input: json.RawMessage(`{"cmd":"a < b && c"}`), Status: "completed"})
	r := grade(t, g, rec)
	wantOK(t, r, true, 1)
	prompt := srv.bodies[0]["messages"].([]any)[0].(map[string]any)["content"].(string)
	if strings.Contains(prompt, `\u003c`) || strings.Contains(prompt, `\u0026`) || !strings.Contains(prompt, "a < b && c") {
		t.Errorf("JSON variables escaped for HTML in the prompt:\n%s", prompt)
	}
	back := srv.bodies[1]["messages"].([]any)[1].(map[string]any)["content"].([]any)
	if len(back) != 2 || back[0].(map[string]any)["type"] != "thinking" || back[0].(map[string]any)["signature"] != "sig-1" {
		t.Errorf("the retry dropped content blocks: %v", back)
	}
}

// TestTargetWithoutModel: seed 001 writes `target: {max_calls: 10}` and no
// model; it loads (the model defaults, a missing key fails calls, not the
// load).
func TestTargetWithoutModel(t *testing.T) {
	p := writeConfig(t, "t.yaml", "type: script\ncommand: [ls]\ntarget:\n  max_calls: 10 # Default: 50\n")
	if _, err := Load(p, Options{Getenv: envFunc(nil)}); err != nil {
		t.Fatalf("seed 001's target block: %v", err)
	}
	g, err := Load(p, Options{Getenv: envFunc(map[string]string{"AGENTV_TARGET_MODEL": "claude-haiku-4-5"})})
	if err != nil {
		t.Fatal(err)
	}
	if s := unpinned(g).(*script); s.target.maxCalls != 10 || s.target.judge.Model.Model != "claude-haiku-4-5" || s.target.judge.Provider != ProviderAnthropic {
		t.Errorf("target = %+v, model %q", s.target, s.target.judge.Model.Model)
	}
}
