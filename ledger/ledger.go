// Package ledger reads the model calls an agent makes: which provider and
// API a request is for, and, from the answer as it passes (a JSON body or
// a stream of server-sent events), the provider's own token counts, time
// to first token, status and error, as a schemas.ModelCall. It also
// annotates a trial's calls (turn, retries, cost from a price table) and
// says when a trial ended on calls the provider failed.
//
// Token counts are normalized across providers: InputTokens are the input
// tokens not read from a cache (OpenAI's and Gemini's input counts include
// the cached ones, which are taken out); OutputTokens are every billed
// output token, reasoning included (Gemini's thoughtsTokenCount is added to
// its candidatesTokenCount); ReasoningTokens is the reasoning part of them
// when the provider says.
package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"harness/schemas"
)

// Providers.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
	Other     = "other"
)

// Classify names the provider and API of a request from its URL path.
func Classify(path string) (provider, api string) {
	if i := strings.LastIndex(path, ":"); i >= 0 && strings.Contains(path, "/models/") {
		return Gemini, path[i+1:]
	}
	switch {
	case strings.HasSuffix(path, "/messages"):
		return Anthropic, "messages"
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return Anthropic, "countTokens"
	case strings.HasSuffix(path, "/responses"):
		return OpenAI, "responses"
	case strings.HasSuffix(path, "/chat/completions"):
		return OpenAI, "chat.completions"
	}
	seg := path[strings.LastIndex(path, "/")+1:]
	return Other, seg
}

// maxBody bounds the answer body a Meter keeps to parse (a plain JSON
// answer, or one server-sent event).
const maxBody = 16 << 20

// Meter reads one call as it passes: the request when it is made, then the
// answer's status and body bytes in order. It is not safe for concurrent
// use.
type Meter struct {
	call  schemas.ModelCall
	start time.Time
	now   func() time.Time

	stream  bool
	body    bytes.Buffer // a plain answer, or the event being read
	tooBig  bool
	line    bytes.Buffer // the SSE line being read
	data    bytes.Buffer // the SSE event's data lines
	event   string
	usage   usage
	errBody []byte
}

// NewMeter starts reading a call made at start: method and path of the
// request and its body. now is the clock (time.Now when nil).
func NewMeter(path string, body []byte, start time.Time, now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	provider, api := Classify(path)
	sum := sha256.Sum256(body)
	m := &Meter{start: start, now: now}
	m.call = schemas.ModelCall{Provider: provider, API: api, RequestHash: hex.EncodeToString(sum[:]), Start: start.UnixMilli()}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if json.Unmarshal(body, &req) == nil {
		m.call.Model = req.Model
	}
	if provider == Gemini {
		if _, rest, ok := strings.Cut(path, "/models/"); ok {
			m.call.Model, _, _ = strings.Cut(rest, ":")
		}
	}
	return m
}

// Response notes the answer's status and headers.
func (m *Meter) Response(status int, h http.Header) {
	m.call.Status = status
	m.stream = strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "text/event-stream")
	m.call.Stream = m.stream
}

// Write takes the next bytes of the answer's body, as they reach the
// agent. It never fails.
func (m *Meter) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	if m.call.FirstToken == nil {
		ms := m.now().Sub(m.start).Milliseconds()
		m.call.FirstToken = &ms
	}
	if m.call.Status >= 400 {
		if len(m.errBody) < 64<<10 {
			m.errBody = append(m.errBody, p...)
		}
		return len(p), nil
	}
	if !m.stream {
		if m.body.Len()+len(p) > maxBody {
			m.tooBig = true
			return len(p), nil
		}
		m.body.Write(p)
		return len(p), nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if m.line.Len()+len(p) <= maxBody {
				m.line.Write(p)
			}
			break
		}
		if m.line.Len()+i <= maxBody {
			m.line.Write(p[:i])
		}
		p = p[i+1:]
		m.sseLine(bytes.TrimSuffix(m.line.Bytes(), []byte("\r")))
		m.line.Reset()
	}
	return n, nil
}

// sseLine handles one line of the event stream.
func (m *Meter) sseLine(l []byte) {
	switch {
	case len(l) == 0:
		m.dispatch()
	case bytes.HasPrefix(l, []byte("data:")):
		if m.data.Len() > 0 {
			m.data.WriteByte('\n')
		}
		if m.data.Len()+len(l) <= maxBody {
			m.data.Write(bytes.TrimPrefix(bytes.TrimPrefix(l, []byte("data:")), []byte(" ")))
		}
	case bytes.HasPrefix(l, []byte("event:")):
		m.event = strings.TrimSpace(string(l[len("event:"):]))
	}
}

// dispatch reads the event just ended.
func (m *Meter) dispatch() {
	defer func() { m.data.Reset(); m.event = "" }()
	d := bytes.TrimSpace(m.data.Bytes())
	if len(d) == 0 || string(d) == "[DONE]" {
		return
	}
	m.object(d, m.event)
}

// object reads the usage, model and error of one JSON answer or event.
func (m *Meter) object(b []byte, event string) {
	var v map[string]json.RawMessage
	if json.Unmarshal(b, &v) != nil {
		return
	}
	// Anthropic's message_start nests the message; OpenAI Responses
	// events nest the response.
	for _, k := range []string{"message", "response"} {
		if inner, ok := v[k]; ok && len(inner) > 0 && inner[0] == '{' {
			m.object(inner, "")
		}
	}
	if raw, ok := v["usage"]; ok && len(raw) > 0 && raw[0] == '{' {
		m.usage.read(m.call.Provider, raw)
	}
	if raw, ok := v["usageMetadata"]; ok {
		m.usage.read(Gemini, raw)
	}
	if m.call.Model == "" {
		var s string
		for _, k := range []string{"model", "modelVersion"} {
			if json.Unmarshal(v[k], &s) == nil && s != "" {
				m.call.Model = s
				break
			}
		}
	}
	typ := ""
	json.Unmarshal(v["type"], &typ)
	if raw, ok := v["error"]; ok && string(raw) != "null" && (event == "error" || typ == "error" || typ == "response.failed" || m.stream) {
		if m.call.Error == nil {
			kind, msg := errorOf(raw, m.call.Status)
			m.call.Error = &schemas.ModelCallError{Kind: kind, Message: msg}
		}
	}
}

// End closes the call: transport is the error that ended it early (the
// provider unreachable, the stream broken), nil when it completed. It
// returns the call as read.
func (m *Meter) End(transport error) schemas.ModelCall {
	m.call.Duration = m.now().Sub(m.start).Milliseconds()
	if m.stream && m.line.Len() > 0 {
		m.sseLine(m.line.Bytes())
		m.line.Reset()
	}
	if m.stream {
		m.dispatch()
	} else if m.body.Len() > 0 && !m.tooBig {
		b := bytes.TrimSpace(m.body.Bytes())
		if len(b) > 0 && b[0] == '[' { // Gemini streamed as a JSON array
			var arr []json.RawMessage
			json.Unmarshal(b, &arr)
			for _, o := range arr {
				m.object(o, "")
			}
		} else {
			m.object(b, "")
		}
	}
	m.usage.fill(&m.call)
	switch {
	case m.call.Status >= 400:
		kind, msg := errorOf(m.errBody, m.call.Status)
		m.call.Error = &schemas.ModelCallError{Kind: kind, Message: msg}
	case transport != nil && m.call.Error == nil:
		m.call.Error = &schemas.ModelCallError{Kind: schemas.ModelErrConnection, Message: transport.Error()}
	}
	return m.call
}

// ReadUsage puts on c the token counts of body, a call's whole JSON
// answer from c.Provider, read and normalized as a Meter reads them (cache
// reads and writes apart from the input). It leaves c as it is when body
// says no usage.
func ReadUsage(c *schemas.ModelCall, body []byte) {
	m := &Meter{call: schemas.ModelCall{Provider: c.Provider}}
	m.object(body, "")
	m.usage.fill(c)
}

// usage accumulates the usage fields of a call's answer; later values
// replace earlier ones (Anthropic's message_delta carries the running
// output count).
type usage struct {
	seen                                         bool
	input, cached, cacheWrite, output, reasoning *int64
	candidates                                   *int64
}

func (u *usage) read(provider string, raw json.RawMessage) {
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		return
	}
	num := func(m map[string]json.RawMessage, k string) *int64 {
		var n int64
		if v, ok := m[k]; ok && json.Unmarshal(v, &n) == nil {
			return &n
		}
		return nil
	}
	sub := func(k string) map[string]json.RawMessage {
		var s map[string]json.RawMessage
		json.Unmarshal(f[k], &s)
		return s
	}
	set := func(dst **int64, v *int64) {
		if v != nil {
			*dst = v
			u.seen = true
		}
	}
	switch provider {
	case Anthropic:
		set(&u.input, num(f, "input_tokens"))
		set(&u.cached, num(f, "cache_read_input_tokens"))
		set(&u.cacheWrite, num(f, "cache_creation_input_tokens"))
		set(&u.output, num(f, "output_tokens"))
	case Gemini:
		set(&u.input, num(f, "promptTokenCount"))
		set(&u.cached, num(f, "cachedContentTokenCount"))
		set(&u.candidates, num(f, "candidatesTokenCount"))
		set(&u.reasoning, num(f, "thoughtsTokenCount"))
	default: // OpenAI Responses, then Chat Completions
		set(&u.input, num(f, "input_tokens"))
		set(&u.input, num(f, "prompt_tokens"))
		set(&u.output, num(f, "output_tokens"))
		set(&u.output, num(f, "completion_tokens"))
		for _, k := range []string{"input_tokens_details", "prompt_tokens_details"} {
			if d := sub(k); d != nil {
				set(&u.cached, num(d, "cached_tokens"))
			}
		}
		for _, k := range []string{"output_tokens_details", "completion_tokens_details"} {
			if d := sub(k); d != nil {
				set(&u.reasoning, num(d, "reasoning_tokens"))
			}
		}
	}
}

// fill puts the normalized counts on the call.
func (u *usage) fill(c *schemas.ModelCall) {
	if !u.seen {
		return
	}
	v := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	cached := v(u.cached)
	input := v(u.input)
	if c.Provider != Anthropic {
		input = max(input-cached, 0)
	}
	output := v(u.output)
	if c.Provider == Gemini {
		output = v(u.candidates) + v(u.reasoning)
	}
	c.InputTokens, c.CachedTokens, c.OutputTokens = &input, &cached, &output
	if c.Provider == Anthropic {
		w := v(u.cacheWrite)
		c.CacheWriteTokens = &w
	}
	if u.reasoning != nil {
		r := v(u.reasoning)
		c.ReasoningTokens = &r
	}
}

// errorOf classifies a failed answer by its status and the provider's
// error body ({"error": {...}} or the error object itself).
func errorOf(body []byte, status int) (kind, msg string) {
	var e struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Error   json.RawMessage
	}
	json.Unmarshal(body, &e)
	if len(e.Error) > 0 && e.Error[0] == '{' {
		json.Unmarshal(e.Error, &e)
	}
	msg = e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if msg == "" {
			msg = http.StatusText(status)
		}
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	low := strings.ToLower(e.Type + " " + e.Status)
	switch {
	case status == 529 || strings.Contains(low, "overloaded"):
		kind = schemas.ModelErrOverloaded
	case status == 429 || strings.Contains(low, "rate_limit") || strings.Contains(low, "resource_exhausted"):
		kind = schemas.ModelErrRateLimit
	case status >= 500 || status < 400:
		kind = schemas.ModelErrServer
	default:
		kind = schemas.ModelErrClient
	}
	if status > 0 {
		msg = fmt.Sprintf("%d: %s", status, msg)
	}
	return kind, msg
}
