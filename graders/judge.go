package graders

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"harness/chatmodel"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cbroglie/mustache"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/judgecache"
	"harness/schemas"
)

// Judge providers.
const (
	ProviderOpenAI    = chatmodel.ProviderOpenAI    // OpenAI-compatible chat completions
	ProviderAnthropic = chatmodel.ProviderAnthropic // Anthropic messages
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
// proxy: the model and the variable its key came from.
type judgeModel struct {
	*chatmodel.Model
	keyEnv string
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
	jm := &judgeModel{Model: &chatmodel.Model{MaxTokens: 256, HTTP: c.opts.httpClient(), Backoff: 500 * time.Millisecond, MaxRetries: 4}}
	var err error
	if jm.Model.Model, err = c.str(m, "model"); err != nil {
		return nil, err
	}
	if jm.Provider, err = c.str(m, "provider"); err != nil {
		return nil, err
	}
	if jm.Model.Model == "" && lenient {
		jm.Model.Model = c.opts.getenv("AGENTV_TARGET_MODEL")
		if jm.Model.Model == "" {
			jm.Model.Model = "gpt-4o-mini"
			if jm.Provider == ProviderAnthropic {
				jm.Model.Model = "claude-haiku-4-5"
			}
		}
	}
	if jm.Model.Model == "" {
		return nil, c.errf("model", "missing (e.g. gpt-4o-mini or claude-haiku-4-5)")
	}
	switch jm.Provider {
	case "":
		jm.Provider = chatmodel.GuessProvider(jm.Model.Model)
	case ProviderOpenAI, ProviderAnthropic:
	default:
		return nil, c.errf("provider", "unknown provider %q (want openai or anthropic)", jm.Provider)
	}
	if t, ok, err := c.num(m, "temperature"); err != nil {
		return nil, err
	} else if ok {
		if t < 0 || t > 2 {
			return nil, c.errf("temperature", "must be between 0 and 2, got %v", t)
		}
		jm.Temperature = t
	}
	if n, ok, err := c.num(m, "maxTokens"); err != nil {
		return nil, err
	} else if ok {
		if n < 1 || n != float64(int(n)) {
			return nil, c.errf("maxTokens", "must be a positive integer, got %v", n)
		}
		jm.MaxTokens = int(n)
	}
	if jm.BaseURL, err = c.str(m, "baseURL"); err != nil {
		return nil, err
	}
	explicitBase := jm.BaseURL != ""
	def := chatmodel.Defaults(jm.Provider)
	if jm.BaseURL == "" {
		jm.BaseURL = c.opts.getenv(def.BaseURLEnv)
		explicitBase = jm.BaseURL != ""
	}
	if jm.BaseURL == "" {
		jm.BaseURL = def.BaseURL
	}
	jm.BaseURL = strings.TrimRight(jm.BaseURL, "/")
	if jm.keyEnv, err = c.str(m, "apiKeyEnv"); err != nil {
		return nil, err
	}
	if jm.keyEnv == "" {
		jm.keyEnv = def.KeyEnv
	}
	jm.Key = c.opts.getenv(jm.keyEnv)
	if c.opts.SecretEnv != nil {
		c.opts.SecretEnv(jm.keyEnv)
	}
	if jm.Key == "" && !explicitBase && !lenient {
		return nil, c.errf("apiKeyEnv", "environment variable %s is not set (the %s API key; set it, or name another variable with apiKeyEnv)", jm.keyEnv, jm.Provider)
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
		r.Error.Message = j.model.Scrub(r.Error.Message)
	}
	r.Reasoning = j.model.Scrub(r.Reasoning)
	return finish(r, j.name, start)
}

func (j *judge) grade(ctx context.Context, in *Input) schemas.GraderResult {
	prompt, err := j.tmpl.Render(judgeContext(in))
	if err != nil {
		return failure(schemas.ErrGraderError, "rendering prompt: %v", err)
	}
	conv := j.model.NewConversation(prompt, j.schemaDoc, judgeTool)
	var usage chatmodel.Usage
	opts := chatmodel.CallOptions{Usage: &usage}
	if j.cache != nil && in.Record != nil {
		scope := &cacheScope{id: in.Record.ID, trial: in.Record.Trial, draw: judgeDraw(ctx)}
		opts.Cache, opts.Key = j.cache, scope.key
	}
	var lastErrs string
	for attempt := 0; attempt < 2; attempt++ {
		reply, err := j.model.Call(ctx, conv, opts)
		if err != nil {
			res := failure(schemas.ErrGraderError, "judge call failed: %v", err)
			var ue *chatmodel.UnreachableError
			if errors.As(err, &ue) {
				// Refused or unresolvable until the time ran out: the
				// judge is not there, which waiting longer would not
				// change.
				res = failure(schemas.ErrGraderError, "judge unreachable: %v", ue.Unwrap())
			} else if ctx.Err() != nil {
				res = failure(schemas.ErrGraderTimeout, "judge did not answer within %v: %v", j.timeout, err)
			}
			res.Usage = usageJSON(usage, j.model.Model.Model)
			return res
		}
		res, errs := j.check(reply.Text)
		if errs == "" {
			res.Usage = usageJSON(usage, j.model.Model.Model)
			return res
		}
		lastErrs = errs
		conv.Retry(reply, errs)
	}
	res := failure(schemas.ErrGraderInvalid, "judge reply did not match outputSchema after a retry: %s", truncate(lastErrs, 1000))
	res.Usage = usageJSON(usage, j.model.Model.Model)
	return res
}

// check validates a reply against the schema and the result rules; errs is
// empty when it is good.
func (j *judge) check(text string) (schemas.GraderResult, string) {
	b := []byte(chatmodel.StripFences(text))
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

// judgeTool is the reply the judge's schema asks for.
var judgeTool = chatmodel.Tool{Name: "grade", Description: "Report the grading result.", Format: "grader_result"}

// usageJSON is the usage of one grading's calls on its result.
func usageJSON(u chatmodel.Usage, model string) json.RawMessage {
	if u.Calls == 0 && u.Cached == 0 {
		return nil
	}
	m := map[string]any{"model": model, "calls": u.Calls, "inputTokens": u.Input, "outputTokens": u.Output, "totalTokens": u.Input + u.Output}
	if u.Cached > 0 {
		m["cachedCalls"] = u.Cached
	}
	b, _ := json.Marshal(m)
	return b
}
