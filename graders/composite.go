package graders

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"harness/schemas"
)

// composite is a weighted combination of graders: score = Σ wᵢ·scoreᵢ,
// pass = score >= threshold.
type composite struct {
	name      string
	graders   []Grader
	weights   []float64
	threshold float64
}

// Name implements Grader.
func (c *composite) Name() string { return c.name }

// Grade implements Grader.
func (c *composite) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	subs := gradeAll(ctx, c.graders, in)
	r := schemas.GraderResult{Outcome: map[string]any{"graders": subs}}
	var failed []string
	var firstErr *schemas.ErrorInfo
	for i, s := range subs {
		r.Notes = append(r.Notes, s.Notes...)
		w := c.weights[i]
		ws := w
		r.Checks = append(r.Checks, schemas.Check{Text: s.Grader, Pass: s.Pass, Score: &s.Score, Reason: subReason(s, &ws)})
		if s.Error != nil {
			failed = append(failed, s.Grader)
			if firstErr == nil {
				firstErr = s.Error
			}
			continue
		}
		r.Score += w * s.Score
	}
	r.Pass = r.Score >= c.threshold
	r.Reasoning = fmt.Sprintf("weighted score %.4g (threshold %.4g)", r.Score, c.threshold)
	if firstErr != nil {
		r.Error = &schemas.ErrorInfo{Class: firstErr.Class, Message: fmt.Sprintf("%d of %d graders failed (%s): %s", len(failed), len(subs), strings.Join(failed, ", "), firstErr.Message)}
		endedLike(r.Error, firstErr, subs)
		r.Score = 0
	}
	return finish(r, c.name, start)
}

func subReason(s schemas.GraderResult, weight *float64) string {
	var b strings.Builder
	if weight != nil {
		fmt.Fprintf(&b, "weight %.4g: ", *weight)
	}
	switch {
	case s.Error != nil:
		b.WriteString(s.Error.Class + ": " + s.Error.Message)
	case s.Reasoning != "":
		b.WriteString(s.Reasoning)
	default:
		// No reasoning: the verdict says what there is to say.
		fmt.Fprintf(&b, "%s, score %s", map[bool]string{true: "pass", false: "fail"}[s.Pass], strconv.FormatFloat(s.Score, 'g', 4, 64))
	}
	return truncate(b.String(), 500)
}

// gradeAll runs graders concurrently on one input, results in order.
func gradeAll(ctx context.Context, gs []Grader, in *Input) []schemas.GraderResult {
	out := make([]schemas.GraderResult, len(gs))
	if len(gs) == 1 {
		out[0] = gs[0].Grade(ctx, in)
		return out
	}
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() { out[i] = g.Grade(ctx, in) })
	}
	wg.Wait()
	return out
}

// many combines several independently given graders (several -g flags).
type many struct{ gs []Grader }

// Many combines several graders, as several -g flags do: the combined
// result passes only if every grader passed, its score is the mean of the
// scores (see Combine), and each grader's own result is kept, in order, in
// Outcome["graders"] (and summarized in Checks). If any grader failed, the
// combined result carries an Error of the first failure's class. With one
// grader, Many returns it unchanged.
func Many(gs []Grader) Grader {
	if len(gs) == 1 {
		return gs[0]
	}
	return &many{gs: append([]Grader(nil), gs...)}
}

// Name implements Grader.
func (m *many) Name() string {
	names := make([]string, len(m.gs))
	for i, g := range m.gs {
		names[i] = g.Name()
	}
	return "all(" + strings.Join(names, ",") + ")"
}

// Grade implements Grader.
func (m *many) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	r := Combine(gradeAll(ctx, m.gs, in))
	return finish(r, m.Name(), start)
}

// Graders returns the graders a Many combines, or g alone.
func Graders(g Grader) []Grader {
	if m, ok := g.(*many); ok {
		return append([]Grader(nil), m.gs...)
	}
	return []Grader{g}
}

// Combine merges the results of several graders of one record: pass only
// if all passed, score the mean (a failed grader counts 0, as capture
// does), each result kept in Outcome["graders"] and summarized in Checks;
// the Error is the first failure's class when any failed (then pass is
// false).
func Combine(rs []schemas.GraderResult) schemas.GraderResult {
	if len(rs) == 1 {
		return rs[0]
	}
	r := schemas.GraderResult{Pass: true, Outcome: map[string]any{"graders": rs}}
	for _, s := range rs {
		r.Notes = append(r.Notes, s.Notes...)
	}
	var failed []string
	var firstErr *schemas.ErrorInfo
	var reasons []string
	for _, s := range rs {
		r.Checks = append(r.Checks, schemas.Check{Text: s.Grader, Pass: s.Pass && s.Error == nil, Score: &s.Score, Reason: subReason(s, nil)})
		if s.Error != nil {
			failed = append(failed, s.Grader)
			if firstErr == nil {
				firstErr = s.Error
			}
			r.Pass = false
			continue
		}
		r.Score += s.Score
		r.Pass = r.Pass && s.Pass
		if s.Reasoning != "" {
			reasons = append(reasons, s.Grader+": "+s.Reasoning)
		}
		r.DurationMs = max(r.DurationMs, s.DurationMs)
	}
	r.Score /= float64(len(rs))
	r.Reasoning = truncate(strings.Join(reasons, "; "), 2000)
	if firstErr != nil {
		r.Error = &schemas.ErrorInfo{Class: firstErr.Class, Message: fmt.Sprintf("%d of %d graders failed (%s): %s", len(failed), len(rs), strings.Join(failed, ", "), firstErr.Message)}
		endedLike(r.Error, firstErr, rs)
	}
	return r
}

// endedLike gives a combined error the signal and exit status of the
// graders' errors: of one that died of a stop signal if any did (a stop
// is not a verdict: the run must see it), else of the first.
func endedLike(combined, first *schemas.ErrorInfo, subs []schemas.GraderResult) {
	from := first
	for _, s := range subs {
		if _, ok := s.Error.DiedOfStop(); ok {
			from = s.Error
			break
		}
	}
	combined.Signal, combined.ExitCode = from.Signal, from.ExitCode
}
