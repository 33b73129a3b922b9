package ledger_test

import (
	"testing"

	"harness/cost"
	"harness/ledger"
	"harness/schemas"
)

func n(v int64) *int64 { return &v }

func TestAnnotateTurnsRetriesAndPrices(t *testing.T) {
	prices := cost.Table{"known": {Input: 1, Output: 10, CacheRead: 0.1, CacheWrite: 2}}
	fail := &schemas.ModelCallError{Kind: schemas.ModelErrRateLimit, Message: "429"}
	calls := []schemas.ModelCall{
		{Model: "known", RequestHash: "b", Start: 1500, InputTokens: n(1000), CachedTokens: n(1000), CacheWriteTokens: n(1000), OutputTokens: n(1000)},
		{Model: "known", RequestHash: "b", Start: 1000, Status: 429, Error: fail},
		{Model: "known", RequestHash: "b", Start: 1100, Status: 429, Error: fail},
		{Model: "mystery", RequestHash: "c", Start: 2500, InputTokens: n(5), OutputTokens: n(5)},
	}
	ledger.Annotate(calls, []int64{900, 2000}, prices)
	if calls[0].RequestHash != "b" || calls[0].Retry != 0 || calls[1].Retry != 1 || calls[2].Retry != 2 {
		t.Errorf("retries: %+v", calls)
	}
	if calls[0].Turn != 1 || calls[3].Turn != 2 {
		t.Errorf("turns %d %d, want 1 2", calls[0].Turn, calls[3].Turn)
	}
	if u := calls[2].USD; u == nil || *u != 0.0131 {
		t.Errorf("priced call costs %v, want 0.0131", u)
	}
	if calls[3].USD != nil {
		t.Errorf("a model with no price costs %v, want unknown", *calls[3].USD)
	}
	c := cost.Of(&schemas.CaptureRecord{ModelCalls: calls}, nil, "")
	if c.USD == nil || *c.USD != 0.0131 || len(c.Unpriced) != 1 || c.Unpriced[0] != "mystery" || c.InputTokens != 1005 {
		t.Errorf("cost %+v", c)
	}
	if f := ledger.Failure(calls); f != nil {
		t.Errorf("a trial whose last call worked failed: %+v", f)
	}
	if f := ledger.Failure(calls[:2]); f == nil || f.Kind != schemas.ModelErrRateLimit || f.Calls != 2 {
		t.Errorf("failure %+v", f)
	}
}

func TestWaited(t *testing.T) {
	rate := &schemas.ModelCallError{Kind: schemas.ModelErrRateLimit, Message: "429"}
	over := &schemas.ModelCallError{Kind: schemas.ModelErrOverloaded, Message: "529"}
	refused := &schemas.ModelCallError{Kind: schemas.ModelErrClient, Message: "400"}
	calls := []schemas.ModelCall{
		{Start: 1000, Duration: 50, Status: 429, Error: rate}, // waits 1000..1300
		{Start: 1300, Duration: 20, Status: 529, Error: over}, // waits 1300..2000
		{Start: 1310, Duration: 900},                          // in flight meanwhile: the next call after 1320 is at 2000
		{Start: 2000, Duration: 100},
		{Start: 3000, Duration: 10, Status: 400, Error: refused}, // the agent's fault: not counted
		{Start: 4000, Duration: 100, Status: 429, Error: rate},   // no call after it: open until "until"
	}
	// A failure answered within the millisecond waits for the next call,
	// not for itself.
	instant := []schemas.ModelCall{{Start: 100, Status: 529, Error: over}, {Start: 600}}
	if got := ledger.Waited(instant, 0, 1000, 0); got != 500 {
		t.Errorf("a failure of no duration: waited %d, want 500", got)
	}
	for _, tc := range []struct {
		name                 string
		from, until, maxOpen int64
		want                 int64
	}{
		{"whole trial", 0, 5000, 0, 300 + 700 + 1000},
		{"open wait bounded", 0, 5000, 400, 300 + 700 + 500},
		{"from the second turn", 3500, 5000, 0, 1000},
		{"while the first call runs", 0, 1020, 0, 20},
		{"before any call", 0, 900, 0, 0},
	} {
		if got := ledger.Waited(calls, tc.from, tc.until, tc.maxOpen); got != tc.want {
			t.Errorf("%s: waited %d, want %d", tc.name, got, tc.want)
		}
	}
}
