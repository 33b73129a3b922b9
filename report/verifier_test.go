package report

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"harness/pytestout"
	"harness/results"
	"harness/schemas"
)

// verifierRun is a run of one Harbor task whose verifier ran pytest -rA
// (pytest's own output, from package pytestout's fixtures): its checks
// read from pytest's summary, its output on the record.
func verifierRun(t *testing.T, details bool) *Run {
	t.Helper()
	out, err := os.ReadFile("../pytestout/testdata/rA.txt")
	if err != nil {
		t.Fatal(err)
	}
	py := pytestout.Parse(string(out))
	rec := synthRecord("regex-log", 1, false, 3, "")
	rec.Score = &schemas.GraderResult{Grader: "harbor-verifier", Reasoning: "reward 0 (/logs/verifier/reward.txt); 5 of 8 tests passed (pytest's summary)",
		Checks: py.Checks, Outcome: map[string]any{"exitCode": 1, "output": "+ uv run pytest -rA\n" + string(out)}}
	b, err := results.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRun("tb.jsonl", bytes.NewReader(append(b, '\n')), RunOptions{Details: details, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestMarkdownNamesTheFirstFailedCheck(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdownSummary(&buf, MarkdownOptions{Resamples: 50}, verifierRun(t, false)); err != nil {
		t.Fatal(err)
	}
	want := "- `regex-log` — 0/1: reward 0 (/logs/verifier/reward.txt); 5 of 8 tests passed (pytest's summary); first failed check tests/test\\_outputs.py::test\\_uses\\_fixture: error: RuntimeError: fixture could ..."
	if !strings.Contains(buf.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, buf.String())
	}
}

// The report keeps the tail of a failed trial's verifier output, so a
// report written without trajectories shows it too.
func TestReportKeepsTheVerifierOutputTail(t *testing.T) {
	r := verifierRun(t, false)
	tr := r.Case("regex-log").Trials[0]
	if !strings.HasSuffix(strings.TrimSpace(tr.GraderOutput), "1 xpassed, 1 error in 0.04s =====") || !strings.Contains(tr.GraderOutput, "FAILED tests/test_outputs.py::test_run_exists") {
		t.Errorf("grader output kept: %q", tr.GraderOutput)
	}
}

func TestBrowserVerifierOutputInReport(t *testing.T) {
	for _, details := range []bool{true, false} {
		path := writeHTML(t, t.TempDir(), Options{Resamples: 50}, verifierRun(t, details))
		tb := newTab(t, 1400, 1000)
		tb.open(path, "")
		tb.openCase("regex-log")
		type gout struct{ Summary, Fail, Evidence string }
		g := evalJS[gout](tb, `(() => { const d = document.querySelector("#detail .grader details.gout"); if (!d) return {};
			return {Summary: d.querySelector("summary").textContent, Fail: (d.querySelector("pre.gfail") || {}).textContent || "",
				Evidence: (document.querySelector("#detail .checks li.failed-check pre.evidence") || {}).textContent || ""}; })()`)
		if !strings.Contains(g.Summary, "verifier output") || !strings.Contains(g.Summary, "3 failing tests") {
			t.Errorf("details %v: summary %q", details, g.Summary)
		}
		if !strings.HasPrefix(g.Fail, "ERROR tests/test_outputs.py::test_uses_fixture") {
			t.Errorf("details %v: failing tests first %q", details, g.Fail)
		}
		if !strings.Contains(g.Evidence, "RuntimeError: fixture could not start the server") {
			t.Errorf("details %v: failed check's evidence %q", details, g.Evidence)
		}
		tb.clean()
	}
}

// Twelve cases that all passed: the bootstrap over cases has no spread, so
// the page and the markdown print the exact interval, say so, and name
// the intervals' method once.
func TestAllPassingRunShowsTheExactInterval(t *testing.T) {
	var buf bytes.Buffer
	for i := range 12 {
		b, err := results.Marshal(synthRecord(fmt.Sprintf("case-%02d", i), 1, true, 2, ""))
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	r, err := ReadRun("all.jsonl", bytes.NewReader(buf.Bytes()), RunOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	page, err := os.ReadFile(writeHTML(t, t.TempDir(), Options{Resamples: 100}, r))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{
		`<b>100.0%</b> <span class="ci">[73.5%, 100.0%] exact</span>`,
		`id="interval-method">Pass rate, pass@k and pass^k: 95% intervals: percentile bootstrap over cases (100 resamples, seed 0); where every case has the same verdict, exact (Clopper–Pearson over the cases). A case's own pass rate (in the case view): Wilson 95% over its graded trials.</p>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(html, "[100.0%, 100.0%]") {
		t.Error("the page prints a zero-width interval")
	}
	var md bytes.Buffer
	if err := WriteMarkdownSummary(&md, MarkdownOptions{Resamples: 100}, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Pass rate 100.0%** (95% CI 73.5%–100.0%, exact)", "95% intervals: percentile bootstrap over cases (100 resamples, seed 0)", "| **1** | 100.0% | 73.5%–100.0% exact |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
