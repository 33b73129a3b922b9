package report

import (
	"fmt"
	"io"
	"strings"

	"harness/cost"
	"harness/schemas"
	"harness/trials"
)

// MarkdownOptions controls WriteMarkdownSummary.
type MarkdownOptions struct {
	// Title heads the summary (default "harness results").
	Title string
	// Rule decides which cases are listed as failing (default RuleAll:
	// every case with a failed graded trial, flaky ones included, is listed
	// under flaky or failing).
	Rule CaseRule
	// Seed and Resamples drive the bootstrap intervals, as in Options.
	Seed      uint64
	Resamples int
	// MaxCases caps each list of cases (default 15).
	MaxCases int
	// Gates are the comparison gates decided for the runs, written first.
	Gates []trials.RegressionVerdict
	// Stopped, when not empty, says what stopped the run early and what
	// did not run, written first.
	Stopped string
}

// WriteMarkdownSummary writes a short markdown summary of the runs for a
// pull-request comment: per run the pass rate with its interval and
// counts, the pass@k / pass^k table with intervals, the cases that fail
// (by the rule), the flaky cases (0 < c < n), the cases with no verdict
// and the infrastructure error counts by class. With two runs (A, B) it
// adds the cases gained and lost from A to B (majority rule, as harness
// compare).
func WriteMarkdownSummary(w io.Writer, opt MarkdownOptions, runs ...*Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("markdown: no runs")
	}
	limit := opt.MaxCases
	if limit <= 0 {
		limit = 15
	}
	title := opt.Title
	if title == "" {
		title = "harness results"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", mdText(title))
	writeGatesMarkdown(&b, opt.Gates, opt.Stopped)
	hopt := Options{Seed: opt.Seed, Resamples: opt.Resamples}
	fmt.Fprintf(&b, "%s.\n\n", mdText(upperFirst(trials.MethodNote(trials.DefaultConfidence, hopt.resamples(), hopt.Seed))))
	for i, r := range runs {
		label := ""
		if len(runs) > 1 {
			label = runLabel(i, len(runs)) + ": "
		}
		writeRunMarkdown(&b, r, label, opt.Rule, hopt, limit)
	}
	if len(runs) == 2 {
		cv := buildCompare(runs[0], runs[1])
		fmt.Fprintf(&b, "#### A → B\n\n%d cases in both", cv.Both)
		if cv.OnlyA > 0 {
			fmt.Fprintf(&b, ", %d only in A", cv.OnlyA)
		}
		if cv.OnlyB > 0 {
			fmt.Fprintf(&b, ", %d only in B", cv.OnlyB)
		}
		fmt.Fprintf(&b, ". A case passes when more than half of its graded trials pass: **%d gained, %d lost**, %d same", cv.Gained, cv.Lost, cv.Same)
		if cv.Changed > 0 {
			fmt.Fprintf(&b, "; %d changed between the runs (another prompts line under the same id), not compared", cv.Changed)
		}
		b.WriteString(".\n\n")
		writeRefs(&b, "Lost", cv.LostCases, cv.Lost)
		writeRefs(&b, "Gained", cv.GainedCases, cv.Gained)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	return nil
}

// writeGatesMarkdown writes what a pull request's reader needs first: that
// the run stopped early, and the verdict of each comparison gate with its
// reason.
func writeGatesMarkdown(b *strings.Builder, gates []trials.RegressionVerdict, stopped string) {
	if stopped != "" {
		fmt.Fprintf(b, "**Stopped early:** %s\n\n", mdText(stopped))
	}
	if len(gates) == 0 {
		return
	}
	failed := 0
	for _, v := range gates {
		if v.Failed {
			failed++
		}
	}
	comparisons := "comparisons"
	if len(gates) == 1 {
		comparisons = "comparison"
	}
	if failed > 0 {
		fmt.Fprintf(b, "**Gate failed** (%d of %d %s with the baseline):\n\n", failed, len(gates), comparisons)
	} else {
		fmt.Fprintf(b, "**Gates passed** (%d %s with the baseline):\n\n", len(gates), comparisons)
	}
	for _, v := range gates {
		verdict := "passed"
		if v.Failed {
			verdict = "**failed**"
		}
		fmt.Fprintf(b, "- %s, comparison with `%s`: %s\n", verdict, codeText(v.Baseline), mdText(v.Reason))
	}
	b.WriteString("\n")
}

func writeRunMarkdown(b *strings.Builder, r *Run, label string, rule CaseRule, opt Options, limit int) {
	sum := r.Summary(opt.Seed, opt.resamples())
	fmt.Fprintf(b, "**%s`%s`**", mdText(label), codeText(r.Name))
	if r.Agent != "" {
		fmt.Fprintf(b, " · agent %s", mdText(strings.TrimSpace(r.Agent+" "+r.AgentVersion)))
	}
	b.WriteString("\n\n")
	if sum.PassRate != nil {
		fmt.Fprintf(b, "**Pass rate %s**", pct(*sum.PassRate))
		if ci := sum.PassRateCI; ci != nil && ci.Method == trials.IntervalNone {
			b.WriteString(" (no interval: every case has the same pass rate)")
		} else if ci != nil {
			fmt.Fprintf(b, " (95%% CI %s–%s%s)", pct(ci.Low), pct(ci.High), map[bool]string{true: ", exact"}[ci.Method == trials.IntervalExact])
		}
		if sum.Adaptive != nil {
			// Not passes/graded, which the stopping rule biases.
			fmt.Fprintf(b, ", the mean of the cases' unbiased estimates; %d of %d graded trials passed", sum.Passes, sum.Graded)
		} else {
			fmt.Fprintf(b, ": %d of %d graded trials passed", sum.Passes, sum.Graded)
		}
	} else {
		fmt.Fprintf(b, "**No graded trials** (%s)", mdText(trials.NoGradedReason(sum.Ungraded, sum.Missing, sum.Errors)))
	}
	if m := sum.MeanScore; m != nil {
		switch m.Method {
		case trials.IntervalNone:
			fmt.Fprintf(b, " · mean score %.3f (no interval: every case has the same mean score)", m.Mean)
		case trials.IntervalExact:
			fmt.Fprintf(b, " · mean score %.3f (95%% CI %.3f–%.3f, exact)", m.Mean, m.Low, m.High)
		default:
			fmt.Fprintf(b, " · mean score %.3f (95%% CI %.3f–%.3f)", m.Mean, m.Low, m.High)
		}
	}
	fmt.Fprintf(b, " · %d of %d cases graded · %d of %d trials graded", sum.ScoredCases, sum.Cases, sum.Graded, sum.Trials)
	if sum.K > 0 {
		fmt.Fprintf(b, " · k = %d", sum.K)
	}
	if sum.Cost != nil {
		fmt.Fprintf(b, " · cost %s", mdText(cost.Format(sum.Cost)))
	}
	b.WriteString("\n\n")
	counts := trials.CountsOf(sum)
	if sum.PassRate != nil && counts.LeftOutCount() > 0 {
		mark := ""
		if len(sum.Errors) > 0 {
			mark = "⚠️ "
		}
		fmt.Fprintf(b, "%sThe pass rate is %s\n\n", mark, mdText(counts.Coverage()))
	} else if len(sum.Errors) > 0 {
		fmt.Fprintf(b, "⚠️ %s\n\n", mdText(counts.Coverage()))
	}
	if len(counts.Failures) > 0 {
		fmt.Fprintf(b, "Failed by the agent (in n): %s\n\n", mdText(classList(counts.Failures)))
	}
	if counts.Attempts > 0 {
		fmt.Fprintf(b, "Retries: %s\n\n", mdText(counts.RetryNote()))
	}
	if n := trials.GraderErrors(sum); n > 0 {
		fmt.Fprintf(b, "⚠️ **%d trials hit grader errors**: the pass rate covers only the graded trials.\n\n", n)
	}
	if len(sum.UnscoredCases) > 0 {
		fmt.Fprintf(b, "Not graded (every trial excluded): %s\n\n", mdText(strings.Join(sum.UnscoredCases, ", ")))
	}
	if sum.Ungraded > 0 {
		fmt.Fprintf(b, "%d trials ungraded.\n\n", sum.Ungraded)
	}
	at, exp := curve(sum.PassAt), curve(sum.PassExp)
	if len(at) > 0 {
		b.WriteString("| k | pass@k | 95% CI | pass^k | 95% CI | cases |\n|--:|--:|:--|--:|:--|--:|\n")
		for i := range at {
			k := fmt.Sprint(at[i].K)
			if at[i].K == sum.K {
				k = "**" + k + "**"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d |\n", k,
				pct(at[i].Mean), mdInterval(at[i]), pct(exp[i].Mean), mdInterval(exp[i]), at[i].Cases)
		}
		b.WriteString("\n")
	}
	var failing, flaky, errored []caseRef
	nFail, nFlaky, nErr := 0, 0, 0
	for _, c := range r.Cases {
		ref := caseRef{ID: c.ID, Category: c.Category, N: c.Count.N, C: c.Count.C}
		switch {
		case c.Verdict(rule) == VerdictFail && c.Status() != StatusFlaky:
			nFail++
			if len(failing) < limit {
				ref.Note = fmt.Sprintf("%d/%d", c.Count.C, c.Count.N)
				if reason := firstReason(c, StatusFail); reason != "" {
					ref.Note += ": " + reason
				}
				if ck := firstFailedCheck(c, StatusFail); ck != "" {
					ref.Note += "; first failed check " + ck
				}
				failing = append(failing, ref)
			}
		case c.Status() == StatusFlaky:
			nFlaky++
			if len(flaky) < limit {
				ref.Note = fmt.Sprintf("%d/%d passed", c.Count.C, c.Count.N)
				if rule.Passes(c.Count.N, c.Count.C) {
					ref.Note += fmt.Sprintf(" (passes by rule %q)", rule.String())
				}
				flaky = append(flaky, ref)
			}
		case c.Verdict(rule) == VerdictError:
			nErr++
			if len(errored) < limit {
				ref.Note = classList(c.Count.Errors)
				if m := firstErrorMessage(c); m != "" {
					ref.Note += ": " + shorten(m, 120)
				}
				errored = append(errored, ref)
			}
		}
	}
	writeRefs(b, "Failing", failing, nFail)
	writeRefs(b, "Flaky (0 < c < n)", flaky, nFlaky)
	writeRefs(b, "No verdict (infrastructure errors)", errored, nErr)
	if nFail+nFlaky+nErr == 0 && sum.Graded > 0 {
		b.WriteString("All cases passed.\n\n")
	}
}

func writeRefs(b *strings.Builder, title string, refs []caseRef, total int) {
	if total == 0 {
		return
	}
	fmt.Fprintf(b, "%s (%d):\n", mdText(title), total)
	for _, r := range refs {
		fmt.Fprintf(b, "- `%s`", codeText(r.ID))
		if r.Note != "" {
			fmt.Fprintf(b, " — %s", mdText(shorten(oneLine(r.Note), 320)))
		}
		b.WriteString("\n")
	}
	if total > len(refs) {
		fmt.Fprintf(b, "- … and %d more\n", total-len(refs))
	}
	b.WriteString("\n")
}

// mdText escapes text for markdown: characters that start formatting are
// backslash-escaped, and < > & become entities so no HTML gets through.
func mdText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\\', '`', '*', '_', '[', ']', '|', '#', '~', '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n', '\r':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// codeText makes s safe inside a one-backtick code span.
func codeText(s string) string {
	s = strings.ReplaceAll(oneLine(s), "`", "'")
	return s
}

// mdInterval is an estimate's interval in the markdown table.
func mdInterval(e schemas.Estimate) string {
	switch e.Method {
	case trials.IntervalNone:
		return "none"
	case trials.IntervalExact:
		return pct(e.Low) + "–" + pct(e.High) + " exact"
	}
	return pct(e.Low) + "–" + pct(e.High)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
