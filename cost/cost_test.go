package cost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

func ptr(v int64) *int64 { return &v }

// The agent's tokens at its model's price, the judge's at its own, and the
// agent's own reported cost when its model has no price.
func TestOf(t *testing.T) {
	table := Table{"big": {Input: 3, Output: 15, CacheRead: 0.3}, "judge-m": {Input: 1, Output: 2}}
	rec := &schemas.CaptureRecord{
		Usage: &schemas.Usage{InputTokens: ptr(1000), OutputTokens: ptr(100), CachedReadTokens: ptr(500)},
		Score: &schemas.GraderResult{Outcome: map[string]any{"graders": []schemas.GraderResult{
			{Usage: json.RawMessage(`{"model":"judge-m","inputTokens":400,"outputTokens":50}`)},
			{Usage: json.RawMessage(`{"model":"other","inputTokens":10,"outputTokens":1}`)},
		}}},
	}
	c := Of(rec, table, "big")
	// 1000*3 + 100*15 + 500*0.3 + 400*1 + 50*2 = 5150 per million
	if c.USD == nil || *c.USD != 0.00515 || c.JudgeInputTokens != 410 || c.Tokens() != 2061 || strings.Join(c.Unpriced, ",") != "other" {
		t.Errorf("cost %+v (usd %v)", c, c.USD)
	}
	rec.Usage.Cost = json.RawMessage(`{"amount":0.25,"currency":"USD"}`)
	if c := Of(rec, table, "unknown"); c.USD == nil || *c.USD != 0.2505 {
		t.Errorf("the agent's own cost: %+v", c)
	}
}

// A hostile agent cannot spend negative tokens or dollars to escape a
// budget.
func TestNegativeUsageCountsAsNothing(t *testing.T) {
	rec := &schemas.CaptureRecord{Usage: &schemas.Usage{InputTokens: ptr(-1000000), OutputTokens: ptr(10), Cost: json.RawMessage(`{"amount":-5,"currency":"USD"}`)}}
	c := Of(rec, Table{}, "")
	if c.Tokens() != 10 || c.USD != nil {
		t.Errorf("negative usage: %+v", c)
	}
}

func TestLoadTable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	os.WriteFile(p, []byte("m: {input: 1, output: 2, cache_read: 0.1}\n\"*\": {input: 5}\n"), 0o644)
	tab, err := LoadTable(p)
	if err != nil || tab["m"].CacheRead != 0.1 {
		t.Fatalf("%v %v", tab, err)
	}
	if pr, ok := tab.Lookup("anything"); !ok || pr.Input != 5 {
		t.Errorf("the * row: %v %v", pr, ok)
	}
	os.WriteFile(p, []byte("m: {output: 2}\n"), 0o644)
	if _, err := LoadTable(p); err == nil || !strings.Contains(err.Error(), `p.yaml:1: field "m": input: missing`) {
		t.Errorf("missing input: %v", err)
	}
}

func TestBuiltinTable(t *testing.T) {
	tab, date := Builtin()
	if date == "" {
		t.Errorf("the shipped table has no date")
	}
	if p, ok := tab.Lookup("claude-sonnet-4-5-20250929"); !ok || p.Input != 3 || p.Output != 15 {
		t.Errorf("claude-sonnet-4-5-20250929 = %+v, %v", p, ok)
	}
	if _, ok := tab.Lookup("no-such-model"); ok {
		t.Errorf("an unknown model has a price")
	}
}
