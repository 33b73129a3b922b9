package graders

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cbroglie/mustache"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/internal/safefile"
	"harness/internal/suggest"
	"harness/schemas"
)

// assertKeys are the keys of an assert grader.
var assertKeys = []string{"assert"}

// assertionTypes are the assertions of the assert grader (each also with a
// not- prefix).
var assertionTypes = []string{"equals", "contains", "icontains", "contains-any", "contains-all", "regex", "starts-with",
	"levenshtein", "is-json", "json-schema", "javascript", "llm-rubric",
	"file-exists", "file-contains", "file-matches", "files-unchanged", "command-succeeds", "tool-called",
	"no-tool-errors", "max-tool-calls", "max-turns", "max-duration", "max-tokens", "latency", "cost"}

// assertionInstead says, for assertion types of other tools harness does
// not run, what to write instead.
var assertionInstead = map[string]string{
	"python":                "Python does not run in-process: make it a script grader, {type: script, command: [python3, check.py]} (it reads the record as JSON on stdin and prints {\"pass\": ..., \"score\": ...})",
	"similar":               "use an llm-rubric assertion, or a grader {type: llm-judge, prompt: ...}",
	"model-graded-closedqa": "use an llm-rubric assertion, or a grader {type: llm-judge, prompt: ...}",
	"factuality":            "use an llm-rubric assertion, or a grader {type: llm-judge, prompt: ...}",
}

// orList lists words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// assertion is one declarative check: its kind, whether it is negated
// ("not-" prefix), its weight and its check function.
type assertion struct {
	text   string
	negate bool
	weight float64
	check  func(ctx context.Context, in *Input) (bool, string)
	// runs says the check starts a process (command-succeeds).
	runs bool
}

// assertGrader checks a record against declarative assertions, in the
// shape promptfoo users know; each is a check, the score their weighted
// fraction; the record passes when every assertion holds (or, with a
// threshold, when the score reaches it).
type assertGrader struct {
	name      string
	asserts   []assertion
	threshold *float64
	opts      Options
}

func buildAssert(m map[string]any, c cfgCtx) (Grader, error) {
	list, ok := m["assert"].([]any)
	if !ok || len(list) == 0 {
		return nil, c.errf("assert", "must be a non-empty list of assertions such as {type: contains, value: \"42\"}")
	}
	g := &assertGrader{name: c.id("assert", m), threshold: c.opts.Threshold, opts: c.opts}
	for i, item := range list {
		ac := c.sub(fmt.Sprintf("%s[%d]", c.field("assert"), i))
		am, ok := item.(map[string]any)
		if !ok {
			return nil, ac.errf("", "must be an object such as {type: contains, value: \"42\"}")
		}
		a, err := buildAssertion(am, ac)
		if err != nil {
			return nil, err
		}
		g.asserts = append(g.asserts, a)
	}
	return g, nil
}

func buildAssertion(m map[string]any, c cfgCtx) (assertion, error) {
	typ, err := c.str(m, "type")
	if err != nil {
		return assertion{}, err
	}
	a := assertion{weight: 1}
	if w, ok, err := c.num(m, "weight"); err != nil {
		return a, err
	} else if ok {
		if w < 0 {
			return a, c.errf("weight", "must not be negative")
		}
		a.weight = w
	}
	base, negate := strings.CutPrefix(typ, "not-")
	a.negate = negate
	str := func(k string) (string, error) {
		v, err := c.str(m, k)
		if err == nil && v == "" {
			err = c.errf(k, "missing (a %s assertion needs %s)", base, k)
		}
		return v, err
	}
	num := func(k string) (float64, error) {
		v, ok, err := c.num(m, k)
		if err == nil && !ok {
			err = c.errf(k, "missing (a %s assertion needs %s)", base, k)
		}
		return v, err
	}
	output := func(in *Input) string { return in.Record.Output }
	if slices.Contains(graderTypes, base) || slices.Contains(graderAliases, base) {
		// A grader as an assertion (agentv's assert: [{type: script,
		// command: [...]}]): it holds when the grader passes.
		return graderAssertion(m, c, a, base, negate)
	}
	switch base {
	case "contains-any", "contains-all":
		values, err := strList(m, "value", c)
		if err != nil {
			return a, err
		}
		if len(values) == 0 {
			return a, c.errf("value", "missing (a %s assertion needs a list of strings)", base)
		}
		a.text = fmt.Sprintf("output %s %q", base, values)
		a.check = func(_ context.Context, in *Input) (bool, string) {
			o := output(in)
			var missing []string
			for _, v := range values {
				if strings.Contains(o, v) {
					if base == "contains-any" {
						return true, ""
					}
				} else {
					missing = append(missing, v)
				}
			}
			if base == "contains-any" {
				return false, ""
			}
			return len(missing) == 0, strings.Join(missing, ", ")
		}
		return finishAssertion(a, negate), nil
	case "levenshtein":
		v, err := str("value")
		if err != nil {
			return a, err
		}
		limit, ok, err := c.num(m, "threshold")
		if err != nil {
			return a, err
		}
		if !ok {
			limit = 5 // promptfoo's default
		}
		a.text = fmt.Sprintf("output within edit distance %g of %q", limit, v)
		a.check = func(_ context.Context, in *Input) (bool, string) {
			d := suggest.Distance(strings.TrimSpace(output(in)), v)
			return float64(d) <= limit, fmt.Sprintf("distance %d", d)
		}
		return finishAssertion(a, negate), nil
	case "latency", "cost":
		limit, ok, err := c.num(m, "threshold")
		if err != nil {
			return a, err
		}
		if !ok {
			return a, c.errf("threshold", "missing (a %s assertion needs threshold: the most %s)", base, map[string]string{"latency": "milliseconds", "cost": "US dollars"}[base])
		}
		a.text = fmt.Sprintf("%s at most %g", base, limit)
		a.check = func(_ context.Context, in *Input) (bool, string) {
			r := in.Record
			if base == "latency" {
				d := schemas.RecordDuration(r)
				return float64(d) <= limit, fmt.Sprintf("%d ms", d)
			}
			if r.Cost == nil || r.Cost.USD == nil {
				return false, "the record has no cost in USD (give the run a price table)"
			}
			return *r.Cost.USD <= limit, fmt.Sprintf("$%g", *r.Cost.USD)
		}
		return finishAssertion(a, negate), nil
	case "javascript":
		code, err := str("value")
		if err != nil {
			return a, err
		}
		// promptfoo's variables: output, and context.vars.
		body := "var output = input.output; var context = {vars: {expected: input.expected, input: input.input}};\n"
		if strings.Contains(code, "return") {
			body += code
		} else {
			body += "return (" + strings.TrimSpace(code) + ");"
		}
		g, err := newJSScript(c.id("js", m), c.file+"#"+c.field("value"), scriptAt{}, body, c.opts.timeout(DefaultJSTimeout), c.opts.threshold())
		if err != nil {
			return a, c.errf("value", "%v", err)
		}
		return graderCheck(a, g, "javascript", negate), nil
	case "llm-rubric":
		rubric, err := str("value")
		if err != nil {
			return a, err
		}
		jm := map[string]any{"type": "llm-judge", "name": "llm-rubric", "prompt": RubricPrompt(rubric), "model": "gpt-4o-mini"}
		for _, k := range judgeKeys {
			if v, ok := m[k]; ok && k != "prompt" && k != "promptFile" {
				jm[k] = v
			}
		}
		g, err := buildConfig(jm, c)
		if err != nil {
			return a, err
		}
		a.runs = false
		return graderCheck(a, g, "rubric: "+rubric, negate), nil
	}
	switch base {
	case "equals", "contains", "icontains", "starts-with":
		tv, err := str("value")
		if err != nil {
			return a, err
		}
		value, err := templated(tv, c.errf)
		if err != nil {
			return a, err
		}
		a.text = fmt.Sprintf("output %s %q", base, tv)
		a.check = func(_ context.Context, in *Input) (bool, string) {
			v, why := value(in)
			if why != "" {
				return negate, why // a failure, negated or not
			}
			o := output(in)
			switch base {
			case "equals":
				return strings.TrimSpace(o) == strings.TrimSpace(v), ""
			case "contains":
				return strings.Contains(o, v), ""
			case "icontains":
				return strings.Contains(strings.ToLower(o), strings.ToLower(v)), ""
			}
			return strings.HasPrefix(strings.TrimSpace(o), v), ""
		}
	case "regex":
		v, err := str("value")
		if err != nil {
			return a, err
		}
		re, err := regexp.Compile(v)
		if err != nil {
			return a, c.errf("value", "not a regular expression: %v", err)
		}
		a.text = fmt.Sprintf("output matches /%s/", v)
		a.check = func(_ context.Context, in *Input) (bool, string) { return re.MatchString(output(in)), "" }
	case "is-json":
		a.text = "output is JSON"
		a.check = func(_ context.Context, in *Input) (bool, string) {
			return json.Valid([]byte(strings.TrimSpace(output(in)))), ""
		}
	case "json-schema":
		raw, ok := m["value"]
		if !ok {
			return a, c.errf("value", "missing (the JSON Schema the output must match)")
		}
		b, _ := json.Marshal(raw)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return a, c.errf("value", "%v", err)
		}
		comp := jsonschema.NewCompiler()
		if err := comp.AddResource("mem:///assert.json", doc); err != nil {
			return a, c.errf("value", "%v", err)
		}
		sch, err := comp.Compile("mem:///assert.json")
		if err != nil {
			return a, c.errf("value", "invalid JSON Schema: %v", err)
		}
		a.text = "output matches the JSON Schema"
		a.check = func(_ context.Context, in *Input) (bool, string) {
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(strings.TrimSpace(output(in))))
			if err != nil {
				return false, "not JSON"
			}
			if err := sch.Validate(v); err != nil {
				return false, trimEvidence(err.Error())
			}
			return true, ""
		}
	case "file-exists", "file-contains", "file-matches":
		p, err := str("path")
		if err != nil {
			return a, err
		}
		var want string
		var wantOf func(*Input) (string, string)
		var re *regexp.Regexp
		switch base {
		case "file-contains":
			if want, err = str("value"); err != nil {
				return a, err
			}
			if wantOf, err = templated(want, c.errf); err != nil {
				return a, err
			}
			a.text = fmt.Sprintf("%s contains %q", p, want)
		case "file-matches":
			rx, err := str("regex")
			if err != nil {
				return a, err
			}
			if re, err = regexp.Compile(rx); err != nil {
				return a, c.errf("regex", "not a regular expression: %v", err)
			}
			a.text = fmt.Sprintf("%s matches /%s/", p, rx)
		default:
			a.text = p + " exists"
		}
		a.check = func(_ context.Context, in *Input) (bool, string) {
			ws, why := workspaceOf(in)
			if ws == "" {
				return false, why
			}
			b, err := safefile.Read(filepath.Join(ws, filepath.Clean("/" + p)[1:]), 64<<20)
			if err != nil {
				return false, p + ": " + err.Error()
			}
			switch base {
			case "file-contains":
				w, why := wantOf(in)
				if why != "" {
					return negate, why // a failure, negated or not
				}
				return strings.Contains(string(b), w), ""
			case "file-matches":
				return re.Match(b), ""
			}
			return true, ""
		}
	case "files-unchanged":
		globs, err := strList(m, "value", c)
		if err != nil {
			return a, err
		}
		a.text = "unchanged: " + strings.Join(globs, ", ")
		a.check = func(_ context.Context, in *Input) (bool, string) {
			var touched []string
			if ws := in.Record.Workspace; ws != nil {
				for _, fc := range ws.FileChanges {
					for _, g := range globs {
						if ok, _ := filepath.Match(g, fc.Path); ok || strings.HasPrefix(fc.Path, strings.TrimSuffix(g, "**")) && strings.HasSuffix(g, "**") {
							touched = append(touched, fc.Path+" "+fc.Status)
							break
						}
					}
				}
			}
			return len(touched) == 0, strings.Join(touched, ", ")
		}
	case "command-succeeds":
		argv, err := c.command(m)
		if err != nil {
			return a, err
		}
		timeout := c.opts.timeout(DefaultTimeout)
		a.text = "succeeds: " + strings.Join(argv, " ")
		a.runs = true
		a.check = func(ctx context.Context, in *Input) (bool, string) {
			ws, why := workspaceOf(in)
			if ws == "" {
				return false, why
			}
			p := runProcess(ctx, argv, ws, append(os.Environ(), "AGENTV_WORKSPACE_PATH="+ws), nil, timeout, c.opts.Sandbox, in)
			if p.limit != "" {
				return false, "the sandbox ended it: " + p.limit
			}
			if p.exitCode == 0 && !p.timedOut {
				return true, ""
			}
			return false, trimEvidence(fmt.Sprintf("exit %d\n%s", p.exitCode, p.stderr))
		}
	case "tool-called":
		v, err := str("value")
		if err != nil {
			return a, err
		}
		a.text = "tool called: " + v
		a.check = func(_ context.Context, in *Input) (bool, string) {
			for _, s := range in.Record.Trajectory {
				if s.Type == schemas.StepToolCall && (s.Name == v || s.ToolName == v || s.Kind == v) {
					return true, ""
				}
			}
			return false, ""
		}
	case "no-tool-errors":
		a.text = "no tool call failed"
		a.check = func(_ context.Context, in *Input) (bool, string) {
			var failed []string
			for _, s := range in.Record.Trajectory {
				if s.Type == schemas.StepToolCall && s.Status == "failed" {
					failed = append(failed, s.Name)
				}
			}
			return len(failed) == 0, strings.Join(failed, ", ")
		}
	case "max-tool-calls", "max-turns", "max-duration", "max-tokens":
		limit, err := num("value")
		if err != nil {
			return a, err
		}
		a.text = fmt.Sprintf("%s %g", base, limit)
		a.check = func(_ context.Context, in *Input) (bool, string) {
			r := in.Record
			var got float64
			switch base {
			case "max-tool-calls":
				for _, s := range r.Trajectory {
					if s.Type == schemas.StepToolCall {
						got++
					}
				}
			case "max-turns":
				got = float64(max(r.TurnCount, len(r.Input.List)))
			case "max-duration":
				got = float64(r.Timing.Total)
			case "max-tokens":
				if r.Usage == nil || (r.Usage.TotalTokens == nil && r.Usage.InputTokens == nil && r.Usage.OutputTokens == nil) {
					return false, "the record has no token usage"
				}
				if r.Usage.TotalTokens != nil {
					got = float64(*r.Usage.TotalTokens)
				} else {
					got = float64(deref(r.Usage.InputTokens) + deref(r.Usage.OutputTokens))
				}
			}
			return got <= limit, fmt.Sprintf("%g", got)
		}
	case "":
		return a, c.errf("type", "missing (contains, regex, file-exists, tool-called, ...)")
	default:
		if instead, ok := assertionInstead[base]; ok {
			return a, c.errf("type", "harness has no %q assertion: %s", base, instead)
		}
		meant := ""
		if s := nearestAssertion(typ); s != "" {
			meant = fmt.Sprintf(": did you mean %q?", s)
		}
		return a, c.errf("type", "unknown assertion %q%s (want %s, optionally with a not- prefix)", typ, meant, orList(assertionTypes))
	}
	return finishAssertion(a, negate), nil
}

// finishAssertion words a negated assertion's text.
func finishAssertion(a assertion, negate bool) assertion {
	if negate {
		a.text = "not " + a.text
	}
	return a
}

// graderAssertion is a grader given as an assertion: it holds when the
// grader passes; its weight weighs it as any assertion's.
func graderAssertion(m map[string]any, c cfgCtx, a assertion, base string, negate bool) (assertion, error) {
	if negate {
		return a, c.errf("type", "a grader (%s) cannot be negated: give it as not-%s's opposite, or use a threshold", base, base)
	}
	sub := make(map[string]any, len(m))
	for k, v := range m {
		if k != "weight" {
			sub[k] = v
		}
	}
	g, err := buildConfig(sub, c)
	if err != nil {
		return a, err
	}
	_, a.runs = m["command"]
	text := g.Name()
	if n, ok := m["name"].(string); ok && n != "" {
		text = n
	}
	return graderCheck(a, g, text, false), nil
}

// graderCheck makes g the check of a: it holds when g passes; its
// reasoning, or its error, is the evidence.
func graderCheck(a assertion, g Grader, text string, negate bool) assertion {
	a.text = text
	a.check = func(ctx context.Context, in *Input) (bool, string) {
		r := g.Grade(ctx, in)
		if r.Error != nil {
			return negate, r.Error.Class + ": " + r.Error.Gist() // a failure, negated or not
		}
		return r.Pass, trimEvidence(r.Reasoning)
	}
	return finishAssertion(a, negate)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// strList reads a string or a list of strings.
func strList(m map[string]any, k string, c cfgCtx) ([]string, error) {
	switch v := m[k].(type) {
	case string:
		return []string{v}, nil
	case []any:
		var out []string
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, c.errf(fmt.Sprintf("%s[%d]", k, i), "must be a string")
			}
			out = append(out, s)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, c.errf(k, "missing (a glob or a list of globs)")
}

// workspaceOf returns the record's workspace copy, or why there is none.
func workspaceOf(in *Input) (string, string) {
	ws := in.Record.Workspace
	if ws == nil || ws.Path == "" {
		return "", "the record has no workspace: it was captured without a workspace template"
	}
	if st, err := os.Stat(ws.Path); err != nil || !st.IsDir() {
		return "", "the workspace copy " + ws.Path + " is gone"
	}
	return ws.Path, ""
}

// Name implements Grader.
func (g *assertGrader) Name() string { return g.name }

// Grade implements Grader.
func (g *assertGrader) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	var res schemas.GraderResult
	var total, got float64
	all := true
	for _, a := range g.asserts {
		ok, evidence := a.check(ctx, in)
		if a.negate {
			ok = !ok
		}
		check := schemas.Check{Text: a.text, Pass: ok}
		if evidence != "" {
			check.Evidence = evidence
		}
		res.Checks = append(res.Checks, check)
		total += a.weight
		if ok {
			got += a.weight
		} else {
			all = false
		}
	}
	if total > 0 {
		res.Score = got / total
	} else if all {
		res.Score = 1
	}
	res.Pass = all
	if g.threshold != nil {
		res.Pass = res.Score >= *g.threshold
	}
	passed := 0
	for _, c := range res.Checks {
		if c.Pass {
			passed++
		}
	}
	res.Reasoning = fmt.Sprintf("%d of %d assertions hold", passed, len(res.Checks))
	return finish(res, g.name, start)
}

// templated is an assertion's text value for each record: the text, or,
// when it holds mustache tags ({{expected}}, as promptfoo writes it), the
// text rendered with the judge prompt's variables. A template that
// renders empty (a case without the expected answer) fails the check with
// why; errf words an unknown variable as a config error of the field.
func templated(v string, errf func(field, format string, args ...any) error) (func(*Input) (value, why string), error) {
	if !strings.Contains(v, "{{") {
		return func(*Input) (string, string) { return v, "" }, nil
	}
	tmpl, err := mustache.ParseStringRaw(v, true)
	if err != nil {
		return nil, errf("value", "invalid mustache template: %v", err)
	}
	if err := checkTags(tmpl.Tags()); err != nil {
		return nil, errf("value", "%v", err)
	}
	return func(in *Input) (string, string) {
		out, err := tmpl.Render(judgeContext(in))
		switch {
		case err != nil:
			return "", fmt.Sprintf("value %s: %v", v, err)
		case out == "":
			return "", fmt.Sprintf("value %s is empty for this case", v)
		}
		return out, ""
	}, nil
}
