package modelgateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"harness/modelgateway"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// through starts a gateway and a route whose upstream for envVar is the
// fake server.
func through(t testing.TB, envVar, upstream string) (*modelgateway.Gateway, *modelgateway.Route, string) {
	t.Helper()
	g, err := modelgateway.Start(modelgateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	r := g.NewRoute([]string{"agent"}, []string{"PATH=/bin", envVar + "=" + upstream})
	base := ""
	for _, kv := range r.Env {
		if v, ok := strings.CutPrefix(kv, envVar+"="); ok {
			base = v
		}
	}
	if !strings.HasPrefix(base, g.URL+"/") {
		t.Fatalf("route env %v does not point %s at the gateway %s", r.Env, envVar, g.URL)
	}
	return g, r, base
}

func post(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func val(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// checkTokens compares a call's tokens with the wanted ones (-1: absent).
func checkTokens(t *testing.T, c schemas.ModelCall, in, cached, write, out, reason int64) {
	t.Helper()
	got := []int64{val(c.InputTokens), val(c.CachedTokens), val(c.CacheWriteTokens), val(c.OutputTokens), val(c.ReasoningTokens)}
	want := []int64{in, cached, write, out, reason}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s %s tokens (input, cached, cache write, output, reasoning) = %v, want %v", c.Provider, c.API, got, want)
			return
		}
	}
}

const secretKey = "sk-test-SECRET-1234"

const anthropicBody = `{"model":"claude-sonnet-4-5","stream":%s,"max_tokens":100,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"bash ls"}]}`

func TestAnthropicThroughGateway(t *testing.T) {
	fake := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{Usage: &fakemodel.Usage{Input: 11, Cached: 22, CacheWrite: 33, Output: 44}})
	defer fake.Close()
	_, r, base := through(t, "ANTHROPIC_BASE_URL", fake.URL)
	for _, stream := range []string{"true", "false"} {
		status, body := post(t, base+"/v1/messages?beta=true", secretKey, strings.Replace(anthropicBody, "%s", stream, 1))
		if status != 200 || !strings.Contains(body, "toolu_fake") {
			t.Fatalf("stream %s: status %d, body %s", stream, status, body)
		}
	}
	calls := r.Take(time.Now())
	if len(calls) != 2 {
		t.Fatalf("%d calls on the ledger, want 2: %+v", len(calls), calls)
	}
	for i, c := range calls {
		if c.Provider != "anthropic" || c.API != "messages" || c.Model != "claude-sonnet-4-5" || c.Status != 200 || c.Stream != (i == 0) {
			t.Errorf("call %d = %+v", i, c)
		}
		checkTokens(t, c, 11, 22, 33, 44, -1)
		if c.FirstToken == nil || *c.FirstToken > c.Duration || len(c.RequestHash) != 64 {
			t.Errorf("call %d: firstToken %v, duration %d, hash %q", i, c.FirstToken, c.Duration, c.RequestHash)
		}
	}
	// The key reached the provider, and nothing the gateway keeps holds it.
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("x-api-key") != secretKey || reqs[0].Path != "/v1/messages" || reqs[0].Query != "beta=true" {
		t.Fatalf("the provider got %d requests, first %+v", len(reqs), reqs[0])
	}
	b, _ := json.Marshal(calls)
	if strings.Contains(string(b), "SECRET") {
		t.Errorf("the ledger holds the API key: %s", b)
	}
	if len(r.Take(time.Now())) != 0 {
		t.Errorf("calls taken twice")
	}
}

func TestOpenAIResponsesThroughGateway(t *testing.T) {
	fake := fakemodel.Start(fakemodel.OpenAIResponses, fakemodel.Options{Usage: &fakemodel.Usage{Input: 50, Cached: 7, Output: 30, Reasoning: 9}})
	defer fake.Close()
	_, r, base := through(t, "OPENAI_BASE_URL", fake.URL+"/v1")
	for _, stream := range []string{"true", "false"} {
		body := `{"model":"gpt-5","stream":` + stream + `,"tools":[{"type":"function","name":"exec_command"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"bash ls"}]}]}`
		if status, out := post(t, base+"/responses", secretKey, body); status != 200 {
			t.Fatalf("status %d: %s", status, out)
		}
	}
	calls := r.Take(time.Now())
	if len(calls) != 2 {
		t.Fatalf("%d calls, want 2", len(calls))
	}
	for _, c := range calls {
		if c.Provider != "openai" || c.API != "responses" || c.Model != "gpt-5" {
			t.Errorf("call %+v", c)
		}
		checkTokens(t, c, 50, 7, -1, 30, 9)
	}
	if p := fake.Requests()[0].Path; p != "/v1/responses" {
		t.Errorf("provider saw path %q", p)
	}
}

func TestGeminiThroughGateway(t *testing.T) {
	fake := fakemodel.Start(fakemodel.Gemini, fakemodel.Options{Usage: &fakemodel.Usage{Input: 60, Cached: 5, Output: 25, Reasoning: 8}})
	defer fake.Close()
	_, r, base := through(t, "GOOGLE_GEMINI_BASE_URL", fake.URL)
	body := `{"contents":[{"role":"user","parts":[{"text":"bash ls"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`
	for _, u := range []string{"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "/v1beta/models/gemini-2.5-pro:generateContent"} {
		if status, out := post(t, base+u, secretKey, body); status != 200 {
			t.Fatalf("%s: status %d: %s", u, status, out)
		}
	}
	calls := r.Take(time.Now())
	if len(calls) != 2 {
		t.Fatalf("%d calls, want 2", len(calls))
	}
	for i, c := range calls {
		api := []string{"streamGenerateContent", "generateContent"}[i]
		if c.Provider != "gemini" || c.API != api || c.Model != "gemini-2.5-pro" {
			t.Errorf("call %+v", c)
		}
		checkTokens(t, c, 60, 5, -1, 25, 8)
	}
}

func TestChatCompletionsThroughGateway(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c1\",\"model\":\"gpt-4.1\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
		io.WriteString(w, "data: {\"id\":\"c1\",\"model\":\"gpt-4.1\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":16},\"completion_tokens_details\":{\"reasoning_tokens\":3}}}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	_, r, base := through(t, "OPENAI_BASE_URL", up.URL+"/v1")
	if status, _ := post(t, base+"/chat/completions", secretKey, `{"model":"gpt-4.1","stream":true}`); status != 200 {
		t.Fatalf("status %d", status)
	}
	calls := r.Take(time.Now())
	if len(calls) != 1 || calls[0].API != "chat.completions" {
		t.Fatalf("calls %+v", calls)
	}
	checkTokens(t, calls[0], 24, 16, -1, 12, 3)
}

// TestStreamPassesThrough: the agent reads the first event while the
// provider still holds the rest back, so the gateway buffers nothing.
func TestStreamPassesThrough(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n")
	}))
	defer up.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	_, r, base := through(t, "ANTHROPIC_BASE_URL", up.URL)
	resp, err := http.Post(base+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "event: message_start\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "message_delta") {
		t.Fatalf("rest of the stream: %q", rest)
	}
	resp.Body.Close()
	var calls []schemas.ModelCall
	for range 100 { // the handler adds the call just after the body ends
		if calls = r.Take(time.Now()); len(calls) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	checkTokens(t, calls[0], 3, 0, 0, 9, -1)
}

func TestProviderErrorsOnTheLedger(t *testing.T) {
	fake := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{Fail: []int{429, 529, 503}})
	defer fake.Close()
	_, r, base := through(t, "ANTHROPIC_BASE_URL", fake.URL)
	var statuses []int
	for range 4 {
		s, _ := post(t, base+"/v1/messages", secretKey, strings.Replace(anthropicBody, "%s", "true", 1))
		statuses = append(statuses, s)
	}
	if statuses[0] != 429 || statuses[1] != 529 || statuses[2] != 503 || statuses[3] != 200 {
		t.Fatalf("the agent saw %v", statuses)
	}
	calls := r.Take(time.Now())
	if len(calls) != 4 {
		t.Fatalf("%d calls", len(calls))
	}
	for i, want := range []string{schemas.ModelErrRateLimit, schemas.ModelErrOverloaded, schemas.ModelErrServer} {
		if calls[i].Error == nil || calls[i].Error.Kind != want {
			t.Errorf("call %d error %+v, want %s", i, calls[i].Error, want)
		}
	}
	if calls[3].Error != nil {
		t.Errorf("the last call failed: %+v", calls[3].Error)
	}
}

func TestUnreachableProvider(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	url := up.URL
	up.Close()
	_, r, base := through(t, "ANTHROPIC_BASE_URL", url)
	if s, _ := post(t, base+"/v1/messages", secretKey, `{"model":"m"}`); s != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", s)
	}
	calls := r.Take(time.Now())
	if len(calls) != 1 || calls[0].Error == nil || calls[0].Error.Kind != schemas.ModelErrConnection {
		t.Fatalf("calls %+v", calls)
	}
}

func TestRouteRewritesArgvAndDefaults(t *testing.T) {
	g, err := modelgateway.Start(modelgateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := g.NewRoute([]string{"codex-acp", "-c", `model_providers.fake={name="fake", base_url="http://127.0.0.1:9/v1", env_key="K"}`},
		[]string{"HOME=/h", "ANTHROPIC_BASE_URL=http://a.example"})
	if !strings.Contains(r.Argv[2], `base_url="`+g.URL+"/"+r.ID+"/") {
		t.Errorf("argv not rewritten: %q", r.Argv[2])
	}
	n := 0
	for _, kv := range r.Env {
		for _, p := range modelgateway.Providers {
			if strings.HasPrefix(kv, p.Var+"="+g.URL+"/"+r.ID+"/") {
				n++
			}
		}
		if strings.Contains(kv, "a.example") {
			t.Errorf("the agent still sees its upstream: %s", kv)
		}
	}
	if n != 3 {
		t.Errorf("env %v: %d provider variables point at the gateway, want 3", r.Env, n)
	}
}

// A route's watcher is told of each call as it ends, once the call is on
// the route and before the agent has the answer's end.
func TestWatchSeesEachCallAsItEnds(t *testing.T) {
	fake := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{Usage: &fakemodel.Usage{Input: 11, Output: 44}})
	defer fake.Close()
	_, r, base := through(t, "ANTHROPIC_BASE_URL", fake.URL)
	seen := make(chan int, 4)
	r.Watch(func(c schemas.ModelCall) {
		if val(c.OutputTokens) != 44 {
			t.Errorf("watched call = %+v", c)
		}
		seen <- len(r.Peek())
	})
	for i := 1; i <= 2; i++ {
		if status, body := post(t, base+"/v1/messages", secretKey, strings.Replace(anthropicBody, "%s", "true", 1)); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		// The answer is read to its end: the watcher has been told.
		select {
		case n := <-seen:
			if n != i {
				t.Fatalf("the watcher saw %d calls on the route at call %d", n, i)
			}
		default:
			t.Fatalf("call %d ended without the watcher being told", i)
		}
	}
	r.Watch(nil)
	post(t, base+"/v1/messages", secretKey, strings.Replace(anthropicBody, "%s", "false", 1))
	if len(seen) != 0 {
		t.Fatal("a watcher set to nil was told of a call")
	}
}

// A removed route answers 404, and the gateway holds no route after its
// last one is removed.
func TestRemovedRouteIsGone(t *testing.T) {
	fake := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{})
	defer fake.Close()
	g, r, base := through(t, "ANTHROPIC_BASE_URL", fake.URL)
	body := strings.Replace(anthropicBody, "%s", "false", 1)
	if status, out := post(t, base+"/v1/messages", secretKey, body); status != 200 {
		t.Fatalf("status %d before the route was removed: %s", status, out)
	}
	if n := g.Routes(); n != 1 {
		t.Fatalf("the gateway holds %d routes, want 1", n)
	}
	g.Remove(r)
	if n := g.Routes(); n != 0 {
		t.Fatalf("the gateway holds %d routes after its one was removed, want 0", n)
	}
	status, out := post(t, base+"/v1/messages", secretKey, body)
	if status != http.StatusNotFound || !strings.Contains(out, "no such route") {
		t.Fatalf("a removed route answered %d: %s", status, out)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the provider got %d requests, want the 1 made before the route was removed", n)
	}
}
