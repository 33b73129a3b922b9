package graders

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cbroglie/mustache"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/judgecache"
	"harness/schemas"
)

// Judge providers.
const (
	ProviderOpenAI    = "openai"    // OpenAI-compatible chat completions
	ProviderAnthropic = "anthropic" // Anthropic messages
)

// judgeVars are the mustache variables a judge prompt may use. Every one
// is always present in the render context (empty when the record has no
// such data), so checking the template's tags at load time is all it takes
// to make a missing variable an error; mustache.AllowMissingVariables, a
// package global, is never touched.
var judgeVars = []string{
	"messages", "response", "lastUserMessage", "tools", "toolCalls", "systemPrompt",
	"input", "expected", "hint", "reference", "trajectory", "id", "metadata",
}

// defaultJudgeSchema is used when a judge config has no outputSchema.
const defaultJudgeSchema = `{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1},"pass":{"type":"boolean"},"reasoning":{"type":"string"}},"required":["score"]}`

// judgeModel is the model endpoint shared by the LLM judge and the target
// proxy.
type judgeModel struct {
	provider    string
	model       string
	baseURL     string
	keyEnv      string
	key         string // never written anywhere
	temperature float64
	maxTokens   int
	client      *http.Client
	backoff     time.Duration // first retry delay on 429/5xx
	maxRetries  int
}

// judge is the LLM-as-judge grader.
type judge struct {
	name      string
	tmpl      *mustache.Template
	schema    *jsonschema.Schema
	schemaDoc any // the schema as JSON, for requests
	model     *judgeModel
	timeout   time.Duration
	threshold float64
	cache     *judgecache.Cache
}

// cacheScope is what a judge call's cache key adds to the request itself:
// the trial judged (case id and trial number) and the draw, so that two
// trials with the same trajectory, or two draws of calibrate --repeat, are
// judged separately, as a sampling judge must.
type cacheScope struct {
	cache *judgecache.Cache
	id    string
	trial int
	draw  int
}

// key is the cache key of one request: the provider and endpoint (base
// URL), the request body (model, rendered prompt and the conversation so
// far, output schema, temperature, max tokens), and the scope.
func (s *cacheScope) key(provider, url string, payload []byte) string {
	return judgecache.Key([]byte(provider), []byte(url), payload,
		[]byte(s.id), []byte(strconv.Itoa(s.trial)), []byte(strconv.Itoa(s.draw)))
}

// judgeDrawKey is the context key of WithJudgeDraw.
type judgeDrawKey struct{}

// WithJudgeDraw marks the gradings made under ctx as draw n (from 1) of
// repeated gradings of the same records. Each draw has judge cache entries
// of its own, so a repeated grading asks the model again instead of
// reading the first answer back; draw 1 is a plain grading.
func WithJudgeDraw(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, judgeDrawKey{}, n)
}

func judgeDraw(ctx context.Context) int {
	if n, ok := ctx.Value(judgeDrawKey{}).(int); ok && n > 0 {
		return n
	}
	return 1
}

// parseModel reads provider, model, temperature, maxTokens, baseURL and
// apiKeyEnv from a config object, and the API key from the environment.
// A target (lenient) may leave the model out (agentv's targets default to
// the eval's own): it is then AGENTV_TARGET_MODEL, or the provider's small
// model; and a missing key fails its calls, not the load.
func parseModel(m map[string]any, c cfgCtx, lenient bool) (*judgeModel, error) {
	jm := &judgeModel{maxTokens: 256, client: c.opts.httpClient(), backoff: 500 * time.Millisecond, maxRetries: 4}
	var err error
	if jm.model, err = c.str(m, "model"); err != nil {
		return nil, err
	}
	if jm.provider, err = c.str(m, "provider"); err != nil {
		return nil, err
	}
	if jm.model == "" && lenient {
		jm.model = c.opts.getenv("AGENTV_TARGET_MODEL")
		if jm.model == "" {
			jm.model = "gpt-4o-mini"
			if jm.provider == ProviderAnthropic {
				jm.model = "claude-haiku-4-5"
			}
		}
	}
	if jm.model == "" {
		return nil, c.errf("model", "missing (e.g. gpt-4o-mini or claude-haiku-4-5)")
	}
	switch jm.provider {
	case "":
		jm.provider = ProviderOpenAI
		if strings.HasPrefix(jm.model, "claude") {
			jm.provider = ProviderAnthropic
		}
	case ProviderOpenAI, ProviderAnthropic:
	default:
		return nil, c.errf("provider", "unknown provider %q (want openai or anthropic)", jm.provider)
	}
	if t, ok, err := c.num(m, "temperature"); err != nil {
		return nil, err
	} else if ok {
		if t < 0 || t > 2 {
			return nil, c.errf("temperature", "must be between 0 and 2, got %v", t)
		}
		jm.temperature = t
	}
	if n, ok, err := c.num(m, "maxTokens"); err != nil {
		return nil, err
	} else if ok {
		if n < 1 || n != float64(int(n)) {
			return nil, c.errf("maxTokens", "must be a positive integer, got %v", n)
		}
		jm.maxTokens = int(n)
	}
	if jm.baseURL, err = c.str(m, "baseURL"); err != nil {
		return nil, err
	}
	explicitBase := jm.baseURL != ""
	envBase, envKey, defBase := "OPENAI_BASE_URL", "OPENAI_API_KEY", "https://api.openai.com/v1"
	if jm.provider == ProviderAnthropic {
		envBase, envKey, defBase = "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "https://api.anthropic.com"
	}
	if jm.baseURL == "" {
		jm.baseURL = c.opts.getenv(envBase)
		explicitBase = jm.baseURL != ""
	}
	if jm.baseURL == "" {
		jm.baseURL = defBase
	}
	jm.baseURL = strings.TrimRight(jm.baseURL, "/")
	if jm.keyEnv, err = c.str(m, "apiKeyEnv"); err != nil {
		return nil, err
	}
	if jm.keyEnv == "" {
		jm.keyEnv = envKey
	}
	jm.key = c.opts.getenv(jm.keyEnv)
	if c.opts.SecretEnv != nil {
		c.opts.SecretEnv(jm.keyEnv)
	}
	if jm.key == "" && !explicitBase && !lenient {
		return nil, c.errf("apiKeyEnv", "environment variable %s is not set (the %s API key; set it, or name another variable with apiKeyEnv)", jm.keyEnv, jm.provider)
	}
	return jm, nil
}

// buildJudge builds an llm-judge grader from its config object.
func buildJudge(m map[string]any, c cfgCtx) (Grader, error) {
	prompt, err := c.str(m, "prompt")
	if err != nil {
		return nil, err
	}
	if pf, err := c.str(m, "promptFile"); err != nil {
		return nil, err
	} else if pf != "" {
		if prompt != "" {
			return nil, c.errf("promptFile", "give either prompt or promptFile, not both")
		}
		b, err := os.ReadFile(c.resolve(pf))
		if err != nil {
			return nil, c.errf("promptFile", "%v", err)
		}
		if err := c.opts.pins.add(c.resolve(pf)); err != nil {
			return nil, c.errf("promptFile", "%v", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return nil, c.errf("prompt", "missing (the mustache template sent to the judge model)")
	}
	tmpl, err := mustache.ParseStringRaw(prompt, true)
	if err != nil {
		return nil, c.errf("prompt", "invalid mustache template: %v", err)
	}
	if err := checkTags(tmpl.Tags()); err != nil {
		return nil, c.errf("prompt", "%v", err)
	}
	var schemaBytes []byte
	switch s := m["outputSchema"].(type) {
	case nil:
		schemaBytes = []byte(defaultJudgeSchema)
	case map[string]any:
		schemaBytes, _ = json.Marshal(s)
	case string:
		schemaBytes = []byte(s)
	default:
		return nil, c.errf("outputSchema", "must be a JSON Schema object, got %s", typeName(s))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaBytes))
	if err != nil {
		return nil, c.errf("outputSchema", "not JSON: %v", err)
	}
	comp := jsonschema.NewCompiler()
	const url = "mem:///judge-output-schema.json"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, c.errf("outputSchema", "%v", err)
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, c.errf("outputSchema", "invalid JSON Schema: %v", err)
	}
	var schemaDoc any
	_ = json.Unmarshal(schemaBytes, &schemaDoc)
	jm, err := parseModel(m, c, false)
	if err != nil {
		return nil, err
	}
	return &judge{
		name:      c.id("judge", m),
		tmpl:      tmpl,
		schema:    sch,
		schemaDoc: schemaDoc,
		model:     jm,
		timeout:   c.opts.timeout(DefaultTimeout),
		threshold: c.opts.threshold(),
		cache:     c.opts.JudgeCache,
	}, nil
}

// checkTags rejects variables the render context does not have. Names
// inside sections resolve against the section's value first, so only
// top-level names are checked.
func checkTags(tags []mustache.Tag) error {
	known := map[string]bool{}
	for _, v := range judgeVars {
		known[v] = true
	}
	var bad []string
	for _, t := range tags {
		switch t.Type() {
		case mustache.Partial:
			return fmt.Errorf("partials ({{>%s}}) are not supported", t.Name())
		case mustache.Variable, mustache.Section, mustache.InvertedSection:
			if !known[t.Name()] {
				bad = append(bad, t.Name())
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("unknown variable {{%s}} (variables: %s; values are text, so dotted names do not apply)", bad[0], strings.Join(judgeVars, ", "))
	}
	return nil
}

// judgeContext builds the mustache variables for a record.
func judgeContext(in *Input) map[string]any {
	r := in.Record
	f := in.fields()
	c := buildConv(in)
	// The JSON variables reach the prompt as the model should read them:
	// "<" and "&" as they are, not escaped for HTML.
	js := func(v any) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		enc.Encode(v)
		return strings.TrimSuffix(b.String(), "\n")
	}
	ctx := map[string]any{
		"messages":        js(c.openAIMessages()),
		"response":        r.Output,
		"lastUserMessage": f.input.Last(),
		"tools":           "",
		"toolCalls":       js(c.openAIToolCalls()),
		"systemPrompt":    "",
		"input":           f.input.Text(),
		"expected":        f.expected,
		"hint":            f.hint,
		"reference":       f.reference,
		"trajectory":      js(r.Trajectory),
		"id":              r.ID,
		"metadata":        js(r.Metadata),
	}
	if t, ok := r.Metadata["tools"]; ok {
		ctx["tools"] = js(t)
	}
	if s, ok := r.Metadata["systemPrompt"].(string); ok {
		ctx["systemPrompt"] = s
	}
	return ctx
}

// Name implements Grader.
func (j *judge) Name() string { return j.name }

// Grade implements Grader.
func (j *judge) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	r := j.grade(ctx, in)
	if r.Error != nil {
		r.Error.Message = j.model.scrub(r.Error.Message)
	}
	r.Reasoning = j.model.scrub(r.Reasoning)
	return finish(r, j.name, start)
}

func (j *judge) grade(ctx context.Context, in *Input) schemas.GraderResult {
	prompt, err := j.tmpl.Render(judgeContext(in))
	if err != nil {
		return failure(schemas.ErrGraderError, "rendering prompt: %v", err)
	}
	conv := j.model.newConversation(prompt, j.schemaDoc)
	var scope *cacheScope
	if j.cache != nil && in.Record != nil {
		scope = &cacheScope{cache: j.cache, id: in.Record.ID, trial: in.Record.Trial, draw: judgeDraw(ctx)}
	}
	var usage tokenUsage
	var lastErrs string
	for attempt := 0; attempt < 2; attempt++ {
		reply, err := j.model.call(ctx, conv, &usage, scope)
		if err != nil {
			res := failure(schemas.ErrGraderError, "judge call failed: %v", err)
			var ue *unreachableError
			if errors.As(err, &ue) {
				// Refused or unresolvable until the time ran out: the
				// judge is not there, which waiting longer would not
				// change.
				res = failure(schemas.ErrGraderError, "judge unreachable: %v", ue.error)
			} else if ctx.Err() != nil {
				res = failure(schemas.ErrGraderTimeout, "judge did not answer within %v: %v", j.timeout, err)
			}
			res.Usage = usage.json(j.model.model)
			return res
		}
		res, errs := j.check(reply.text)
		if errs == "" {
			res.Usage = usage.json(j.model.model)
			return res
		}
		lastErrs = errs
		conv.retry(reply, errs)
	}
	res := failure(schemas.ErrGraderInvalid, "judge reply did not match outputSchema after a retry: %s", truncate(lastErrs, 1000))
	res.Usage = usage.json(j.model.model)
	return res
}

// check validates a reply against the schema and the result rules; errs is
// empty when it is good.
func (j *judge) check(text string) (schemas.GraderResult, string) {
	b := []byte(stripFences(text))
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return schemas.GraderResult{}, "the reply is not JSON: " + err.Error()
	}
	if err := j.schema.Validate(inst); err != nil {
		msg := err.Error()
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			// Drop the first line, which names the synthetic schema URL.
			if _, rest, ok := strings.Cut(msg, "\n"); ok {
				msg = rest
			}
		}
		return schemas.GraderResult{}, strings.TrimSpace(msg)
	}
	r, ei := parseResult(b, j.threshold)
	if ei != nil {
		return r, ei.Message
	}
	var obj map[string]any
	_ = json.Unmarshal(b, &obj)
	// Every key of the judge's answer is kept in the outcome: none is
	// unknown.
	r.Outcome, r.Notes = obj, nil
	return r, ""
}

// stripFences removes a ```json fence some compatible servers add.
func stripFences(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```json")
		s = strings.TrimPrefix(s, "```")
		s = strings.TrimSuffix(strings.TrimSpace(s), "```")
	}
	return strings.TrimSpace(s)
}

// tokenUsage sums token counts over the calls of one grading. Calls
// answered from the judge cache are counted apart and spend no tokens.
type tokenUsage struct {
	calls, cached, input, output int64
}

func (u *tokenUsage) json(model string) json.RawMessage {
	if u.calls == 0 && u.cached == 0 {
		return nil
	}
	m := map[string]any{"model": model, "calls": u.calls, "inputTokens": u.input, "outputTokens": u.output, "totalTokens": u.input + u.output}
	if u.cached > 0 {
		m["cachedCalls"] = u.cached
	}
	b, _ := json.Marshal(m)
	return b
}

// scrub removes the API key from text that may be shown or stored.
func (m *judgeModel) scrub(s string) string {
	if m.key == "" || len(m.key) < 4 {
		return s
	}
	return strings.ReplaceAll(s, m.key, "[REDACTED]")
}

// modelReply is one answer of the model.
type modelReply struct {
	text string
	raw  json.RawMessage // provider-specific assistant content, for retries
	id   string          // Anthropic tool_use id
}

// conversation is the provider-specific message list of one grading.
type conversation struct {
	m        *judgeModel
	messages []any
	system   string
	schema   any
	tool     bool // Anthropic: reply through a forced tool call
}

func (m *judgeModel) newConversation(prompt string, schema any) *conversation {
	c := &conversation{m: m, schema: schema}
	if m.provider == ProviderAnthropic {
		if obj, ok := schema.(map[string]any); ok && obj["type"] == "object" {
			c.tool = true
		} else if schema != nil {
			sb, _ := json.Marshal(schema)
			prompt += "\n\nReply with only a JSON value (no prose, no code fence) that matches this JSON Schema:\n" + string(sb)
		}
	}
	c.messages = []any{map[string]any{"role": "user", "content": prompt}}
	return c
}

// newTextConversation is a plain question with an optional system prompt
// (for the target proxy): no schema, the reply is text.
func (m *judgeModel) newTextConversation(system, question string) *conversation {
	c := &conversation{m: m, system: system}
	c.messages = []any{map[string]any{"role": "user", "content": question}}
	if m.provider == ProviderOpenAI && system != "" {
		c.messages = append([]any{map[string]any{"role": "system", "content": system}}, c.messages...)
	}
	return c
}

// retry adds the bad reply and the validation errors to the conversation.
func (c *conversation) retry(r modelReply, errs string) {
	msg := "Your reply did not match the required JSON Schema:\n" + errs + "\nReply again with only the corrected JSON."
	if c.m.provider == ProviderAnthropic {
		c.messages = append(c.messages, map[string]any{"role": "assistant", "content": r.raw})
		if c.tool && r.id != "" {
			c.messages = append(c.messages, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": r.id, "is_error": true, "content": msg},
			}})
			return
		}
		c.messages = append(c.messages, map[string]any{"role": "user", "content": msg})
		return
	}
	c.messages = append(c.messages,
		map[string]any{"role": "assistant", "content": r.text},
		map[string]any{"role": "user", "content": msg})
}

// request builds the HTTP request body and endpoint of the next call.
func (c *conversation) request() (string, map[string]any) {
	m := c.m
	if m.provider == ProviderAnthropic {
		body := map[string]any{
			"model":       m.model,
			"max_tokens":  m.maxTokens,
			"temperature": m.temperature,
			"messages":    c.messages,
		}
		if c.system != "" {
			body["system"] = c.system
		}
		if c.tool {
			body["tools"] = []any{map[string]any{"name": "grade", "description": "Report the grading result.", "input_schema": c.schema}}
			body["tool_choice"] = map[string]any{"type": "tool", "name": "grade"}
		}
		return m.baseURL + "/v1/messages", body
	}
	body := map[string]any{
		"model":       m.model,
		"messages":    c.messages,
		"temperature": m.temperature,
		"max_tokens":  m.maxTokens,
	}
	if c.schema != nil {
		body["response_format"] = map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": "grader_result", "schema": c.schema, "strict": false},
		}
	}
	return m.baseURL + "/chat/completions", body
}

// call sends the conversation, retrying 429, 5xx and transport errors with
// backoff, and returns the reply. With a cache scope, a reply stored for
// the same request and scope is returned without a call, and a new good
// reply is stored.
func (m *judgeModel) call(ctx context.Context, c *conversation, usage *tokenUsage, scope *cacheScope) (modelReply, error) {
	url, body := c.request()
	payload, err := json.Marshal(body)
	if err != nil {
		return modelReply{}, err
	}
	var key string
	if scope != nil {
		key = scope.key(m.provider, url, payload)
		if b, ok := scope.cache.Get(key); ok {
			var discard tokenUsage
			if reply, err := m.parseReply(b, &discard); err == nil {
				usage.cached++
				return reply, nil
			}
			// An entry that does not parse is asked again and replaced.
		}
	}
	var lastErr error
	for try := 0; ; try++ {
		status, respBody, hdr, err := m.post(ctx, url, payload)
		if err == nil && status == http.StatusOK {
			reply, err := m.parseReply(respBody, usage)
			if err == nil && scope != nil {
				scope.cache.Put(key, respBody)
			}
			return reply, err
		}
		if err != nil {
			lastErr = errors.New(m.scrub(err.Error()))
			if unreachable(err) && ctx.Err() == nil {
				lastErr = &unreachableError{lastErr}
			}
		} else {
			lastErr = fmt.Errorf("%s answered HTTP %d: %s", m.provider, status, m.scrub(truncate(strings.TrimSpace(string(respBody)), 500)))
			if status != http.StatusTooManyRequests && status < 500 {
				return modelReply{}, lastErr
			}
		}
		if try >= m.maxRetries || ctx.Err() != nil {
			return modelReply{}, lastErr
		}
		wait := m.backoff << try
		if hdr != nil {
			if s, err := strconv.Atoi(hdr.Get("Retry-After")); err == nil && s >= 0 {
				wait = min(time.Duration(s)*time.Second, 30*time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return modelReply{}, fmt.Errorf("%w (last: %w)", ctx.Err(), lastErr)
		case <-time.After(wait):
		}
	}
}

func (m *judgeModel) post(ctx context.Context, url string, payload []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if m.provider == ProviderAnthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
		if m.key != "" {
			req.Header.Set("x-api-key", m.key)
		}
	} else if m.key != "" {
		req.Header.Set("Authorization", "Bearer "+m.key)
	}
	resp, err := m.client.Do(req)
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

func (m *judgeModel) parseReply(b []byte, usage *tokenUsage) (modelReply, error) {
	usage.calls++
	if m.provider == ProviderAnthropic {
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
			return modelReply{}, fmt.Errorf("anthropic reply is not a messages response: %v", err)
		}
		usage.input += r.Usage.InputTokens
		usage.output += r.Usage.OutputTokens
		// The content goes back on a retry as it came, every block kind
		// included (a real API rejects a conversation missing one).
		var whole struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(b, &whole)
		reply := modelReply{raw: whole.Content}
		var texts []string
		for _, c := range r.Content {
			switch c.Type {
			case "tool_use":
				reply.text, reply.id = string(c.Input), c.ID
				return reply, nil
			case "text":
				texts = append(texts, c.Text)
			}
		}
		reply.text = strings.Join(texts, "")
		return reply, nil
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
		return modelReply{}, fmt.Errorf("reply is not a chat completion: %v", err)
	}
	usage.input += r.Usage.PromptTokens
	usage.output += r.Usage.CompletionTokens
	if len(r.Choices) == 0 {
		return modelReply{}, fmt.Errorf("chat completion has no choices")
	}
	msg := r.Choices[0].Message
	if msg.Content == nil {
		if msg.Refusal != nil {
			return modelReply{}, fmt.Errorf("the model refused: %s", *msg.Refusal)
		}
		return modelReply{}, fmt.Errorf("chat completion has no content")
	}
	return modelReply{text: *msg.Content}, nil
}

// unreachableError is a judge call that found no server: the connection
// was refused or the host name did not resolve.
type unreachableError struct{ error }

// Unwrap returns the error it wraps.
func (e *unreachableError) Unwrap() error { return e.error }

// unreachable says whether err is a failure to reach the server at all.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial"
}
