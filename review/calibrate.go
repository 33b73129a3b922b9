package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"harness/schemas"
	"harness/trials"
)

// DefaultSampleSize is how many failures calibrate samples by default.
const DefaultSampleSize = 10

// Labels are human verdicts read from a labels file, keyed by case and
// trial (trial 0: every trial of the case).
type Labels struct {
	File  string
	items []labelItem
	index map[labelKey]int
}

type labelKey struct {
	id    string
	trial int
}

type labelItem struct {
	line  int
	id    string
	trial int
	// verdict is "pass", "fail" or "" (ambiguous).
	verdict string
	used    bool
}

// ReadLabels reads a labels file: JSONL of schemas.CalibrationLabel. Every
// problem (bad JSON, no id, no verdict, an unknown label, a repeated id and
// trial) is reported with the file, line and field.
func ReadLabels(name string, r io.Reader) (*Labels, error) {
	ls := &Labels{File: name, index: map[labelKey]int{}}
	var errs []error
	bad := func(line int, field, format string, args ...any) {
		errs = append(errs, &schemas.InputError{File: name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	err := schemas.EachLine(r, func(line int, b []byte) error {
		var l schemas.CalibrationLabel
		if err := json.Unmarshal(b, &l); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				bad(line, te.Field, "must be a JSON %s", te.Type)
			} else {
				bad(line, "", "not a JSON object: %v", err)
			}
			return nil
		}
		if l.ID == "" {
			bad(line, "id", "missing")
			return nil
		}
		if l.Trial < 0 {
			bad(line, "trial", "must be 0 (all trials) or a trial number")
			return nil
		}
		verdict := ""
		switch {
		case l.Pass != nil && l.Label != "":
			bad(line, "label", "give either pass or label, not both")
			return nil
		case l.Pass != nil && *l.Pass:
			verdict = "pass"
		case l.Pass != nil:
			verdict = "fail"
		default:
			switch l.Label {
			case "pass", "grader_bug":
				verdict = "pass"
			case "fail", "valid_failure":
				verdict = "fail"
			case "ambiguous":
			case "":
				bad(line, "label", "missing: give pass (true/false) or label (pass, fail, valid_failure, grader_bug, ambiguous)")
				return nil
			default:
				bad(line, "label", "%q is not one of pass, fail, valid_failure, grader_bug, ambiguous", l.Label)
				return nil
			}
		}
		k := labelKey{l.ID, l.Trial}
		if first, dup := ls.index[k]; dup {
			bad(line, "id", "case %q trial %d is labelled twice (first on line %d)", l.ID, l.Trial, ls.items[first].line)
			return nil
		}
		ls.index[k] = len(ls.items)
		ls.items = append(ls.items, labelItem{line: line, id: l.ID, trial: l.Trial, verdict: verdict})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(ls.items) == 0 {
		return nil, &schemas.InputError{File: name, Msg: "no labels (the file is empty)"}
	}
	return ls, nil
}

// CalibrateOptions configure Calibrate.
type CalibrateOptions struct {
	// Sample is how many failures to sample (and, with Repeat, how many
	// graded trials to re-grade); 0 samples none (agreement alone).
	Sample int
	// Seed seeds the sampling.
	Seed uint64
	// Grade, when set, re-scores each sampled failure; GraderName names it.
	Grade      GradeFunc
	GraderName string
	// Repeat, when > 1 (and Grade is set), grades a sample of graded trials
	// Repeat times each to measure how often the grader flips.
	Repeat int
	// Labels, when set, are compared with the grader's verdicts: Grade's
	// when it is set (every labelled trial is graded again), else those
	// stored in the results.
	Labels *Labels
	// Generated is the report's timestamp text.
	Generated string
}

type sampled struct {
	seq int
	rec schemas.CaptureRecord
}

// reservoir keeps a uniform sample of up to size items of a stream.
type reservoir struct {
	size  int
	seen  int
	items []sampled
}

func (r *reservoir) offer(rng interface{ IntN(int) int }, rec *schemas.CaptureRecord, seq int) {
	r.seen++
	if len(r.items) < r.size {
		r.items = append(r.items, sampled{seq, *rec})
		return
	}
	if j := rng.IntN(r.seen); j < r.size {
		r.items[j] = sampled{seq, *rec}
	}
}

func (r *reservoir) sorted() []sampled {
	slices.SortFunc(r.items, func(a, b sampled) int { return a.seq - b.seq })
	return r.items
}

// Calibrate reads a results file (capture or trials) and builds the
// calibration report: a seeded reservoir sample of failures (graded trials
// that failed), the grader health over all graded trials, the flip rate of
// opt.Grade over opt.Repeat gradings, and the agreement with opt.Labels. A
// label naming a case and trial that is not in the results is an input
// error naming the labels file, its line and the id.
func Calibrate(ctx context.Context, name string, r io.Reader, opt CalibrateOptions) (schemas.CalibrationReport, error) {
	opt.Sample = max(opt.Sample, 0)
	rep := schemas.CalibrationReport{Type: schemas.CalibrationType, Results: name, Generated: opt.Generated,
		Seed: opt.Seed, SampleSize: opt.Sample, Grader: opt.GraderName, Samples: []schemas.CalibrationSample{}}
	rng := trials.NewRand(opt.Seed)
	fails := &reservoir{size: opt.Sample}
	graded := &reservoir{size: opt.Sample}
	var (
		scores           welford
		passes           int
		above, below     int
		hist             [10]int
		stored, regraded *agreeing
	)
	if opt.Labels != nil {
		stored = newAgreeing(opt.Labels.File, schemas.AgreementStored)
		if opt.Grade != nil {
			regraded = newAgreeing(opt.Labels.File, schemas.AgreementRegraded)
			regraded.names[opt.GraderName] = true
		}
		for i := range opt.Labels.items {
			opt.Labels.items[i].used = false
		}
	}
	seq := 0
	_, err := EachRecord(name, r, func(_ int, rec *schemas.CaptureRecord) error {
		seq++
		rep.Records++
		pass, excluded := trials.Outcome(rec)
		switch excluded {
		case "":
		case trials.Ungraded:
			rep.Ungraded++
		default:
			if rep.Errors == nil {
				rep.Errors = map[string]int{}
			}
			rep.Errors[excluded]++
		}
		if opt.Labels != nil {
			for _, k := range []labelKey{{rec.ID, rec.Trial}, {rec.ID, 0}} {
				i, ok := opt.Labels.index[k]
				if !ok {
					continue
				}
				it := &opt.Labels.items[i]
				it.used = true
				var stale *schemas.GraderResult
				if excluded == "" {
					stale = rec.Score
				}
				stored.add(rec, it.verdict, stale)
				if regraded != nil && it.verdict != "" {
					if err := ctx.Err(); err != nil {
						return err
					}
					var g *schemas.GraderResult
					if rec.Error == nil || isGraderClass(rec.Error.Class) {
						res := opt.Grade(ctx, rec, nil)
						if res.Error == nil {
							g = &res
						}
					}
					regraded.add(rec, it.verdict, g)
				} else if regraded != nil {
					regraded.Ambiguous++
				}
				break
			}
		}
		if excluded != "" {
			return nil
		}
		rep.Graded++
		s := rec.Score.Score
		scores.add(s)
		hist[min(9, max(0, int(math.Floor(s*10+1e-9))))]++
		if s > 0.9 {
			above++
		}
		if s < 0.1 {
			below++
		}
		if pass {
			passes++
		} else {
			rep.Failures++
			fails.offer(rng, rec, seq)
		}
		if opt.Grade != nil && opt.Repeat > 1 {
			graded.offer(rng, rec, seq)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if opt.Labels != nil {
		var errs []error
		for _, it := range opt.Labels.items {
			if it.used {
				continue
			}
			what := fmt.Sprintf("case %q", it.id)
			if it.trial > 0 {
				what = fmt.Sprintf("case %q trial %d", it.id, it.trial)
			}
			errs = append(errs, &schemas.InputError{File: opt.Labels.File, Line: it.line, Field: "id",
				Msg: fmt.Sprintf("%s is not in %s", what, name)})
		}
		if len(errs) > 0 {
			return rep, errors.Join(errs...)
		}
		a, err := stored.done()
		if err != nil {
			return rep, err
		}
		rep.Agreement = a
		if regraded != nil {
			if rep.Agreement, err = regraded.done(); err != nil {
				return rep, err
			}
			rep.StoredAgreement = a
		}
	}

	rep.Health = health(&scores, passes, above, below, hist)
	for _, s := range fails.sorted() {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		cs := schemas.CalibrationSample{ID: s.rec.ID, Trial: s.rec.Trial, Input: s.rec.Input.Text(), Output: s.rec.Output,
			Expected: s.rec.Expected, OriginalScore: *s.rec.Score, TrajectorySnippet: snippet(s.rec.Trajectory)}
		if opt.Grade != nil {
			g := opt.Grade(ctx, &s.rec, nil)
			cs.RescoredResult = &g
		}
		rep.Samples = append(rep.Samples, cs)
	}
	if opt.Grade != nil && opt.Repeat > 1 {
		d, err := determinism(ctx, graded.sorted(), opt)
		if err != nil {
			return rep, err
		}
		rep.Determinism = d
	}
	if rep.Graded == 0 {
		rep.Warnings = append(rep.Warnings, "no graded trial in the results: nothing to sample and no grader health (run grade first)")
	} else if rep.Failures == 0 {
		rep.Warnings = append(rep.Warnings, "no failures found in the results: nothing to review")
	}
	if opt.Repeat > 1 && opt.Grade == nil {
		rep.Warnings = append(rep.Warnings, "repeated grading needs a grader: determinism not measured")
	}
	return rep, nil
}

// agreeing collects the verdicts of one grader on the labelled trials.
type agreeing struct {
	schemas.Agreement
	human, grade []string
	names        map[string]bool
}

func newAgreeing(labels, source string) *agreeing {
	return &agreeing{Agreement: schemas.Agreement{Labels: labels, Source: source}, names: map[string]bool{}}
}

// add compares one labelled trial: human is "pass", "fail" or ""
// (ambiguous); g is the grader's verdict, nil when it gave none.
func (a *agreeing) add(rec *schemas.CaptureRecord, human string, g *schemas.GraderResult) {
	switch {
	case human == "":
		a.Ambiguous++
		return
	case g == nil:
		a.NoVerdict++
		return
	}
	if a.Source == schemas.AgreementStored && g.Grader != "" {
		a.names[g.Grader] = true
	}
	v := verdictWord(g.Pass)
	a.human, a.grade = append(a.human, human), append(a.grade, v)
	if v != human {
		a.Disagreements = append(a.Disagreements, schemas.Disagreement{ID: rec.ID, Trial: rec.Trial, Human: human,
			Verdict: v, Score: g.Score, Reasoning: g.Reasoning})
	}
}

// done computes the kappa.
func (a *agreeing) done() (*schemas.Agreement, error) {
	k, err := trials.CohenKappa(a.human, a.grade, []string{"pass", "fail"})
	if err != nil {
		return nil, fmt.Errorf("labels %s: %w", a.Labels, err)
	}
	a.Items, a.Kappa = len(a.human), k
	a.Grader = strings.Join(slices.Sorted(maps.Keys(a.names)), ", ")
	if a.Grader == "" {
		a.Grader = "unnamed"
	}
	return &a.Agreement, nil
}

func verdictWord(pass bool) string {
	if pass {
		return "pass"
	}
	return "fail"
}

func isGraderClass(c string) bool {
	return c == schemas.ErrGraderError || c == schemas.ErrGraderTimeout || c == schemas.ErrGraderInvalid
}

func determinism(ctx context.Context, items []sampled, opt CalibrateOptions) (*schemas.Determinism, error) {
	d := &schemas.Determinism{Grader: opt.GraderName, Repeat: opt.Repeat}
	stdSum := 0.0
	for _, s := range items {
		var w welford
		var seenPass, seenFail bool
		errs := 0
		for range opt.Repeat {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			g := opt.Grade(ctx, &s.rec, nil)
			if g.Error != nil {
				errs++
				continue
			}
			w.add(g.Score)
			seenPass = seenPass || g.Pass
			seenFail = seenFail || !g.Pass
		}
		if errs > 0 {
			d.Errors++
		}
		if w.n < 2 {
			continue
		}
		d.Records++
		stdSum += w.std()
		if seenPass && seenFail {
			d.Flipped++
			d.FlippedIDs = append(d.FlippedIDs, fmt.Sprintf("%s#%d", s.rec.ID, s.rec.Trial))
		}
	}
	if d.Records > 0 {
		d.FlipRate = float64(d.Flipped) / float64(d.Records)
		d.MeanScoreStd = stdSum / float64(d.Records)
	}
	return d, nil
}

func health(w *welford, passes, above, below int, hist [10]int) schemas.GraderHealth {
	h := schemas.GraderHealth{Scores: w.n, Histogram: make([]schemas.HistogramBin, 10)}
	for i := range hist {
		h.Histogram[i] = schemas.HistogramBin{Low: float64(i) / 10, High: float64(i+1) / 10, Count: hist[i]}
	}
	if w.n == 0 {
		h.Notes = append(h.Notes, "no graded trial")
		return h
	}
	n := float64(w.n)
	h.Mean, h.Std = w.mean, w.std()
	h.PassRate = float64(passes) / n
	h.Above09, h.Below01 = float64(above)/n, float64(below)/n
	h.TooLenient = h.Above09 > 0.5
	h.TooStrict = h.Below01 > 0.5
	h.NoVariance = w.n >= 2 && h.Std < 0.1
	if h.TooLenient {
		h.Notes = append(h.Notes, fmt.Sprintf("too lenient? %.0f%% of scores are above 0.9", 100*h.Above09))
	}
	if h.TooStrict {
		h.Notes = append(h.Notes, fmt.Sprintf("too strict? %.0f%% of scores are below 0.1", 100*h.Below01))
	}
	if h.NoVariance {
		h.Notes = append(h.Notes, fmt.Sprintf("no variance: score standard deviation is %.3f (< 0.1); the grader hardly tells outputs apart", h.Std))
	}
	if w.n < 2 {
		h.Notes = append(h.Notes, "one score only: variance is not measurable")
	}
	return h
}

// welford accumulates a mean and variance in one pass.
type welford struct {
	n        int
	mean, m2 float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

// std is the population standard deviation (0 for fewer than 2 values).
func (w *welford) std() float64 {
	if w.n < 2 {
		return 0
	}
	return math.Sqrt(max(0, w.m2/float64(w.n)))
}

// snippet keeps the first 2, middle and last 2 steps of a long trajectory.
func snippet(steps []schemas.Step) []schemas.Step {
	if len(steps) <= 5 {
		return append([]schemas.Step{}, steps...)
	}
	mid := len(steps) / 2
	return []schemas.Step{steps[0], steps[1], steps[mid], steps[len(steps)-2], steps[len(steps)-1]}
}

// WriteCalibrationMarkdown writes the report as the review sheet: the
// acp-harness calibration markdown (instructions, then each sampled failure
// with its three checkboxes), followed by grader health, determinism and
// agreement sections.
func WriteCalibrationMarkdown(w io.Writer, rep schemas.CalibrationReport) error {
	var b strings.Builder
	b.WriteString("# Grader Calibration Report\n\n")
	fmt.Fprintf(&b, "Generated: %s\n", rep.Generated)
	fmt.Fprintf(&b, "Samples: %d\n", len(rep.Samples))
	fmt.Fprintf(&b, "Results: %s (%d trials, %d graded, %d failures; sampled with seed %d)\n\n", rep.Results, rep.Records, rep.Graded, rep.Failures, rep.Seed)
	b.WriteString("## Instructions\n\nReview each failure below and mark whether:\n")
	b.WriteString("- [ ] **Valid failure** - Grader correctly identified a problem\n")
	b.WriteString("- [ ] **Grader bug** - Output was actually correct, grader was wrong\n")
	b.WriteString("- [ ] **Ambiguous** - Unclear if the output is correct or not\n\n---\n\n")
	for i, s := range rep.Samples {
		fmt.Fprintf(&b, "## Sample %d: %s\n\n", i+1, s.ID)
		if s.Trial > 0 {
			fmt.Fprintf(&b, "**Trial:** %d\n\n", s.Trial)
		}
		fmt.Fprintf(&b, "**Input:** %s\n\n", s.Input)
		if s.Expected != "" {
			fmt.Fprintf(&b, "**Expected:** %s\n\n", s.Expected)
		}
		fmt.Fprintf(&b, "**Output:** %s\n\n", cut(s.Output, 500))
		fmt.Fprintf(&b, "**Original Score:** %s (%s)\n", verdict(&s.OriginalScore), jsNumber(s.OriginalScore.Score))
		if s.OriginalScore.Reasoning != "" {
			fmt.Fprintf(&b, "**Reasoning:** %s\n", s.OriginalScore.Reasoning)
		}
		b.WriteString("\n")
		if g := s.RescoredResult; g != nil {
			fmt.Fprintf(&b, "**Re-scored:** %s (%s)\n", verdict(g), jsNumber(g.Score))
			if g.Reasoning != "" {
				fmt.Fprintf(&b, "**Re-score Reasoning:** %s\n", g.Reasoning)
			}
			if g.Error != nil {
				fmt.Fprintf(&b, "**Re-score Error:** %s\n", g.Error.Message)
			}
			b.WriteString("\n")
		}
		b.WriteString("**Trajectory Snippet:**\n```\n")
		for j := range s.TrajectorySnippet {
			st := &s.TrajectorySnippet[j]
			switch st.Type {
			case schemas.StepToolCall:
				fmt.Fprintf(&b, "[%s] %s: %s\n", st.Type, st.Name, st.Status)
			case schemas.StepMessage, schemas.StepThought:
				fmt.Fprintf(&b, "[%s] %s...\n", st.Type, string([]rune(st.TextContent())[:min(100, len([]rune(st.TextContent())))]))
			case schemas.StepPlan:
				var entries []json.RawMessage
				_ = json.Unmarshal(st.Entries, &entries)
				fmt.Fprintf(&b, "[%s] %d entries\n", st.Type, len(entries))
			default:
				fmt.Fprintf(&b, "[%s]\n", st.Type)
			}
		}
		b.WriteString("```\n\n**Review:**\n- [ ] Valid failure\n- [ ] Grader bug\n- [ ] Ambiguous\n\n---\n\n")
	}
	switch {
	case rep.SampleSize == 0:
		b.WriteString("No failures sampled (sample size 0).\n\n---\n\n")
	case len(rep.Samples) == 0:
		b.WriteString("No failures to review.\n\n---\n\n")
	}
	h := rep.Health
	b.WriteString("## Grader Health\n\n")
	if h.Scores == 0 {
		b.WriteString("No graded trial.\n\n")
	} else {
		fmt.Fprintf(&b, "Scores: %d, mean %.3f, std %.3f, pass rate %.3f; above 0.9: %.0f%%, below 0.1: %.0f%%\n\n",
			h.Scores, h.Mean, h.Std, h.PassRate, 100*h.Above09, 100*h.Below01)
		b.WriteString("| score | count |\n| --- | --- |\n")
		for _, bin := range h.Histogram {
			closer := ")"
			if bin.High >= 1 {
				closer = "]"
			}
			fmt.Fprintf(&b, "| [%.1f, %.1f%s | %d |\n", bin.Low, bin.High, closer, bin.Count)
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "- Too lenient (most scores > 0.9): %s\n", yesNo(h.TooLenient))
		fmt.Fprintf(&b, "- Too strict (most scores < 0.1): %s\n", yesNo(h.TooStrict))
		fmt.Fprintf(&b, "- No variance (std < 0.1): %s\n\n", yesNo(h.NoVariance))
	}
	if d := rep.Determinism; d != nil {
		b.WriteString("## Determinism\n\n")
		fmt.Fprintf(&b, "Grader %s run %d times on each of %d graded trials: %d flipped (flip rate %.3f), mean score std %.3f",
			d.Grader, d.Repeat, d.Records, d.Flipped, d.FlipRate, d.MeanScoreStd)
		if d.Errors > 0 {
			fmt.Fprintf(&b, "; %d trial(s) had grader errors", d.Errors)
		}
		b.WriteString(".\n")
		if len(d.FlippedIDs) > 0 {
			fmt.Fprintf(&b, "\nFlipped: %s\n", strings.Join(d.FlippedIDs, ", "))
		}
		b.WriteString("\n")
	}
	for _, a := range []*schemas.Agreement{rep.Agreement, rep.StoredAgreement} {
		if a == nil {
			continue
		}
		source := "its verdicts stored in the results"
		if a.Source == schemas.AgreementRegraded {
			source = "the trials graded again with it"
		}
		fmt.Fprintf(&b, "## Agreement with human labels: %s\n\n", a.Grader)
		fmt.Fprintf(&b, "Grader: %s (%s).\n", a.Grader, source)
		fmt.Fprintf(&b, "Labels: %s; %d trials compared", a.Labels, a.Items)
		if a.Ambiguous > 0 {
			fmt.Fprintf(&b, ", %d ambiguous left out", a.Ambiguous)
		}
		if a.NoVerdict > 0 {
			fmt.Fprintf(&b, ", %d without a grader verdict left out", a.NoVerdict)
		}
		b.WriteString(".\n\n| human \\ grader | pass | fail |\n| --- | --- | --- |\n")
		for i, l := range a.Kappa.Labels {
			fmt.Fprintf(&b, "| %s | %d | %d |\n", l, a.Kappa.Confusion[i][0], a.Kappa.Confusion[i][1])
		}
		b.WriteString("\n")
		if a.Kappa.Kappa != nil {
			fmt.Fprintf(&b, "Cohen's kappa of %s: %.3f (observed agreement %.3f, expected by chance %.3f)\n\n", a.Grader, *a.Kappa.Kappa, a.Kappa.Observed, a.Kappa.Expected)
		} else {
			fmt.Fprintf(&b, "Cohen's kappa of %s: undefined (%s)\n\n", a.Grader, a.Kappa.Note)
		}
		if len(a.Disagreements) == 0 {
			b.WriteString("No disagreements.\n\n")
			continue
		}
		fmt.Fprintf(&b, "Disagreements (%d):\n\n| trial | human | grader | score | reasoning |\n| --- | --- | --- | --- | --- |\n", len(a.Disagreements))
		for _, d := range a.Disagreements {
			fmt.Fprintf(&b, "| %s#%d | %s | %s | %s | %s |\n", d.ID, d.Trial, d.Human, d.Verdict, jsNumber(d.Score), tableCell(cut(d.Reasoning, 200)))
		}
		b.WriteString("\n")
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(&b, "Note: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// tableCell makes text safe for one cell of a markdown table: one line,
// pipes escaped.
func tableCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
