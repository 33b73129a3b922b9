package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestWriteMarkdownSummary(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", false)
	var buf bytes.Buffer
	if err := WriteMarkdownSummary(&buf, MarkdownOptions{Title: "PR #12 | eval", Resamples: 200}, run); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	sum := run.Summary(0, 200)
	for _, want := range []string{
		"### PR \\#12 \\| eval\n",
		"**`trials_a.jsonl`** · agent fakeagent 1.2.3",
		"**Pass rate " + pct(*sum.PassRate) + "** (95% CI " + pct(sum.PassRateCI.Low) + "–" + pct(sum.PassRateCI.High) + "): 41 of 47 graded trials passed · mean score " + fmt.Sprintf("%.3f (95%% CI %.3f–%.3f)", sum.MeanScore.Mean, sum.MeanScore.Low, sum.MeanScore.High) + " · 12 of 14 cases graded · 47 of 56 trials graded · k = 4",
		"⚠️ **1 trials hit grader errors**: the pass rate covers only the graded trials.",
		"Not graded (every trial excluded): crash, hang",
		"⚠️ The pass rate is over 47 of 56 trials; 9 left out (agent\\_crash: 4, grader\\_error: 1, timeout: 4)",
		"| k | pass@k | 95% CI | pass^k | 95% CI | cases |",
		"| **4** | 90.9% |",
		"Failing (1):\n- `wrong-answer` — 0/4: output lacks '42' (trial 1); first failed check output contains the expected text: looked for '42'\n",
		"Flaky (0 &lt; c &lt; n) (1):\n- `flaky-echo` — 2/4 passed\n",
		"No verdict (infrastructure errors) (2):\n- `crash` — agent\\_crash 4: the agent exited",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, "\n| ") != 5 { // header and k = 1..4
		t.Errorf("pass@k table rows:\n%s", md)
	}
	// The hostile case passes, so it is not listed; nothing unescaped gets in.
	if strings.Contains(md, "<script") || strings.Contains(md, "<b>") {
		t.Errorf("raw HTML in markdown:\n%s", md)
	}
}

func TestWriteMarkdownCompareAndLimits(t *testing.T) {
	a := readFixture(t, "trials_a.jsonl", false)
	b := readFixture(t, "trials_b.jsonl", false)
	var buf bytes.Buffer
	if err := WriteMarkdownSummary(&buf, MarkdownOptions{Rule: RuleMajority}, a, b); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"**A: `trials_a.jsonl`**", "**B: `trials_b.jsonl`**",
		"#### A → B\n\n13 cases in both, 1 only in A, 1 only in B.",
		"**1 gained, 1 lost**, 9 same.",
		"Lost (1):\n- `answer` — A 4/4 → B 0/4\n",
		"Gained (1):\n- `wrong-answer` — A 0/4 → B 4/4\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	big := synthRun(t, 100, 2, 1, false)
	buf.Reset()
	if err := WriteMarkdownSummary(&buf, MarkdownOptions{MaxCases: 3}, big); err != nil {
		t.Fatal(err)
	}
	md = buf.String()
	if !strings.Contains(md, "Failing (10):\n- `case-00009`") || !strings.Contains(md, "- … and 7 more\n") || !strings.Contains(md, "Flaky (0 &lt; c &lt; n) (20):") {
		t.Errorf("limited lists:\n%s", md)
	}
	if err := WriteMarkdownSummary(&buf, MarkdownOptions{}); err == nil {
		t.Error("no runs: no error")
	}
}

func TestMarkdownEscaping(t *testing.T) {
	if got := mdText("a*b_c <x> | [l](u) `c`"); got != "a\\*b\\_c &lt;x&gt; \\| \\[l\\](u) \\`c\\`" {
		t.Errorf("mdText = %q", got)
	}
	if got := codeText("a`b\nc"); got != "a'b c" {
		t.Errorf("codeText = %q", got)
	}
}

// A case whose content differs between the two runs (another prompts line
// under the same id, by its records' content hash) is neither gained, lost
// nor the same: it is counted apart.
func TestCompareCountsChangedCasesApart(t *testing.T) {
	side := func(name, editedHash string, editedPass bool) *Run {
		run, err := NewRun(name, RunOptions{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { run.Close() })
		for _, c := range []struct {
			id, hash string
			pass     bool
		}{{"kept", strings.Repeat("1", 64), true}, {"edited", editedHash, editedPass}} {
			rec := synthRecord(c.id, 1, c.pass, 1, "")
			rec.CaseHash = c.hash
			if err := run.AddCapture(&rec); err != nil {
				t.Fatal(err)
			}
		}
		return run
	}
	a := side("a.jsonl", strings.Repeat("2", 64), true)
	b := side("b.jsonl", strings.Repeat("3", 64), false)
	if got := change(a.Case("edited"), b.Case("edited")); got != "case-changed" {
		t.Errorf("edited case: %q, want case-changed", got)
	}
	var buf bytes.Buffer
	if err := WriteMarkdownSummary(&buf, MarkdownOptions{Rule: RuleMajority}, a, b); err != nil {
		t.Fatal(err)
	}
	if want := "**0 gained, 0 lost**, 1 same; 1 changed between the runs (another prompts line under the same id), not compared."; !strings.Contains(buf.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, buf.String())
	}
}
