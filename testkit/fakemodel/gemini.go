package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// gemini is the fake Gemini API (generativelanguage v1beta) that Gemini CLI
// calls: models/<model>:streamGenerateContent?alt=sse for main turns,
// :generateContent for its JSON side calls (the model router), and
// :countTokens / :embedContent.
type gemini struct {
	log  *Log
	opts Options
	done <-chan struct{}
	ids  atomic.Int64
}

// Gemini is the API of Gemini CLI: POST /v1beta/models/M:streamGenerateContent
// with SSE, and :generateContent.
func Gemini(log *Log, opts Options, done <-chan struct{}) http.Handler {
	return &gemini{log: log, opts: opts, done: done}
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	Thought          bool            `json:"thought,omitempty"`
	ThoughtSignature string          `json:"thoughtSignature,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiResponse `json:"functionResponse,omitempty"`
}

type geminiCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

type geminiResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiRequest struct {
	Contents []geminiContent `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

// functionOutput is the text of a functionResponse: its "output", else its
// "error", else the whole response.
func functionOutput(raw json.RawMessage) string {
	var r struct {
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	}
	json.Unmarshal(raw, &r)
	for _, v := range []json.RawMessage{r.Output, r.Error} {
		if len(v) == 0 {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	return string(raw)
}

func (g *gemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := base(g.log, g.opts, w, r)
	if req == nil {
		return
	}
	_, action, _ := strings.Cut(r.URL.Path, ":")
	switch action {
	case "countTokens":
		g.log.setReply(req, "count_tokens", "")
		writeJSON(w, map[string]any{"totalTokens": 123})
		return
	case "embedContent":
		g.log.setReply(req, "other", "")
		writeJSON(w, map[string]any{"embedding": map[string]any{"values": []float64{0.1, 0.2, 0.3}}})
		return
	case "batchEmbedContents":
		g.log.setReply(req, "other", "")
		writeJSON(w, map[string]any{"embeddings": []any{map[string]any{"values": []float64{0.1, 0.2, 0.3}}}})
		return
	case "streamGenerateContent", "generateContent":
	default:
		g.log.setReply(req, "other", "")
		writeJSON(w, map[string]any{})
		return
	}
	var in geminiRequest
	if err := json.Unmarshal(req.Body, &in); err != nil {
		g.log.setReply(req, "error: "+err.Error(), "")
		http.Error(w, fmt.Sprintf(`{"error":{"code":400,"message":%q,"status":"INVALID_ARGUMENT"}}`, err.Error()), http.StatusBadRequest)
		return
	}
	tools := map[string]bool{}
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			tools[f.Name] = true
		}
	}
	var last *geminiContent
	for i := len(in.Contents) - 1; i >= 0; i-- {
		if in.Contents[i].Role == "user" || in.Contents[i].Role == "" {
			last = &in.Contents[i]
			break
		}
	}
	var texts, results []string
	if last != nil {
		for _, p := range last.Parts {
			switch {
			case p.FunctionResponse != nil:
				results = append(results, functionOutput(p.FunctionResponse.Response))
			case p.Text != "" && !p.Thought:
				texts = append(texts, p.Text)
			}
		}
	}
	prompt := strings.Join(texts, "\n")
	var parts []geminiPart
	jsonSchema := in.GenerationConfig.ResponseJSONSchema
	if len(jsonSchema) == 0 {
		jsonSchema = in.GenerationConfig.ResponseSchema
	}
	switch {
	case in.GenerationConfig.ResponseMimeType == "application/json":
		g.log.setReply(req, "json", prompt)
		b, _ := json.Marshal(fromSchema(jsonSchema, 0))
		parts = []geminiPart{{Text: string(b)}}
	case len(results) > 0:
		g.log.setReply(req, "final", prompt)
		parts = []geminiPart{{Text: final(strings.Join(results, "\n"))}}
	case len(tools) == 0:
		g.log.setReply(req, "side", prompt)
		parts = []geminiPart{{Text: SideReply}}
	default:
		cmd := ParseCommand(prompt)
		name, args := g.toolFor(cmd, tools)
		if name == "" {
			g.log.setReply(req, "side", prompt)
			parts = []geminiPart{{Text: SideReply}}
			break
		}
		if cmd.Slow && !waitSlow(r.Context(), g.opts, g.done) {
			g.log.setReply(req, "cancelled", prompt)
			return
		}
		g.log.setReply(req, "tool:"+name, prompt)
		parts = []geminiPart{
			// "**Subject**" is Gemini's thought-title convention.
			{Text: "**Choosing a tool**\n" + thought(cmd, name), Thought: true},
			{Text: Preamble},
			{FunctionCall: &geminiCall{Name: name, Args: args}, ThoughtSignature: fmt.Sprintf("fakesig%d", g.ids.Add(1))},
		}
	}
	_, modelPath, _ := strings.Cut(strings.SplitN(r.URL.Path, ":", 2)[0], "/models/")
	chunk := func(ps []geminiPart, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": modelPath}
		if last {
			cand["finishReason"] = "STOP"
			u := g.opts.usage(Usage{Input: 100, Output: 20})
			um := map[string]any{"promptTokenCount": u.Input + u.Cached, "candidatesTokenCount": u.Output - u.Reasoning,
				"totalTokenCount": u.Input + u.Cached + u.Output}
			if u.Cached > 0 {
				um["cachedContentTokenCount"] = u.Cached
			}
			if u.Reasoning > 0 {
				um["thoughtsTokenCount"] = u.Reasoning
			}
			out["usageMetadata"] = um
		}
		return out
	}
	if action == "generateContent" {
		writeJSON(w, chunk(parts, true))
		return
	}
	s := newSSE(w, true, g.opts)
	for i, p := range parts {
		b, _ := json.Marshal(chunk([]geminiPart{p}, i == len(parts)-1))
		s.event("", b)
	}
}

// toolFor maps a command onto Gemini CLI's tools.
func (g *gemini) toolFor(c Command, tools map[string]bool) (string, map[string]any) {
	switch c.Op {
	case "read":
		if tools["read_file"] {
			return "read_file", map[string]any{"file_path": c.Path}
		}
	case "write":
		if tools["write_file"] {
			return "write_file", map[string]any{"file_path": c.Path, "content": c.Text}
		}
	case "plan":
		if tools["write_todos"] {
			var todos []map[string]any
			for _, p := range planSteps() {
				todos = append(todos, map[string]any{"description": p.Step, "status": p.Status})
			}
			return "write_todos", map[string]any{"todos": todos}
		}
	}
	shell := c.Shell
	if shell == "" {
		shell = "echo hi"
	}
	if tools["run_shell_command"] {
		return "run_shell_command", map[string]any{"command": shell, "description": "Run " + shell}
	}
	return "", nil
}

// fromSchema builds a value that satisfies a (Gemini or JSON) schema: the
// first enum value, the minimum of numbers (at least 1), every property of
// objects.
func fromSchema(raw json.RawMessage, depth int) any {
	var s struct {
		Type       any                        `json:"type"`
		Enum       []any                      `json:"enum"`
		Minimum    *float64                   `json:"minimum"`
		Properties map[string]json.RawMessage `json:"properties"`
		Items      json.RawMessage            `json:"items"`
	}
	if depth > 8 || json.Unmarshal(raw, &s) != nil {
		return "fake"
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	typ, _ := s.Type.(string)
	if list, ok := s.Type.([]any); ok && len(list) > 0 {
		typ, _ = list[0].(string)
	}
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		for k, v := range s.Properties {
			out[k] = fromSchema(v, depth+1)
		}
		return out
	case "array":
		if len(s.Items) == 0 {
			return []any{}
		}
		return []any{fromSchema(s.Items, depth+1)}
	case "integer", "number":
		if s.Minimum != nil && *s.Minimum > 1 {
			return *s.Minimum
		}
		return 1
	case "boolean":
		return false
	case "string":
		return "fake"
	}
	if len(s.Properties) > 0 {
		out := map[string]any{}
		for k, v := range s.Properties {
			out[k] = fromSchema(v, depth+1)
		}
		return out
	}
	return "fake"
}
