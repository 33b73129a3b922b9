package graders

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"harness/internal/suggest"
	"harness/schemas"
)

// casesKeys are the keys of a per-case grader config.
var casesKeys = []string{"cases", "default", "judge", "dir"}

// byCase grades each record with the graders of its case: agentv's
// per-test assert lists in one config. A case's graders all run; the
// record passes when every one passes (graders.Combine), its score their
// mean.
type byCase struct {
	name  string
	cases map[string][]Grader
	def   []Grader
}

// buildCases builds {cases: {ID: ASSERTS}, default: ASSERTS, judge: MODEL,
// dir: DIR}.
// ASSERTS is a list whose items are grader configs, paths of grader files,
// assertions ({type: contains, value: ...}) or strings, which are rubrics
// for an LLM judge (agentv's plain-string asserts) using the judge model
// settings of judge ({model, provider, baseURL, apiKeyEnv}); one item may
// stand alone.
func buildCases(m map[string]any, c cfgCtx) (Grader, error) {
	if d, err := c.str(m, "dir"); err != nil {
		return nil, err
	} else if d != "" {
		// Relative paths in the lists are relative to dir (harness run
		// writes such a config for the suite it came from).
		c.dir = c.resolve(d)
	}
	judge, ok := m["judge"].(map[string]any)
	if !ok && m["judge"] != nil {
		return nil, c.errf("judge", "must be an object such as {model: gpt-4o-mini}, got %s", typeName(m["judge"]))
	}
	cases, ok := m["cases"].(map[string]any)
	if !ok {
		return nil, c.errf("cases", "must be an object of case id to graders, got %s", typeName(m["cases"]))
	}
	g := &byCase{name: c.id("cases", m), cases: map[string][]Grader{}}
	for _, id := range slices.Sorted(maps.Keys(cases)) {
		list, err := c.sub(c.field("cases")+"."+id).assertList(cases[id], judge)
		if err != nil {
			return nil, err
		}
		g.cases[id] = list
	}
	if d, ok := m["default"]; ok && d != nil {
		list, err := c.sub(c.field("default")).assertList(d, judge)
		if err != nil {
			return nil, err
		}
		g.def = list
	}
	return g, nil
}

// assertList builds the graders of one assert list (or of one item).
func (c cfgCtx) assertList(v any, judge map[string]any) ([]Grader, error) {
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	if len(items) == 0 {
		return nil, c.errf("", "is empty: give at least one grader")
	}
	var out []Grader
	for i, item := range items {
		ic := c
		if ok {
			ic = c.sub(fmt.Sprintf("%s[%d]", c.path, i))
		}
		g, err := ic.assertItem(item, judge)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// assertItem builds one grader of an assert list.
func (c cfgCtx) assertItem(item any, judge map[string]any) (Grader, error) {
	switch x := item.(type) {
	case string:
		m := map[string]any{"type": "llm-judge", "name": x, "prompt": RubricPrompt(x)}
		for k, v := range judge {
			m[k] = v
		}
		if _, ok := m["model"]; !ok {
			m["model"] = "gpt-4o-mini"
		}
		return buildConfig(m, c)
	case map[string]any:
		typ, _ := x["type"].(string)
		if isAssertion(typ) {
			return buildConfig(map[string]any{"assert": []any{x}}, c)
		}
		if typ != "" && !slices.Contains(graderTypes, typ) && !slices.Contains(graderAliases, typ) {
			meant := nearestAssertion(typ)
			if meant == "" {
				meant = suggest.Nearest(typ, append(slices.Clone(graderTypes), graderAliases...))
			}
			if meant != "" {
				meant = fmt.Sprintf(": did you mean %q?", meant)
			}
			return nil, c.errf("type", "unknown type %q%s (want an assertion, %s, optionally with a not- prefix; or a grader type, %s)",
				typ, meant, orList(assertionTypes), orList(graderTypes))
		}
		if typ == "llm-judge" || typ == "judge" || typ == "llm_judge" || typ == "llm-grader" {
			for k, v := range judge {
				if _, set := x[k]; !set {
					x[k] = v
				}
			}
		}
		return buildConfig(x, c)
	}
	return nil, c.errf("", "must be a rubric (a string), a grader object or an assertion, got %s", typeName(item))
}

// isAssertion reports whether a type names one of the assert grader's
// assertions rather than a grader kind.
func isAssertion(typ string) bool {
	base, _ := strings.CutPrefix(typ, "not-")
	return slices.Contains(assertionTypes, base)
}

// nearestAssertion is the assertion typ was probably meant to be (its
// not- prefix kept), or "".
func nearestAssertion(typ string) string {
	base, negate := strings.CutPrefix(typ, "not-")
	s := suggest.Nearest(base, assertionTypes)
	if s != "" && negate {
		s = "not-" + s
	}
	return s
}

// RubricPrompt is the judge prompt of a plain-string rubric.
func RubricPrompt(rubric string) string {
	return "You are grading the answer of an AI coding agent against a rubric.\n\n" +
		"Rubric: " + rubric + "\n\nTask given to the agent:\n{{input}}\n\n" +
		"The agent's final answer:\n{{response}}\n\nWhat the agent did (tool calls):\n{{toolCalls}}\n\n" +
		"Does the agent's work meet the rubric? Reply with JSON: " +
		`{"pass": true or false, "score": a number from 0 to 1, "reasoning": "one or two sentences"}.`
}

// Name implements Grader.
func (g *byCase) Name() string { return g.name }

// Grade implements Grader.
func (g *byCase) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	id := in.Record.ID
	if in.Case != nil && in.Case.ID != "" {
		id = in.Case.ID
	}
	list, ok := g.cases[id]
	if !ok {
		list = g.def
	}
	if len(list) == 0 {
		return finish(failure(schemas.ErrGraderInvalid, "no graders for case %q (and no default)", id), g.name, start)
	}
	// The result names the graders of this case, not the by-case table
	// that picked them: a report says who failed the case.
	names := make([]string, len(list))
	for i, gr := range list {
		names[i] = gr.Name()
	}
	return finish(Combine(gradeAll(ctx, list, in)), strings.Join(names, " + "), start)
}
