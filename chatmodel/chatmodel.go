// Package chatmodel calls a chat model over HTTP: OpenAI-compatible chat
// completions or Anthropic messages, with a JSON reply asked for by a
// schema (a response format, or Anthropic's forced tool call), retries of
// 429, 5xx and transport errors with backoff, an optional cache of
// answers, and every HTTP attempt told to an observer. The API key goes
// in a request header only: errors it could appear in are scrubbed of it.
package chatmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Providers.
const (
	ProviderOpenAI    = "openai"    // OpenAI-compatible chat completions
	ProviderAnthropic = "anthropic" // Anthropic messages
)

// Endpoint is where a provider is reached when its configuration names no
// base URL or key variable: the environment variables of the base URL and
// of the key, and the public base URL.
type Endpoint struct {
	BaseURLEnv string
	KeyEnv     string
	BaseURL    string
}

// Defaults is a provider's default endpoint.
func Defaults(provider string) Endpoint {
	if provider == ProviderAnthropic {
		return Endpoint{BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", BaseURL: "https://api.anthropic.com"}
	}
	return Endpoint{BaseURLEnv: "OPENAI_BASE_URL", KeyEnv: "OPENAI_API_KEY", BaseURL: "https://api.openai.com/v1"}
}

// GuessProvider is the provider of a model when none is named: anthropic
// for claude models, else openai.
func GuessProvider(model string) string {
	if strings.HasPrefix(model, "claude") {
		return ProviderAnthropic
	}
	return ProviderOpenAI
}

// Model is one model endpoint.
type Model struct {
	// Provider is ProviderOpenAI or ProviderAnthropic.
	Provider string
	// Model is the model name sent.
	Model string
	// BaseURL is the endpoint's base, without a trailing slash.
	BaseURL string
	// Key is the API key (empty: none sent). It is never written anywhere.
	Key string
	// Temperature and MaxTokens go in every request.
	Temperature float64
	MaxTokens   int
	// HTTP is the client calls go through (nil: http.DefaultClient).
	HTTP *http.Client
	// Backoff is the first retry's wait on 429, 5xx or a transport error,
	// doubled on each retry (a Retry-After header overrides it).
	Backoff time.Duration
	// MaxRetries bounds the retries of one call.
	MaxRetries int
}

// Scrub removes the API key from text that may be shown or stored.
func (m *Model) Scrub(s string) string {
	if len(m.Key) < 4 {
		return s
	}
	return strings.ReplaceAll(s, m.Key, "[REDACTED]")
}

// Reply is one answer of the model.
type Reply struct {
	// Text is the reply's text, or a forced tool call's input as JSON.
	Text string
	raw  json.RawMessage // provider-specific assistant content, for retries
	id   string          // Anthropic tool_use id
}

// Tool names the reply a schema asks for: the forced tool an Anthropic
// model answers it through (Name, "reply" when empty, and Description),
// and the response format's name for OpenAI (Format, "reply" when empty).
type Tool struct {
	Name, Description, Format string
}

// Message is one message of a chat: role "user" or "assistant".
type Message struct {
	Role    string
	Content string
}

// Conversation is the provider-specific message list of one exchange.
type Conversation struct {
	m        *Model
	messages []any
	system   string
	schema   any
	tool     Tool
	force    bool // Anthropic: reply through the forced tool call
}

// NewConversation is one question whose reply must match schema (nil:
// any text). An Anthropic model answers an object schema through the
// forced tool, any other schema as JSON the prompt asks for.
func (m *Model) NewConversation(prompt string, schema any, tool Tool) *Conversation {
	return m.NewChat("", []Message{{Role: "user", Content: prompt}}, schema, tool)
}

// NewTextConversation is a plain question with an optional system prompt:
// no schema, the reply is text.
func (m *Model) NewTextConversation(system, question string) *Conversation {
	return m.NewChat(system, []Message{{Role: "user", Content: question}}, nil, Tool{})
}

// NewChat is a chat of several messages (the last one the user's) with a
// system prompt, whose reply must match schema (nil: any text), as
// NewConversation.
func (m *Model) NewChat(system string, msgs []Message, schema any, tool Tool) *Conversation {
	if tool.Name == "" {
		tool.Name = "reply"
	}
	if tool.Format == "" {
		tool.Format = "reply"
	}
	c := &Conversation{m: m, schema: schema, system: system, tool: tool}
	var note string
	if m.Provider == ProviderAnthropic && schema != nil {
		if obj, ok := schema.(map[string]any); ok && obj["type"] == "object" {
			c.force = true
		} else {
			sb, _ := json.Marshal(schema)
			note = "\n\nReply with only a JSON value (no prose, no code fence) that matches this JSON Schema:\n" + string(sb)
		}
	}
	if m.Provider == ProviderOpenAI && system != "" {
		c.messages = append(c.messages, map[string]any{"role": "system", "content": system})
	}
	for i, msg := range msgs {
		content := msg.Content
		if i == len(msgs)-1 {
			content += note
		}
		c.messages = append(c.messages, map[string]any{"role": msg.Role, "content": content})
	}
	return c
}

// Retry adds a reply that was not good and why to the conversation, for
// the model to answer again.
func (c *Conversation) Retry(r Reply, errs string) {
	msg := "Your reply did not match the required JSON Schema:\n" + errs + "\nReply again with only the corrected JSON."
	if c.m.Provider == ProviderAnthropic {
		c.messages = append(c.messages, map[string]any{"role": "assistant", "content": r.raw})
		if c.force && r.id != "" {
			c.messages = append(c.messages, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": r.id, "is_error": true, "content": msg},
			}})
			return
		}
		c.messages = append(c.messages, map[string]any{"role": "user", "content": msg})
		return
	}
	c.messages = append(c.messages,
		map[string]any{"role": "assistant", "content": r.Text},
		map[string]any{"role": "user", "content": msg})
}

// request builds the HTTP request body and endpoint of the next call.
func (c *Conversation) request() (string, map[string]any) {
	m := c.m
	if m.Provider == ProviderAnthropic {
		body := map[string]any{
			"model":       m.Model,
			"max_tokens":  m.MaxTokens,
			"temperature": m.Temperature,
			"messages":    c.messages,
		}
		if c.system != "" {
			body["system"] = c.system
		}
		if c.force {
			body["tools"] = []any{map[string]any{"name": c.tool.Name, "description": c.tool.Description, "input_schema": c.schema}}
			body["tool_choice"] = map[string]any{"type": "tool", "name": c.tool.Name}
		}
		return m.BaseURL + "/v1/messages", body
	}
	body := map[string]any{
		"model":       m.Model,
		"messages":    c.messages,
		"temperature": m.Temperature,
		"max_tokens":  m.MaxTokens,
	}
	if c.schema != nil {
		body["response_format"] = map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": c.tool.Format, "schema": c.schema, "strict": false},
		}
	}
	return m.BaseURL + "/chat/completions", body
}

// Usage sums the token counts of calls. Answers read from a cache are
// counted apart and spend no tokens.
type Usage struct {
	Calls, Cached, Input, Output int64
}

// Cache stores answers by key.
type Cache interface {
	Get(key string) ([]byte, bool)
	Put(key string, b []byte)
}

// Attempt is one HTTP request of a call, as Observe sees it.
type Attempt struct {
	// API is "chat.completions" or "messages".
	API string
	// Payload is the request body sent.
	Payload []byte
	// Start is when it was sent; Duration how long the answer took.
	Start    time.Time
	Duration time.Duration
	// Status is the HTTP status (0: no answer).
	Status int
	// InputTokens and OutputTokens are the answer's usage (nil: none read).
	InputTokens, OutputTokens *int64
	// Body is the answer's body when the status is 200 (its whole usage,
	// cache reads and writes among it, for who reads it).
	Body []byte
	// Err is what went wrong, scrubbed of the key (nil: a good answer).
	Err error
}

// CallOptions are what one call adds to the conversation.
type CallOptions struct {
	// Cache and Key: with both, a reply stored under Key(provider, url,
	// payload) is returned without a call, and a good new one is stored.
	Cache Cache
	Key   func(provider, url string, payload []byte) string
	// Usage, when set, has the call's tokens added.
	Usage *Usage
	// Observe, when set, is told of every HTTP request made.
	Observe func(Attempt)
}

// Call sends the conversation, retrying 429, 5xx and transport errors with
// backoff, and returns the reply. A server that could not be reached at
// all is an *UnreachableError.
func (m *Model) Call(ctx context.Context, c *Conversation, o CallOptions) (Reply, error) {
	if o.Usage == nil {
		o.Usage = &Usage{}
	}
	url, body := c.request()
	payload, err := json.Marshal(body)
	if err != nil {
		return Reply{}, err
	}
	var key string
	if o.Cache != nil && o.Key != nil {
		key = o.Key(m.Provider, url, payload)
		if b, ok := o.Cache.Get(key); ok {
			if reply, _, _, err := m.parseReply(b); err == nil {
				o.Usage.Cached++
				return reply, nil
			}
			// An entry that does not parse is asked again and replaced.
		}
	}
	api := "chat.completions"
	if m.Provider == ProviderAnthropic {
		api = "messages"
	}
	var lastErr error
	for try := 0; ; try++ {
		start := time.Now()
		status, respBody, hdr, err := m.post(ctx, url, payload)
		at := Attempt{API: api, Payload: payload, Start: start, Duration: time.Since(start), Status: status}
		if err == nil && status == http.StatusOK {
			reply, in, out, err := m.parseReply(respBody)
			o.Usage.Calls++
			o.Usage.Input += in
			o.Usage.Output += out
			if err == nil && o.Cache != nil && key != "" {
				o.Cache.Put(key, respBody)
			}
			if o.Observe != nil {
				at.InputTokens, at.OutputTokens, at.Body = &in, &out, respBody
				if err != nil {
					at.Err = err
				}
				o.Observe(at)
			}
			return reply, err
		}
		if err != nil {
			lastErr = errors.New(m.Scrub(err.Error()))
			if unreachable(err) && ctx.Err() == nil {
				lastErr = &UnreachableError{lastErr}
			}
		} else {
			lastErr = fmt.Errorf("%s answered HTTP %d: %s", m.Provider, status, m.Scrub(truncate(strings.TrimSpace(string(respBody)), 500)))
		}
		if o.Observe != nil {
			at.Err = lastErr
			o.Observe(at)
		}
		if err == nil && status != http.StatusTooManyRequests && status < 500 {
			return Reply{}, lastErr
		}
		if try >= m.MaxRetries || ctx.Err() != nil {
			return Reply{}, lastErr
		}
		wait := m.Backoff << try
		if hdr != nil {
			if s, err := strconv.Atoi(hdr.Get("Retry-After")); err == nil && s >= 0 {
				wait = min(time.Duration(s)*time.Second, 30*time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return Reply{}, fmt.Errorf("%w (last: %w)", ctx.Err(), lastErr)
		case <-time.After(wait):
		}
	}
}

func (m *Model) post(ctx context.Context, url string, payload []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if m.Provider == ProviderAnthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
		if m.Key != "" {
			req.Header.Set("x-api-key", m.Key)
		}
	} else if m.Key != "" {
		req.Header.Set("Authorization", "Bearer "+m.Key)
	}
	client := m.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, b, resp.Header, nil
}

// parseReply reads an answer and its input and output tokens.
func (m *Model) parseReply(b []byte) (Reply, int64, int64, error) {
	if m.Provider == ProviderAnthropic {
		var r struct {
			Content []struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return Reply{}, 0, 0, fmt.Errorf("anthropic reply is not a messages response: %v", err)
		}
		in, out := r.Usage.InputTokens, r.Usage.OutputTokens
		// The content goes back on a retry as it came, every block kind
		// included (a real API rejects a conversation missing one).
		var whole struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(b, &whole)
		reply := Reply{raw: whole.Content}
		var texts []string
		for _, c := range r.Content {
			switch c.Type {
			case "tool_use":
				reply.Text, reply.id = string(c.Input), c.ID
				return reply, in, out, nil
			case "text":
				texts = append(texts, c.Text)
			}
		}
		reply.Text = strings.Join(texts, "")
		return reply, in, out, nil
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Reply{}, 0, 0, fmt.Errorf("reply is not a chat completion: %v", err)
	}
	in, out := r.Usage.PromptTokens, r.Usage.CompletionTokens
	if len(r.Choices) == 0 {
		return Reply{}, in, out, fmt.Errorf("chat completion has no choices")
	}
	msg := r.Choices[0].Message
	if msg.Content == nil {
		if msg.Refusal != nil {
			return Reply{}, in, out, fmt.Errorf("the model refused: %s", *msg.Refusal)
		}
		return Reply{}, in, out, fmt.Errorf("chat completion has no content")
	}
	return Reply{Text: *msg.Content}, in, out, nil
}

// StripFences removes a ```json fence some compatible servers add.
func StripFences(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
	}
	return strings.TrimSpace(s)
}

// UnreachableError is a call that found no server: the connection was
// refused or the host name did not resolve.
type UnreachableError struct{ error }

// Unwrap returns the error it wraps.
func (e *UnreachableError) Unwrap() error { return e.error }

// unreachable says whether err is a failure to reach the server at all.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
