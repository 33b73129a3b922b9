// Package cost turns the tokens a record used into money: a price table
// per model, and the tokens of the agent's usage reports and of the judge's
// calls.
package cost

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"harness/schemas"
)

// Price is what a model's tokens cost, in USD per million.
type Price struct {
	Input      float64 `json:"input" yaml:"input"`
	Output     float64 `json:"output" yaml:"output"`
	CacheRead  float64 `json:"cacheRead,omitempty" yaml:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite,omitempty" yaml:"cacheWrite"`
}

// Table maps a model name to its price; "*" prices any model not listed.
type Table map[string]Price

// Lookup returns the price of a model.
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok && model != "" {
		return p, true
	}
	p, ok := t["*"]
	return p, ok
}

// LoadTable reads a price table file (YAML or JSON): model name to
// {input, output, cacheRead, cacheWrite}, USD per million tokens; a
// top-level "date" string (when the prices were taken) is skipped.
func LoadTable(name string) (Table, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("prices %s: %w", name, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("prices %s: not valid YAML or JSON: %v", name, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("prices %s: must map model names to {input, output, cacheRead, cacheWrite}", filepath.Base(name))
	}
	t := Table{}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "date" && v.Kind == yaml.ScalarNode {
			continue // when the prices were taken, as in the shipped table
		}
		p, err := ParsePrice(v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: field %q: %v", name, v.Line, k.Value, err)
		}
		t[k.Value] = p
	}
	return t, nil
}

// ParsePrice reads one price from a YAML (or JSON) node:
// {input, output, cacheRead, cacheWrite}, USD per million tokens.
func ParsePrice(v *yaml.Node) (Price, error) {
	var p Price
	if v.Kind != yaml.MappingNode {
		return p, fmt.Errorf("must be {input, output, cacheRead, cacheWrite} in USD per million tokens")
	}
	hasInput := false
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, n := v.Content[i], v.Content[i+1]
		f, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || err != nil || f < 0 {
			return p, fmt.Errorf("%s: must be a price ≥ 0 in USD per million tokens", k.Value)
		}
		switch strings.ReplaceAll(strings.ToLower(k.Value), "_", "") {
		case "input":
			p.Input, hasInput = f, true
		case "output":
			p.Output = f
		case "cacheread", "cached", "cachedinput":
			p.CacheRead = f
		case "cachewrite":
			p.CacheWrite = f
		default:
			return p, fmt.Errorf("%s: unknown key (known: input, output, cacheRead, cacheWrite)", k.Value)
		}
	}
	if !hasInput {
		return p, fmt.Errorf("input: missing")
	}
	return p, nil
}

// Of is the cost of one record: its agent's tokens, priced as agentModel
// (else the cost the agent reported itself, in USD), the calls of a model
// simulated user (each priced as it was recorded), and the tokens of every
// grading model call, priced by the model each names.
func Of(rec *schemas.CaptureRecord, t Table, agentModel string) *schemas.Cost {
	c := &schemas.Cost{}
	var usd float64
	priced := false
	if len(rec.ModelCalls) > 0 {
		// The ledger: each call priced by its model as it was recorded.
		usd, priced = addCalls(c, rec.ModelCalls)
	} else if u := rec.Usage; u != nil {
		c.InputTokens, c.OutputTokens = val(u.InputTokens), val(u.OutputTokens)
		c.CacheReadTokens, c.CacheWriteTokens = val(u.CachedReadTokens), val(u.CachedWriteTokens)
		agentTokens := c.InputTokens + c.OutputTokens + c.CacheReadTokens + c.CacheWriteTokens
		if p, ok := t.Lookup(agentModel); ok && agentTokens > 0 {
			usd += million(c.InputTokens, p.Input) + million(c.OutputTokens, p.Output) +
				million(c.CacheReadTokens, p.CacheRead) + million(c.CacheWriteTokens, p.CacheWrite)
			priced = true
		} else if own, ok := reportedUSD(u.Cost); ok {
			usd += own
			priced = true
		} else if agentTokens > 0 {
			name := agentModel
			if name == "" {
				name = "agent"
			}
			c.Unpriced = append(c.Unpriced, name)
		}
	}
	if u := rec.SimulatedUser; u != nil {
		for i := range u.Calls {
			k := &u.Calls[i]
			in, out := val(k.InputTokens)+val(k.CachedTokens)+val(k.CacheWriteTokens), val(k.OutputTokens)
			c.UserInputTokens += in
			c.UserOutputTokens += out
			switch {
			case k.USD != nil:
				usd += *k.USD
				priced = true
			case in+out > 0 && !slices.Contains(c.Unpriced, k.Model):
				c.Unpriced = append(c.Unpriced, k.Model)
			}
		}
	}
	for _, g := range graderUsages(rec) {
		g.InputTokens, g.OutputTokens = max(g.InputTokens, 0), max(g.OutputTokens, 0)
		c.JudgeInputTokens += g.InputTokens
		c.JudgeOutputTokens += g.OutputTokens
		if g.InputTokens+g.OutputTokens == 0 {
			continue
		}
		if p, ok := t.Lookup(g.Model); ok {
			usd += million(g.InputTokens, p.Input) + million(g.OutputTokens, p.Output)
			priced = true
		} else if !slices.Contains(c.Unpriced, g.Model) {
			c.Unpriced = append(c.Unpriced, g.Model)
		}
	}
	if priced {
		usd = schemas.RoundUSD(usd)
		c.USD = &usd
	}
	slices.Sort(c.Unpriced)
	return c
}

// addCalls adds the tokens of a ledger's calls to c and returns the USD of
// the priced ones; a call with tokens and no price names its model in
// Unpriced (its cost is unknown, never 0).
func addCalls(c *schemas.Cost, calls []schemas.ModelCall) (float64, bool) {
	var usd float64
	priced := false
	for i := range calls {
		k := &calls[i]
		in, out, cr, cw := val(k.InputTokens), val(k.OutputTokens), val(k.CachedTokens), val(k.CacheWriteTokens)
		c.InputTokens += in
		c.OutputTokens += out
		c.CacheReadTokens += cr
		c.CacheWriteTokens += cw
		switch {
		case k.USD != nil:
			usd += *k.USD
			priced = true
		case in+out+cr+cw > 0:
			name := k.Model
			if name == "" {
				name = k.Provider
			}
			if !slices.Contains(c.Unpriced, name) {
				c.Unpriced = append(c.Unpriced, name)
			}
		}
	}
	return usd, priced
}

// val reads a token count the agent reported; a negative one (an agent
// cannot un-spend tokens) counts as 0.
func val(p *int64) int64 {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

func million(tokens int64, perMillion float64) float64 {
	return float64(tokens) * perMillion / 1e6
}

// reportedUSD reads an ACP usage cost {amount, currency} in USD.
func reportedUSD(raw json.RawMessage) (float64, bool) {
	var c struct {
		Amount   *float64 `json:"amount"`
		Currency string   `json:"currency"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil || c.Amount == nil || !strings.EqualFold(c.Currency, "USD") || *c.Amount < 0 {
		return 0, false
	}
	return *c.Amount, true
}

// graderUsage is the usage a grader result reports for its model calls.
type graderUsage struct {
	Model        string `json:"model"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
}

// graderUsages collects the model usage of a record's grader results,
// nested ones (composites, several graders, per-case lists) included, each
// counted once.
func graderUsages(rec *schemas.CaptureRecord) []graderUsage {
	var out []graderUsage
	var walk func(r *schemas.GraderResult)
	walk = func(r *schemas.GraderResult) {
		if r == nil {
			return
		}
		subs := subResults(r.Outcome)
		if len(subs) == 0 && len(r.Usage) > 0 {
			var u graderUsage
			if json.Unmarshal(r.Usage, &u) == nil {
				out = append(out, u)
			}
		}
		for i := range subs {
			walk(&subs[i])
		}
	}
	if len(rec.Scores) > 0 {
		for i := range rec.Scores {
			walk(&rec.Scores[i])
		}
	} else {
		walk(rec.Score)
	}
	return out
}

// subResults reads the sub-grader results a combined result keeps in
// outcome.graders (Go values in memory, JSON objects once read back).
func subResults(outcome map[string]any) []schemas.GraderResult {
	raw, ok := outcome["graders"]
	if !ok {
		return nil
	}
	if rs, ok := raw.([]schemas.GraderResult); ok {
		return rs
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var rs []schemas.GraderResult
	if json.Unmarshal(b, &rs) != nil {
		return nil
	}
	return rs
}

// Format says what a cost amounts to, for people: "$0.0123 (1,234 tokens)".
func Format(c *schemas.Cost) string {
	if c == nil {
		return "no usage reported"
	}
	s := fmt.Sprintf("%s tokens", thousands(c.Tokens()))
	if c.JudgeInputTokens+c.JudgeOutputTokens > 0 {
		s += fmt.Sprintf(" (judge %s)", thousands(c.JudgeInputTokens+c.JudgeOutputTokens))
	}
	if c.UserInputTokens+c.UserOutputTokens > 0 {
		s += fmt.Sprintf(" (simulated user %s)", thousands(c.UserInputTokens+c.UserOutputTokens))
	}
	if c.USD != nil {
		s = fmt.Sprintf("$%.4f, %s", *c.USD, s)
	}
	if len(c.Unpriced) > 0 {
		s += "; no price for " + strings.Join(c.Unpriced, ", ")
	}
	return s
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Models lists the models of a table, sorted.
func (t Table) Models() []string {
	return slices.Sorted(maps.Keys(t))
}
