package schemas

import (
	"math"
	"slices"
)

// Cost is what a record, a case or a run spent: the agent's tokens (from
// its usage reports), the judge's tokens (from grader results) and, when a
// price table covers them, their cost in USD.
type Cost struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty"`
	// JudgeInputTokens and JudgeOutputTokens are the grading model calls'.
	JudgeInputTokens  int64 `json:"judgeInputTokens,omitempty"`
	JudgeOutputTokens int64 `json:"judgeOutputTokens,omitempty"`
	// UserInputTokens and UserOutputTokens are a model simulated user's
	// calls'.
	UserInputTokens  int64 `json:"userInputTokens,omitempty"`
	UserOutputTokens int64 `json:"userOutputTokens,omitempty"`
	// USD is the cost: priced tokens, plus what the agent reported as its
	// own cost when no price applied. Absent when nothing could be priced.
	USD *float64 `json:"usd,omitempty"`
	// Unpriced names the models (or "agent") whose tokens had no price, so
	// USD leaves them out.
	Unpriced []string `json:"unpriced,omitempty"`
}

// Tokens is every token counted: the agent's, the judge's and a model
// simulated user's.
func (c *Cost) Tokens() int64 {
	if c == nil {
		return 0
	}
	return c.InputTokens + c.OutputTokens + c.CacheReadTokens + c.CacheWriteTokens + c.JudgeInputTokens + c.JudgeOutputTokens + c.UserInputTokens + c.UserOutputTokens
}

// Add adds o to c; a nil c grows into o's copy.
func (c *Cost) Add(o *Cost) *Cost {
	if o == nil {
		return c
	}
	if c == nil {
		c = &Cost{}
	}
	c.InputTokens += o.InputTokens
	c.OutputTokens += o.OutputTokens
	c.CacheReadTokens += o.CacheReadTokens
	c.CacheWriteTokens += o.CacheWriteTokens
	c.JudgeInputTokens += o.JudgeInputTokens
	c.JudgeOutputTokens += o.JudgeOutputTokens
	c.UserInputTokens += o.UserInputTokens
	c.UserOutputTokens += o.UserOutputTokens
	if o.USD != nil {
		sum := *o.USD
		if c.USD != nil {
			sum += *c.USD
		}
		sum = RoundUSD(sum)
		c.USD = &sum
	}
	for _, m := range o.Unpriced {
		if !slices.Contains(c.Unpriced, m) {
			c.Unpriced = append(c.Unpriced, m)
		}
	}
	slices.Sort(c.Unpriced)
	return c
}

// RoundUSD rounds an amount to a billionth of a dollar, so sums print
// without floating-point noise.
func RoundUSD(x float64) float64 {
	return math.Round(x*1e9) / 1e9
}
