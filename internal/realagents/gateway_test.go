package realagents

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/cost"
	"harness/headless"
	"harness/ledger"
	"harness/modelgateway"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// gatewayUsage is what the fake model servers bill for every answer in
// the gateway tests: counts no default would give.
var gatewayUsage = fakemodel.Usage{Input: 31, Cached: 7, CacheWrite: 3, Output: 17, Reasoning: 4}

// startGateway starts a model gateway for one test.
func startGateway(t *testing.T) *modelgateway.Gateway {
	t.Helper()
	g, err := modelgateway.Start(modelgateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// checkLedger compares a record's model calls with what the fake server
// answered: one call on the ledger for each model request it served, with
// its exact token counts (as the provider words them: in, cached, cache
// write, out, reasoning), and the record's usage their sums.
func checkLedger(t *testing.T, rec *schemas.CaptureRecord, srv *fakemodel.Server, want [5]int64) {
	t.Helper()
	served := 0
	for _, r := range srv.Requests() {
		if r.Reply != "count_tokens" && r.Reply != "other" {
			served++
		}
	}
	var model []schemas.ModelCall
	for _, c := range rec.ModelCalls {
		if c.API != "countTokens" && c.Provider != "other" {
			model = append(model, c)
		}
	}
	if served == 0 || len(model) != served {
		t.Fatalf("the fake server answered %d model requests, the ledger has %d: %+v", served, len(model), rec.ModelCalls)
	}
	v := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	for i, c := range model {
		got := [5]int64{v(c.InputTokens), v(c.CachedTokens), v(c.CacheWriteTokens), v(c.OutputTokens), v(c.ReasoningTokens)}
		if got != want || c.Status != 200 || c.Error != nil {
			t.Errorf("call %d (%s %s %s): tokens %v, status %d, error %+v; want tokens %v", i, c.Provider, c.API, c.Model, got, c.Status, c.Error, want)
		}
		if c.FirstToken == nil || *c.FirstToken > c.Duration || c.Turn != 1 {
			t.Errorf("call %d: firstToken %v, duration %d, turn %d", i, c.FirstToken, c.Duration, c.Turn)
		}
	}
	if rec.Usage == nil || v(rec.Usage.OutputTokens) != want[3]*int64(len(model)) {
		t.Errorf("usage %+v is not the ledger's sum", rec.Usage)
	}
}

func TestClaudeCodeThroughGateway(t *testing.T) {
	t.Parallel()
	sb, srv, agent := claudeSetup(t, fakemodel.Options{Usage: &gatewayUsage})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Gateway = startGateway(t)
	recs := runCases(t, cfg, "bash echo through-the-gateway")
	rec := recs[0]
	checkTurn(t, rec, true, true, "through-the-gateway")
	checkLedger(t, rec, srv, [5]int64{31, 7, 3, 17, -1})
	// Claude Code's models are in the shipped price table: the calls
	// are priced, and the record's cost is theirs.
	for _, c := range rec.ModelCalls {
		if c.Model != "" && c.USD == nil && c.InputTokens != nil {
			t.Errorf("call to %s has no price", c.Model)
		}
	}
	if c := cost.Of(rec, nil, ""); c.USD == nil || *c.USD <= 0 || len(c.Unpriced) > 0 {
		t.Errorf("cost %+v", c)
	}
}

func TestGeminiCLIThroughGateway(t *testing.T) {
	t.Parallel()
	sb, srv, agent := geminiSetup(t, fakemodel.Options{Usage: &gatewayUsage})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Auth = "gemini-api-key"
	cfg.Gateway = startGateway(t)
	recs := runCases(t, cfg, "bash echo through-the-gateway")
	checkTurn(t, recs[0], true, true, "through-the-gateway")
	// Gemini bills thoughts as output: 13 candidates + 4 thoughts.
	checkLedger(t, recs[0], srv, [5]int64{31, 7, -1, 17, 4})
}

func TestCodexThroughGateway(t *testing.T) {
	t.Parallel()
	sb, srv, agent := codexSetup(t, fakemodel.Options{Usage: &gatewayUsage})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Gateway = startGateway(t)
	recs := runCases(t, cfg, "bash echo through-the-gateway")
	checkTurn(t, recs[0], false, true, "through-the-gateway")
	checkLedger(t, recs[0], srv, [5]int64{31, 7, -1, 17, 4})
	// gpt-5.3-codex is not in the shipped table: unknown cost, not 0.
	if c := cost.Of(recs[0], nil, ""); c.USD != nil || len(c.Unpriced) != 1 {
		t.Errorf("cost %+v, want unpriced", c)
	}
}

// TestProviderErrorsThroughGateway: a 429 and a 503 the agent retries past
// are on the ledger as failed calls; a provider that keeps failing ends the
// trial owned by the provider: the infrastructure's failure.
func TestProviderErrorsThroughGateway(t *testing.T) {
	t.Parallel()
	sb, _, agent := claudeSetup(t, fakemodel.Options{Fail: []int{429, 503}})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Gateway = startGateway(t)
	cfg.WorkingTime = true
	rec := runCases(t, cfg, "bash echo after-retries")[0]
	checkTurn(t, rec, true, true, "after-retries")
	// Claude Code's backoff after the two failures is the record's waited.
	if w := ledger.Waited(rec.ModelCalls, 0, rec.Timing.End, 0); rec.Timing.Waited <= 0 || rec.Timing.Waited != w {
		t.Errorf("timing.waited %d, want the ledger's %d (> 0)", rec.Timing.Waited, w)
	}
	t.Logf("Claude Code waited %d ms on 2 failures of %d calls, in a turn of %d ms", rec.Timing.Waited, len(rec.ModelCalls), rec.Timing.Total)
	var kinds []string
	for _, c := range rec.ModelCalls {
		if c.Error != nil {
			kinds = append(kinds, c.Error.Kind)
		}
	}
	if len(kinds) != 2 || kinds[0] != schemas.ModelErrRateLimit || kinds[1] != schemas.ModelErrServer {
		t.Errorf("failed calls %v, want rate_limit then server", kinds)
	}
	if rec.ProviderFailure != nil {
		t.Errorf("the agent got past the errors, yet the provider owns the trial: %+v", rec.ProviderFailure)
	}

	fails := make([]int, 1000)
	for i := range fails {
		fails[i] = 529
	}
	sb, _, agent = claudeSetup(t, fakemodel.Options{Fail: fails})
	cfg, _ = baseConfig(t, sb, agent)
	cfg.Gateway = startGateway(t)
	rec = runCases(t, cfg, "bash echo never")[0]
	if f := rec.ProviderFailure; f == nil || f.Kind != schemas.ModelErrOverloaded || f.Status != 529 || f.Calls < 2 {
		t.Fatalf("providerFailure %+v after %d calls; error %+v", rec.ProviderFailure, len(rec.ModelCalls), rec.Error)
	}
	// The ledger makes the failure the infrastructure's, whatever the
	// agent made of it, with the provider's status and kind.
	if e := rec.Error; e == nil || e.Owner != schemas.OwnerInfra || !strings.HasPrefix(e.Evidence, "provider answered 529 (overloaded); ") {
		t.Errorf("error %+v, want the infrastructure's with the provider's 529 as evidence", rec.Error)
	}
}

// TestClaudeCodeWorkingLimit: Claude Code retries past a 429 and a 529
// that each ask it to wait 4s. Counted in wall time its turn outlasts an
// 8s limit by those waits alone; counted in working time (WorkingTime) it
// completes, the waits on the record's timing.waited.
func TestClaudeCodeWorkingLimit(t *testing.T) {
	t.Parallel()
	const after = 4 * time.Second
	run := func(working bool) *schemas.CaptureRecord {
		sb, _, agent := claudeSetup(t, fakemodel.Options{Fail: []int{429, 529}, RetryAfter: after})
		cfg, _ := baseConfig(t, sb, agent)
		cfg.Gateway = startGateway(t)
		cfg.TurnTimeout, cfg.WorkingTime = 2*after, working
		return runCases(t, cfg, "bash echo after-waits")[0]
	}
	wall := run(false)
	if wall.Error == nil || wall.Error.Class != schemas.ErrTimeout {
		t.Fatalf("wall time: error %+v, want a timeout (waited %d ms)", wall.Error, wall.Timing.Waited)
	}
	rec := run(true)
	checkTurn(t, rec, true, true, "after-waits")
	if rec.Timing.Waited < 2*after.Milliseconds() {
		t.Errorf("timing.waited %d ms, want at least the two waits the provider asked for (%d ms)", rec.Timing.Waited, 2*after.Milliseconds())
	}
	t.Logf("working time: a turn of %d ms, %d waited on the provider", rec.Timing.Total, rec.Timing.Waited)
}

// TestClaudeHeadlessThroughGateway: an agent run through an adapter (claude
// -p, a process a turn) goes through the gateway too: each turn's process
// gets the unit's route, and every call of both turns is on the record's
// ledger with its turn.
func TestClaudeHeadlessThroughGateway(t *testing.T) {
	t.Parallel()
	script := nodeAgent(t, "@anthropic-ai/claude-agent-sdk/cli.js")
	srv := startModel(t, fakemodel.Anthropic, fakemodel.Options{Usage: &gatewayUsage})
	sb := newSandbox(t,
		"ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
	)
	sb.Env = append(sb.Env, "CLAUDE_CONFIG_DIR="+filepath.Join(sb.Home, ".claude"))
	cfg, _ := baseConfig(t, sb, []string{"node", script})
	cfg.Gateway = startGateway(t)
	rec := runHeadless(t, cfg, headless.ClaudeStreamJSON, multi("two", "bash echo gateway-turn-one", "bash echo gateway-turn-two"))[0]
	checkTurn(t, rec, true, true, "gateway-turn-two")
	served := 0
	for _, r := range srv.Requests() {
		if strings.Contains(r.Path, "/messages") && !strings.Contains(r.Path, "count_tokens") {
			served++
		}
	}
	turns := map[int]int{}
	for _, c := range rec.ModelCalls {
		if c.API == "messages" {
			turns[c.Turn]++
			if c.OutputTokens == nil || *c.OutputTokens != gatewayUsage.Output {
				t.Errorf("call %+v: want %d output tokens", c, gatewayUsage.Output)
			}
		}
	}
	if served == 0 || turns[1]+turns[2] != served || turns[1] == 0 || turns[2] == 0 {
		t.Fatalf("the fake served %d model requests; the ledger's messages calls by turn: %v", served, turns)
	}
	if rec.AgentUsage == nil {
		t.Errorf("the agent's own report (its result event's usage) is not kept beside the ledger's sums")
	}
}
