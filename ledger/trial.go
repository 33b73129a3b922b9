package ledger

import (
	"sort"

	"harness/cost"
	"harness/schemas"
)

// Annotate finishes a trial's calls, in place and sorted by start: the turn
// each was made in (turnStarts are the epoch ms each turn's prompt was
// sent), how many failed calls with the same request came before it in the
// trial (the agent's retries), and its cost from prices (absent when its
// model has no price: unknown, never 0). Replayed calls cost nothing.
func Annotate(calls []schemas.ModelCall, turnStarts []int64, prices cost.Table) {
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Start < calls[j].Start })
	failed := map[string]int{}
	for i := range calls {
		c := &calls[i]
		c.Turn = 0
		for t, at := range turnStarts {
			if c.Start >= at {
				c.Turn = t + 1
			}
		}
		if c.Turn == 0 && len(turnStarts) > 0 {
			c.Turn = 1 // made while the session started
		}
		c.Retry = failed[c.RequestHash]
		if c.Error != nil {
			failed[c.RequestHash]++
		}
		c.USD = Price(c, prices)
	}
}

// Price is a call's cost in USD from a price table, nil when its model has
// no price or it reported no tokens.
func Price(c *schemas.ModelCall, prices cost.Table) *float64 {
	if c.Replayed {
		zero := 0.0
		return &zero
	}
	if c.InputTokens == nil && c.OutputTokens == nil {
		return nil
	}
	p, ok := prices.Lookup(c.Model)
	if !ok || c.Model == "" {
		return nil
	}
	v := func(p *int64) float64 {
		if p == nil {
			return 0
		}
		return float64(*p)
	}
	usd := (v(c.InputTokens)*p.Input + v(c.CachedTokens)*p.CacheRead + v(c.CacheWriteTokens)*p.CacheWrite + v(c.OutputTokens)*p.Output) / 1e6
	usd = schemas.RoundUSD(usd)
	return &usd
}

// Failure says whether a trial ended on calls the provider failed: its
// last call failed (rate limit, overload, server or connection error) and
// the agent made no successful call after it. A refused request (another
// 4xx) is the agent's, not the provider's, and a replay's missing
// recording is the recording's (see Miss).
func Failure(calls []schemas.ModelCall) *schemas.ProviderFailure {
	if len(calls) == 0 {
		return nil
	}
	last := calls[len(calls)-1]
	if last.Error == nil || last.Error.Kind == schemas.ModelErrClient || last.Error.Kind == schemas.ModelErrNoRecord {
		return nil
	}
	n := 0
	for _, c := range calls {
		if c.Error != nil {
			n++
		}
	}
	return &schemas.ProviderFailure{Kind: last.Error.Kind, Message: last.Error.Message, Status: last.Status, Calls: n}
}

// Miss returns the index of the first call a replay had no recording of,
// or -1.
func Miss(calls []schemas.ModelCall) int {
	for i, c := range calls {
		if c.Error != nil && c.Error.Kind == schemas.ModelErrNoRecord {
			return i
		}
	}
	return -1
}

// Waited is the time (ms) the agent spent on the provider's failures: the
// union of the intervals from the start of each call the provider failed
// (rate limit, overload, server or connection error) to the start of the
// agent's next call that began after that call ended, or to until when
// none did. It is the failed calls' durations plus the agent's backoff
// after them. Calls that started before from are left out, and an
// interval still open at until counts at most maxOpen ms (0: no bound).
func Waited(calls []schemas.ModelCall, from, until, maxOpen int64) int64 {
	type span struct{ a, b int64 }
	var spans []span
	for i, c := range calls {
		if c.Start < from || !providerFailed(c) || c.Start >= until {
			continue
		}
		end := c.Start + c.Duration
		next := int64(-1)
		for j, d := range calls {
			if j != i && d.Start >= end && (next < 0 || d.Start < next) {
				next = d.Start
			}
		}
		b := next
		if b < 0 || b > until {
			b = until
			if maxOpen > 0 && b-end > maxOpen {
				b = max(end+maxOpen, c.Start)
			}
		}
		if b > c.Start {
			spans = append(spans, span{c.Start, b})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].a < spans[j].a })
	var total, reach int64
	for _, s := range spans {
		if s.a < reach {
			s.a = reach
		}
		if s.b > s.a {
			total += s.b - s.a
			reach = s.b
		}
	}
	return total
}

// providerFailed says a call failed on the provider's side.
func providerFailed(c schemas.ModelCall) bool {
	if c.Error == nil {
		return false
	}
	switch c.Error.Kind {
	case schemas.ModelErrRateLimit, schemas.ModelErrOverloaded, schemas.ModelErrServer, schemas.ModelErrConnection:
		return true
	}
	return false
}
