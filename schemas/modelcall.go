package schemas

import "slices"

// Model call error kinds: what went wrong with a call to the model
// provider, as the gateway saw it.
const (
	ModelErrRateLimit  = "rate_limit"   // HTTP 429
	ModelErrOverloaded = "overloaded"   // Anthropic 529 or an overloaded_error
	ModelErrServer     = "server"       // another 5xx
	ModelErrConnection = "connection"   // the provider could not be reached, or the stream broke
	ModelErrClient     = "client"       // another 4xx: the request was refused
	ModelErrNoRecord   = "no_recording" // replay: no recorded answer matches the request
)

// ModelCall is one HTTP call the agent made to its model provider through
// the run's model gateway: what it asked, what the provider answered and
// billed (its own usage fields), and how long it took.
type ModelCall struct {
	// Provider is the API family: "anthropic", "openai", "gemini", or
	// "other" for a request the gateway forwarded but does not parse.
	Provider string `json:"provider"`
	// API is the endpoint: "messages", "responses", "chat.completions",
	// "generateContent", "streamGenerateContent", "countTokens", or the
	// request path's last segment.
	API string `json:"api"`
	// Model is the model the request named (or the response, when the
	// request did not).
	Model string `json:"model,omitempty"`
	// RequestHash is the SHA-256 of the request body (hex).
	RequestHash string `json:"requestHash"`
	// Stream says the answer was a stream of server-sent events.
	Stream bool `json:"stream,omitempty"`
	// Start is when the request reached the gateway (epoch ms).
	Start int64 `json:"start"`
	// FirstToken is the time from the request to the first byte of the
	// answer's body (ms).
	FirstToken *int64 `json:"firstToken,omitempty"`
	// Duration is the time from the request to the answer's end (ms).
	Duration int64 `json:"duration"`
	// Status is the HTTP status the provider answered (0: none).
	Status int `json:"status"`
	// Token counts, from the provider's own usage fields; absent when it
	// reported none. InputTokens are the uncached input tokens.
	InputTokens      *int64 `json:"inputTokens,omitempty"`
	CachedTokens     *int64 `json:"cachedTokens,omitempty"`
	CacheWriteTokens *int64 `json:"cacheWriteTokens,omitempty"`
	OutputTokens     *int64 `json:"outputTokens,omitempty"`
	ReasoningTokens  *int64 `json:"reasoningTokens,omitempty"`
	// USD is the call's cost from the price table; absent when its model
	// has no price (unknown, never 0).
	USD *float64 `json:"usd,omitempty"`
	// Retry counts the calls with the same request before this one in the
	// trial that failed: the agent retrying.
	Retry int `json:"retry,omitempty"`
	// Turn is the prompt turn (1-based) the call was made in.
	Turn int `json:"turn,omitempty"`
	// Error is what went wrong, when the call failed.
	Error *ModelCallError `json:"error,omitempty"`
	// Replayed says the answer came from a recording, not the provider.
	Replayed bool `json:"replayed,omitempty"`
}

// ModelCallError is a failed model call: its kind (a ModelErr* constant)
// and the provider's message.
type ModelCallError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Diff, on a replay miss, is the difference between the request and
	// the nearest recorded one.
	Diff string `json:"diff,omitempty"`
}

// ProviderFailure says a trial ended on model calls that failed: the
// provider's fault (infrastructure), not the agent's.
type ProviderFailure struct {
	// Kind is the last failed call's error kind.
	Kind string `json:"kind"`
	// Message is that call's error message.
	Message string `json:"message"`
	// Status is that call's HTTP status (0: none).
	Status int `json:"status,omitempty"`
	// Calls counts the trial's failed calls.
	Calls int `json:"calls"`
}

// ModelCallsUsage sums a ledger's token counts into a Usage.
func ModelCallsUsage(calls []ModelCall) *Usage {
	if len(calls) == 0 {
		return nil
	}
	var in, cached, write, out, reason int64
	any := false
	for _, c := range calls {
		for _, p := range []struct {
			sum *int64
			v   *int64
		}{{&in, c.InputTokens}, {&cached, c.CachedTokens}, {&write, c.CacheWriteTokens}, {&out, c.OutputTokens}, {&reason, c.ReasoningTokens}} {
			if p.v != nil {
				*p.sum += *p.v
				any = true
			}
		}
	}
	if !any {
		return nil
	}
	total := in + cached + write + out
	return &Usage{InputTokens: &in, OutputTokens: &out, TotalTokens: &total, ThoughtTokens: &reason,
		CachedReadTokens: &cached, CachedWriteTokens: &write}
}

// ModelCallsSummary sums a ledger (or one turn of it): calls, failed
// calls, token counts and cost.
type ModelCallsSummary struct {
	// Turn is the prompt turn summed (0: every turn).
	Turn int `json:"turn,omitempty"`
	// Calls and Failed count the calls, and those with an error.
	Calls  int `json:"calls"`
	Failed int `json:"failed,omitempty"`
	// Token sums, as in ModelCall.
	InputTokens      int64 `json:"inputTokens"`
	CachedTokens     int64 `json:"cachedTokens"`
	CacheWriteTokens int64 `json:"cacheWriteTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	ReasoningTokens  int64 `json:"reasoningTokens,omitempty"`
	// USD sums the priced calls; absent when a call with tokens had no
	// price (the cost is unknown, not the priced part).
	USD *float64 `json:"usd,omitempty"`
	// Unpriced counts the calls with tokens and no price.
	Unpriced int `json:"unpriced,omitempty"`
}

// SumModelCalls sums the calls of turn (0: all of them).
func SumModelCalls(calls []ModelCall, turn int) ModelCallsSummary {
	s := ModelCallsSummary{Turn: turn}
	var usd float64
	for i := range calls {
		c := &calls[i]
		if turn != 0 && c.Turn != turn {
			continue
		}
		s.Calls++
		if c.Error != nil {
			s.Failed++
		}
		v := func(p *int64) int64 {
			if p == nil || *p < 0 {
				return 0
			}
			return *p
		}
		in, cached, write, out := v(c.InputTokens), v(c.CachedTokens), v(c.CacheWriteTokens), v(c.OutputTokens)
		s.InputTokens += in
		s.CachedTokens += cached
		s.CacheWriteTokens += write
		s.OutputTokens += out
		s.ReasoningTokens += v(c.ReasoningTokens)
		if c.USD != nil {
			usd += *c.USD
		} else if in+cached+write+out > 0 {
			s.Unpriced++
		}
	}
	if s.Unpriced == 0 {
		s.USD = &usd
	}
	return s
}

// ModelCallsByTurn sums a ledger turn by turn, in turn order (calls of no
// turn, made before the first prompt, are turn 0's, first).
func ModelCallsByTurn(calls []ModelCall) []ModelCallsSummary {
	seen := map[int]bool{}
	var turns []int
	for _, c := range calls {
		if !seen[c.Turn] {
			seen[c.Turn] = true
			turns = append(turns, c.Turn)
		}
	}
	slices.Sort(turns)
	var out []ModelCallsSummary
	for _, t := range turns {
		if t != 0 {
			out = append(out, SumModelCalls(calls, t))
			continue
		}
		// Only the calls of no turn (SumModelCalls' 0 is all of them).
		var none []ModelCall
		for _, c := range calls {
			if c.Turn == 0 {
				none = append(none, c)
			}
		}
		out = append(out, SumModelCalls(none, 0))
	}
	return out
}
