package suiterun

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"harness/schemas"
	"harness/suite"
)

func usd(x float64) *float64 { return &x }

func TestSuiteBudget(t *testing.T) {
	s := parse(t, map[string]string{"suite.yaml": `tests: [{id: a, input: x}]
max-cost: 2.5
max-tokens: 1000
`})
	b, err := SuiteBudget(s, 0, 0)
	if err != nil || b != (Budget{Cost: 2.5, Tokens: 1000, CostLine: 2, TokensLine: 3}) {
		t.Errorf("from the suite: %+v, %v", b, err)
	}
	// The caller's limits win over the suite's.
	b, err = SuiteBudget(s, 1, 10)
	if err != nil || b != (Budget{Cost: 1, Tokens: 10}) {
		t.Errorf("given: %+v, %v", b, err)
	}
	bad := parse(t, map[string]string{"suite.yaml": `tests: [{id: a, input: x}]
max-tokens: -3
`})
	_, err = SuiteBudget(bad, 0, 0)
	var ie *schemas.InputError
	if !errors.As(err, &ie) || ie.Line != 2 || ie.Field != "max-tokens" || ie.File != bad.File {
		t.Errorf("negative suite limit: %v", err)
	}
}

func TestBudgetReached(t *testing.T) {
	b := Budget{Cost: 1, Tokens: 100}
	for _, tc := range []struct {
		spent *schemas.Cost
		want  Limit
	}{
		{nil, NoLimit},
		{&schemas.Cost{USD: usd(0.5), InputTokens: 10}, NoLimit},
		{&schemas.Cost{USD: usd(1), InputTokens: 10}, CostLimit},
		{&schemas.Cost{USD: usd(2), InputTokens: 200}, CostLimit},
		{&schemas.Cost{InputTokens: 60, OutputTokens: 40}, TokensLimit},
	} {
		if got := b.Reached(tc.spent); got != tc.want {
			t.Errorf("Reached(%+v) = %v, want %v", tc.spent, got, tc.want)
		}
	}
	if got := (Budget{}).Reached(&schemas.Cost{USD: usd(1e9), InputTokens: 1e9}); got != NoLimit {
		t.Errorf("no budget reached %v", got)
	}
}

func TestBudgetLeft(t *testing.T) {
	b := Budget{Cost: 1, Tokens: 100}
	if got := b.Left(nil); got != b {
		t.Errorf("nothing spent: %+v", got)
	}
	if got := b.Left(&schemas.Cost{USD: usd(0.25), InputTokens: 30}); got != (Budget{Cost: 0.75, Tokens: 70}) {
		t.Errorf("some spent: %+v", got)
	}
	// Spent in full: the smallest limit, never none.
	got := b.Left(&schemas.Cost{USD: usd(3), InputTokens: 300})
	if got.Cost <= 0 || got.Cost > 1e-9 || got.Tokens != 1 {
		t.Errorf("all spent: %+v", got)
	}
	if got := (Budget{Tokens: 5}).Left(&schemas.Cost{USD: usd(3)}); got != (Budget{Tokens: 5}) {
		t.Errorf("no cost limit: %+v", got)
	}
}

func TestAgentTrialsProtectsInBwrap(t *testing.T) {
	s := parse(t, map[string]string{
		"prompts.jsonl": promptsWithAssert,
		"suite.yaml": `prompts: prompts.jsonl
k: 3
sandbox: bwrap
workspace: {template: ., before_each: make}
agents:
  a: {command: [a], env: {K: v}, model: m, adapter: codex-json}
  b: {command: [b], sandbox: bwrap, flags: {sandbox: none}}
`,
	})
	s.K = 3
	out := filepath.Join(t.TempDir(), "a.jsonl")
	tr := AgentTrials(s, &s.Agents[0], out, Budget{Tokens: 10}, &schemas.Cost{InputTokens: 4}, 1)
	want := Trials{
		K: 3, Output: out, Workspace: suite.Workspace{Template: s.Dir, Setup: "make"},
		Protect: []string{filepath.Dir(out), s.File, s.PromptsFile},
		Adapter: "codex-json", Model: "m", Env: []string{"K=v"}, Budget: Budget{Tokens: 6},
	}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("agent a:\n%+v\nwant\n%+v", tr, want)
	}
	// The agent's own flags override its sandbox key and the suite's.
	tr = AgentTrials(s, &s.Agents[1], out, Budget{}, nil, 1)
	if tr.Protect != nil || tr.Sandbox != "bwrap" {
		t.Errorf("agent b out of the sandbox: sandbox %q, protect %v", tr.Sandbox, tr.Protect)
	}
}

// An agent gets an equal share of what the agents before it left; a
// replayed agent none, and it needs none.
func TestBudgetShare(t *testing.T) {
	b := Budget{Cost: 1, Tokens: 100}
	if got := b.Share(nil, 2); got != (Budget{Cost: 0.5, Tokens: 50}) {
		t.Errorf("first of two: %+v", got)
	}
	// The first spent 0.2 of its 0.5: the second gets the 0.8 left.
	if got := b.Share(&schemas.Cost{USD: usd(0.2), InputTokens: 30}, 1); got != (Budget{Cost: 0.8, Tokens: 70}) {
		t.Errorf("last: %+v", got)
	}
	s := parse(t, map[string]string{"suite.yaml": `tests: [{id: a, input: x}]
agents:
  main: harness replay runs/main/main.jsonl
  pr: ./agent
`})
	if !Replayed(&s.Agents[0]) || Replayed(&s.Agents[1]) {
		t.Errorf("replayed: %v %v", Replayed(&s.Agents[0]), Replayed(&s.Agents[1]))
	}
	if tr := AgentTrials(s, &s.Agents[0], "", b, nil, 1); tr.Budget != (Budget{}) {
		t.Errorf("a replayed agent is given a budget: %+v", tr.Budget)
	}
}
