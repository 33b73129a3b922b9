package suiterun

import (
	"path/filepath"
	"strconv"

	"harness/schemas"
	"harness/suite"
)

// Budget is a run's spending limit, split between its agents in turn: an
// agent gets an equal share of what the ones before it left (Share), so
// the last agent is never starved by the first. Zero fields are no limit.
type Budget struct {
	// Cost is the most the run may cost, in USD.
	Cost float64
	// Tokens is the most tokens the run may use.
	Tokens int64
	// CostLine and TokensLine are the suite lines that set Cost and
	// Tokens: 0 when the caller gave them (or they are not set).
	CostLine, TokensLine int
}

// Limit names the limit of a Budget that was reached.
type Limit int

// The limits of a Budget.
const (
	// NoLimit: no limit was reached.
	NoLimit Limit = iota
	// CostLimit: the run has cost Budget.Cost.
	CostLimit
	// TokensLimit: the run has used Budget.Tokens tokens.
	TokensLimit
)

// SuiteBudget is the budget of a run: cost and tokens as given (the
// caller's own limits, zero for none), else the suite's max-cost and
// max-tokens keys. A suite value that is not a number ≥ 0 is an error
// naming the suite file, line and key.
func SuiteBudget(s *suite.Suite, cost float64, tokens int64) (Budget, error) {
	b := Budget{Cost: cost, Tokens: tokens}
	for _, f := range s.Flags {
		var err error
		switch {
		case f.Name == "max-cost" && cost == 0:
			b.Cost, err = strconv.ParseFloat(f.Values[len(f.Values)-1], 64)
			b.CostLine = f.Line
		case f.Name == "max-tokens" && tokens == 0:
			b.Tokens, err = strconv.ParseInt(f.Values[len(f.Values)-1], 10, 64)
			b.TokensLine = f.Line
		}
		if err != nil || b.Cost < 0 || b.Tokens < 0 {
			return b, &schemas.InputError{File: s.File, Line: f.Line, Field: f.Name, Msg: "must be a number ≥ 0"}
		}
	}
	return b, nil
}

// Reached says which limit spent has reached: the cost first, then the
// tokens; NoLimit when neither.
func (b Budget) Reached(spent *schemas.Cost) Limit {
	switch {
	case b.Cost > 0 && spent != nil && spent.USD != nil && *spent.USD >= b.Cost:
		return CostLimit
	case b.Tokens > 0 && spent.Tokens() >= b.Tokens:
		return TokensLimit
	}
	return NoLimit
}

// Left is what is left of b once spent is spent: never zero or less for a
// limit b sets (the smallest amount instead), so that the next agent runs
// under a limit it has already reached rather than under none.
func (b Budget) Left(spent *schemas.Cost) Budget {
	var left Budget
	if b.Cost > 0 {
		left.Cost = b.Cost
		if spent != nil && spent.USD != nil {
			left.Cost -= *spent.USD
		}
		if left.Cost <= 0 {
			left.Cost = 1e-12
		}
	}
	if b.Tokens > 0 {
		left.Tokens = max(b.Tokens-spent.Tokens(), 1)
	}
	return left
}

// Share is one agent's part of b once spent is spent: what is left
// (Left), split evenly between the n agents still to run, this one among
// them. What an agent leaves of its share goes to the ones after it.
func (b Budget) Share(spent *schemas.Cost, n int) Budget {
	left := b.Left(spent)
	if n > 1 {
		left.Cost /= float64(n)
		if left.Tokens > 0 {
			left.Tokens = max(left.Tokens/int64(n), 1)
		}
	}
	return left
}

// Replayed reports whether agent a is harness replay, serving recorded
// trials back (docs/replay.md): it costs nothing, so it takes no share of
// the budget and needs no price.
func Replayed(a *suite.Agent) bool {
	return len(a.Command) >= 2 && filepath.Base(a.Command[0]) == "harness" && a.Command[1] == "replay"
}
