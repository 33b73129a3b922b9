// Package modelgateway is the model endpoint of a run: a local HTTP server
// the agents' base URLs point at, which forwards every request to the real
// provider (the agent's own base URL, or the provider's default) and
// passes the answer back as it comes, server-sent events chunk by chunk,
// while a ledger.Meter reads each call's usage, latency and errors.
//
// Each agent process gets a Route: its own path prefix on the gateway, so
// the calls it makes are told apart from those of the other agents of the
// run, and taken by the cases it serves by time (Route.Take). Request
// headers, API keys among them, are forwarded as they are and never kept.
//
// A Tape, when set, stands between the gateway and the provider: it may
// answer a request itself (a replay) and sees every answer the provider
// gave (a recording).
package modelgateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"harness/ledger"
	"harness/schemas"
)

// Provider defaults: the base URL variable an agent reads and the URL it
// uses when the variable is not set.
var Providers = []struct{ Var, Default string }{
	{"ANTHROPIC_BASE_URL", "https://api.anthropic.com"},
	{"OPENAI_BASE_URL", "https://api.openai.com/v1"},
	{"GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"},
}

// OtherVars are further base URL variables rewritten when the agent's
// environment sets them (their provider's default is not assumed).
var OtherVars = []string{"OPENAI_API_BASE", "CODEX_API_BASE", "GEMINI_BASE_URL"}

// baseURLSetting finds base_url settings on an agent's command line, such
// as Codex's -c 'model_providers.x={base_url="http://127.0.0.1:8080/v1"}'.
var baseURLSetting = regexp.MustCompile(`(base_url\s*=\s*["']?)([a-zA-Z][a-zA-Z0-9+.-]*://[^"'\s,}]+)`)

// Exchange is one call as a Tape sees it.
type Exchange struct {
	// Trial names the unit the route serves when the call was made (see
	// Route.Begin; "" before any).
	Trial string
	// Paths are the unit's directories (its workspace) whose names change
	// from run to run.
	Paths []string
	// Upstream is the route's upstream base URL the call went to.
	Upstream string
	// Method, Path (below the upstream base) and Query of the request.
	Method, Path, Query string
	// Header holds the request headers.
	Header http.Header
	// Body is the request body.
	Body []byte
}

// Answer is a whole answer: status, headers and body.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Tape records and replays calls. Serve may answer a request itself
// (served true); when it returns an error, the call fails with it as a
// replay miss and the agent gets a 400 with the error. Record is told of
// every answer the provider gave.
type Tape interface {
	Serve(ctx context.Context, x *Exchange) (a *Answer, served bool, err error)
	Record(x *Exchange, a *Answer)
}

// Options configure a Gateway.
type Options struct {
	// Transport reaches the providers (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Tape, when set, records or replays the calls.
	Tape Tape
}

// Gateway is a run's model endpoint on 127.0.0.1.
type Gateway struct {
	// URL is the gateway's address, http://127.0.0.1:PORT.
	URL  string
	opts Options
	ln   net.Listener
	srv  *http.Server

	mu     sync.Mutex
	routes map[string]*Route

	// bufs holds the buffers answers are copied through, one a call in
	// flight, reused from call to call.
	bufs sync.Pool
}

// Start listens on a fresh 127.0.0.1 port and serves until Close.
func Start(opts Options) (*Gateway, error) {
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	g := &Gateway{URL: "http://" + ln.Addr().String(), opts: opts, ln: ln, routes: map[string]*Route{}}
	g.bufs.New = func() any { b := make([]byte, copyBuf); return &b }
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: time.Minute}
	go g.srv.Serve(ln)
	return g, nil
}

// Close stops the gateway, ending the calls in flight.
func (g *Gateway) Close() error {
	return g.srv.Close()
}

// Route is one agent process's way through the gateway.
type Route struct {
	// ID is the route's path prefix on the gateway.
	ID string
	// Env is the agent's environment with its base URL variables pointing
	// at the gateway (set for the providers harness knows, rewritten for
	// the others the environment names).
	Env []string
	// Argv is the agent's command line with its base_url settings
	// pointing at the gateway.
	Argv      []string
	upstreams []string

	mu     sync.Mutex
	calls  []schemas.ModelCall
	trial  string
	paths  []string
	onCall func(schemas.ModelCall)
}

// Watch has fn told of each call of the route as it ends, once the call is
// on the route (Peek sees it) and before the answer's end reaches the
// agent; nil stops it. fn is called from the gateway's handlers, several
// at once.
func (r *Route) Watch(fn func(schemas.ModelCall)) {
	r.mu.Lock()
	r.onCall = fn
	r.mu.Unlock()
}

// Begin says which unit the route's agent serves from now on: trial names
// it (a case and trial), paths are its directories. A Tape sees both on
// every later call.
func (r *Route) Begin(trial string, paths []string) {
	r.mu.Lock()
	r.trial, r.paths = trial, paths
	r.mu.Unlock()
}

// NewRoute makes the route of an agent started with argv and env: every
// base URL they name (or a known provider's default) becomes an upstream
// of the route, reached through the gateway.
func (g *Gateway) NewRoute(argv, env []string) *Route {
	var b [6]byte
	rand.Read(b[:])
	r := &Route{ID: hex.EncodeToString(b[:])}
	base := func(upstream string) string {
		for i, u := range r.upstreams {
			if u == upstream {
				return fmt.Sprintf("%s/%s/%d", g.URL, r.ID, i)
			}
		}
		r.upstreams = append(r.upstreams, upstream)
		return fmt.Sprintf("%s/%s/%d", g.URL, r.ID, len(r.upstreams)-1)
	}
	values := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	set := map[string]string{}
	for _, p := range Providers {
		up := p.Default
		if v := values[p.Var]; v != "" {
			up = v
		}
		set[p.Var] = base(strings.TrimRight(up, "/"))
	}
	for _, k := range OtherVars {
		if v := values[k]; v != "" {
			set[k] = base(strings.TrimRight(v, "/"))
		}
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			r.Env = append(r.Env, kv)
		}
	}
	for _, p := range Providers {
		r.Env = append(r.Env, p.Var+"="+set[p.Var])
	}
	for _, k := range OtherVars {
		if v, ok := set[k]; ok {
			r.Env = append(r.Env, k+"="+v)
		}
	}
	for _, a := range argv {
		r.Argv = append(r.Argv, baseURLSetting.ReplaceAllStringFunc(a, func(m string) string {
			sm := baseURLSetting.FindStringSubmatch(m)
			return sm[1] + base(strings.TrimRight(sm[2], "/"))
		}))
	}
	g.mu.Lock()
	g.routes[r.ID] = r
	g.mu.Unlock()
	return r
}

// Remove forgets a route once its agent is gone: a later request on it
// answers 404, and the calls it held that were not taken are dropped with
// it.
func (g *Gateway) Remove(r *Route) {
	g.mu.Lock()
	delete(g.routes, r.ID)
	g.mu.Unlock()
}

// Routes is the number of routes the gateway holds: those made and not
// removed.
func (g *Gateway) Routes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.routes)
}

// Take returns the calls of the route that started up to until and were
// not taken before, in the order they started; later ones wait for the
// next taker.
func (r *Route) Take(until time.Time) []schemas.ModelCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := until.UnixMilli()
	var mine, left []schemas.ModelCall
	for _, c := range r.calls {
		if c.Start <= ms {
			mine = append(mine, c)
		} else {
			left = append(left, c)
		}
	}
	r.calls = left
	return mine
}

// Peek returns a copy of the calls of the route not taken yet.
func (r *Route) Peek() []schemas.ModelCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schemas.ModelCall(nil), r.calls...)
}

// add puts an ended call on the route and tells its watcher.
func (r *Route) add(c schemas.ModelCall) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	fn := r.onCall
	r.mu.Unlock()
	if fn != nil {
		fn(c)
	}
}

// copyBuf is the size of the buffer an answer is copied through.
const copyBuf = 32 << 10

// hopHeaders are not forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// ServeHTTP forwards /ROUTE/N/REST to upstream N of ROUTE, + REST.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := g.opts.Now()
	parts := strings.SplitN(strings.TrimPrefix(req.URL.Path, "/"), "/", 3)
	g.mu.Lock()
	var r *Route
	if len(parts) >= 2 {
		r = g.routes[parts[0]]
	}
	g.mu.Unlock()
	n := -1
	if r != nil {
		fmt.Sscanf(parts[1], "%d", &n)
	}
	if r == nil || n < 0 || n >= len(r.upstreams) {
		http.Error(w, "model gateway: no such route", http.StatusNotFound)
		return
	}
	rest := "/"
	if len(parts) == 3 {
		rest += parts[2]
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "model gateway: reading request: "+err.Error(), http.StatusBadRequest)
		return
	}
	up := r.upstreams[n]
	meter := ledger.NewMeter(rest, body, start, g.opts.Now)
	r.mu.Lock()
	trial, paths := r.trial, r.paths
	r.mu.Unlock()
	x := &Exchange{Trial: trial, Paths: paths, Upstream: up, Method: req.Method, Path: rest, Query: req.URL.RawQuery, Header: req.Header.Clone(), Body: body}
	call := g.forward(w, req, r, x, meter)
	r.add(call)
}

// forward answers one request, from the tape or the provider, and returns
// the call as the meter read it.
func (g *Gateway) forward(w http.ResponseWriter, req *http.Request, r *Route, x *Exchange, meter *ledger.Meter) schemas.ModelCall {
	if t := g.opts.Tape; t != nil {
		a, served, err := t.Serve(req.Context(), x)
		if err != nil {
			// A 400, which agents do not retry, worded so that the
			// Anthropic, OpenAI and Gemini clients all read its message.
			meter.Response(http.StatusBadRequest, http.Header{})
			msg := fmt.Sprintf(`{"type":"error","error":{"type":"invalid_request_error","code":400,"status":"INVALID_ARGUMENT","message":%q}}`,
				"model replay: "+err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, msg)
			call := meter.End(nil)
			call.Error = &schemas.ModelCallError{Kind: schemas.ModelErrNoRecord, Message: err.Error()}
			var miss *MissError
			if errors.As(err, &miss) {
				call.Error.Message, call.Error.Diff = miss.Reason, miss.Diff
			}
			return call
		}
		if served {
			copyHeader(w.Header(), a.Header)
			meter.Response(a.Status, a.Header)
			w.WriteHeader(a.Status)
			w.Write(a.Body)
			meter.Write(a.Body)
			call := meter.End(nil)
			call.Replayed = true
			return call
		}
	}
	target, err := url.Parse(x.Upstream + x.Path)
	if err != nil {
		http.Error(w, "model gateway: bad upstream", http.StatusBadGateway)
		return meter.End(err)
	}
	target.RawQuery = x.Query
	out, err := http.NewRequestWithContext(req.Context(), req.Method, target.String(), bytes.NewReader(x.Body))
	if err != nil {
		http.Error(w, "model gateway: "+err.Error(), http.StatusBadGateway)
		return meter.End(err)
	}
	copyHeader(out.Header, req.Header)
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	// The transport asks for gzip itself and hands the body over
	// decompressed, so the meter can read it.
	out.Header.Del("Accept-Encoding")
	out.ContentLength = int64(len(x.Body))
	resp, err := g.opts.Transport.RoundTrip(out)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, `{"error":{"type":"connection_error","message":%q}}`, "model gateway: provider unreachable: "+err.Error())
		return meter.End(err)
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	// No Content-Length: the answer's end reaches the agent when the
	// handler returns, after the call is on the ledger, so whoever the
	// answer lets go on (the turn's end) finds the call there.
	w.Header().Del("Content-Length")
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	if resp.Uncompressed {
		w.Header().Del("Content-Encoding")
	}
	meter.Response(resp.StatusCode, resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	var rec bytes.Buffer
	keep := g.opts.Tape != nil
	bp := g.bufs.Get().(*[]byte)
	defer g.bufs.Put(bp)
	buf := *bp
	var readErr error
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			meter.Write(buf[:n])
			if keep {
				rec.Write(buf[:n])
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				readErr = nil
				break // the agent went away
			}
			rc.Flush()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
	}
	call := meter.End(readErr)
	if keep && readErr == nil {
		g.opts.Tape.Record(x, &Answer{Status: resp.StatusCode, Header: resp.Header.Clone(), Body: rec.Bytes()})
	}
	if readErr != nil {
		// Let the agent see the stream break, as it did.
		r.add(call)
		panic(http.ErrAbortHandler)
	}
	return call
}

// MissError is a Tape's error for a request it has no recording of; Diff
// says how it differs from the nearest recorded request.
type MissError struct {
	// Reason says what was missing ("no recorded request of trial x
	// matches").
	Reason string
	// Diff is the difference between the nearest recorded request and
	// this one ("" when there was none to compare with).
	Diff string
}

func (e *MissError) Error() string {
	if e.Diff == "" {
		return e.Reason
	}
	return e.Reason + "; the nearest recorded request differs:\n" + e.Diff
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}
