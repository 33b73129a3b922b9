package graders

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"harness/chatmodel"
	"net"
	"net/http"
	"sync"
	"time"
)

// defaultMaxCalls is agentv's default target call budget.
const defaultMaxCalls = 50

// targetConfig is a script grader's target block: the model the proxy
// forwards to and the call budget.
type targetConfig struct {
	maxCalls int
	judge    *judgeModel
}

// parseTarget reads {max_calls, model, provider, baseURL, apiKeyEnv,
// temperature, maxTokens}.
func parseTarget(v any, c cfgCtx) (*targetConfig, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, c.errf("", "must be an object such as {max_calls: 10, model: gpt-4o-mini}")
	}
	for k, val := range m {
		if to, ok := keyAliases[k]; ok {
			m[to] = val
			delete(m, k)
		}
	}
	if v, ok := m["maxCalls"]; ok {
		m["max_calls"] = v
		delete(m, "maxCalls")
	}
	for k := range m {
		switch k {
		case "max_calls", "model", "provider", "baseURL", "apiKeyEnv", "temperature", "maxTokens", "name":
		default:
			return nil, c.errf(k, "unknown field (known: max_calls, model, provider, baseURL, apiKeyEnv, temperature, maxTokens)")
		}
	}
	tc := &targetConfig{maxCalls: defaultMaxCalls}
	if n, ok, err := c.num(m, "max_calls"); err != nil {
		return nil, err
	} else if ok {
		if n < 1 || n != float64(int(n)) {
			return nil, c.errf("max_calls", "must be a positive integer, got %v", n)
		}
		tc.maxCalls = int(n)
	}
	jm, err := parseModel(m, c, true)
	if err != nil {
		return nil, err
	}
	if _, ok := m["maxTokens"]; !ok {
		jm.MaxTokens = 1024
	}
	tc.judge = jm
	return tc, nil
}

// targetProxy is agentv's target proxy: a local HTTP server a script
// grader calls (POST /invoke, POST /invokeBatch, GET /info) with a bearer
// token. It forwards to the configured model with the real key, which the
// grader never sees, and enforces the call budget.
type targetProxy struct {
	cfg   *targetConfig
	token string
	ln    net.Listener
	srv   *http.Server

	mu         sync.Mutex
	calls      int
	refused    int
	usageTotal chatmodel.Usage
	ctx        context.Context
	cancel     context.CancelFunc
}

func startTargetProxy(cfg *targetConfig, _ Options) (*targetProxy, error) {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &targetProxy{cfg: cfg, token: hex.EncodeToString(tok), ln: ln}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /invoke", p.auth(p.handleInvoke))
	mux.HandleFunc("POST /invokeBatch", p.auth(p.handleBatch))
	mux.HandleFunc("GET /info", p.auth(p.handleInfo))
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's base URL (AGENTV_TARGET_PROXY_URL).
func (p *targetProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy and any model call in flight.
func (p *targetProxy) Close() {
	p.cancel()
	_ = p.srv.Close()
}

func (p *targetProxy) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		want := "Bearer " + p.token
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "missing or wrong bearer token (use AGENTV_TARGET_PROXY_TOKEN)"})
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type invokeRequest struct {
	Question     string `json:"question"`
	SystemPrompt string `json:"systemPrompt"`
	Target       string `json:"target"`
}

// reserve takes n calls from the budget, or reports how many are left.
func (p *targetProxy) reserve(n int) (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls+n > p.cfg.maxCalls {
		p.refused += n
		return false, p.cfg.maxCalls - p.calls
	}
	p.calls += n
	return true, 0
}

func (p *targetProxy) checkTarget(w http.ResponseWriter, reqs []invokeRequest) bool {
	for _, r := range reqs {
		if r.Target != "" && r.Target != p.cfg.judge.Model.Model {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("unknown target %q", r.Target), "availableTargets": []string{p.cfg.judge.Model.Model}})
			return false
		}
		if r.Question == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "question is required"})
			return false
		}
	}
	return true
}

func (p *targetProxy) invoke(ctx context.Context, r invokeRequest) (map[string]any, error) {
	conv := p.cfg.judge.NewTextConversation(r.SystemPrompt, r.Question)
	var u chatmodel.Usage
	reply, err := p.cfg.judge.Call(ctx, conv, chatmodel.CallOptions{Usage: &u})
	p.mu.Lock()
	p.usageTotal.Calls += u.Calls
	p.usageTotal.Input += u.Input
	p.usageTotal.Output += u.Output
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"output":  []any{map[string]any{"role": "assistant", "content": reply.Text}},
		"rawText": reply.Text,
	}, nil
}

func (p *targetProxy) handleInvoke(w http.ResponseWriter, r *http.Request) {
	var req invokeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid JSON: " + err.Error()})
		return
	}
	if !p.checkTarget(w, []invokeRequest{req}) {
		return
	}
	if ok, left := p.reserve(1); !ok {
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": fmt.Sprintf("target call budget exhausted: max_calls is %d (%d left)", p.cfg.maxCalls, left)})
		return
	}
	ctx, cancel := mergeCancel(r.Context(), p.ctx)
	defer cancel()
	out, err := p.invoke(ctx, req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *targetProxy) handleBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Requests []invokeRequest `json:"requests"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid JSON: " + err.Error()})
		return
	}
	if !p.checkTarget(w, req.Requests) {
		return
	}
	if ok, left := p.reserve(len(req.Requests)); !ok {
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": fmt.Sprintf("target call budget exhausted: max_calls is %d, %d requested, %d left", p.cfg.maxCalls, len(req.Requests), left)})
		return
	}
	ctx, cancel := mergeCancel(r.Context(), p.ctx)
	defer cancel()
	out := make([]any, len(req.Requests))
	errs := make([]error, len(req.Requests))
	var wg sync.WaitGroup
	for i, q := range req.Requests {
		wg.Go(func() {
			res, err := p.invoke(ctx, q)
			out[i], errs[i] = res, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]any{"error": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"responses": out})
}

func (p *targetProxy) handleInfo(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"targetName": p.cfg.judge.Model.Model, "maxCalls": p.cfg.maxCalls, "callCount": p.calls,
		"availableTargets": []string{p.cfg.judge.Model.Model},
	})
}

// usage reports the proxy's call count for the result's outcome.
func (p *targetProxy) usage() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return map[string]any{"calls": p.calls, "maxCalls": p.cfg.maxCalls, "refused": p.refused, "model": p.cfg.judge.Model.Model}
}

// tokenUsage is the tokens the proxy's model calls used.
func (p *targetProxy) tokenUsage() json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return usageJSON(p.usageTotal, p.cfg.judge.Model.Model)
}

// mergeCancel returns a context cancelled when either parent is.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
