package pytestout

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"harness/schemas"
)

// The files under testdata are pytest's own output (pytest 7.2) on two
// small test files: tests/test_outputs.py with a pass, an assertion
// failure, a parametrized pass and failure, a fixture error, a skip, an
// xfail and an xpass; and a test class with one failure.

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// brief is a check as "✓ text (reason)" or "✗ text (reason)".
func brief(cs []schemas.Check) []string {
	var out []string
	for _, c := range cs {
		mark := "✓"
		if !c.Pass {
			mark = "✗"
		}
		out = append(out, fmt.Sprintf("%s %s (%s)", mark, c.Text, c.Reason))
	}
	return out
}

func TestShortSummaryLinesAreChecks(t *testing.T) {
	r := Parse(read(t, "rA.txt"))
	want := []string{
		"✓ tests/test_outputs.py::test_greeting_file (passed)",
		"✓ tests/test_outputs.py::test_square[1-1] (passed)",
		"✓ tests/test_outputs.py:29 (skipped: needs a GPU)",
		"✓ tests/test_outputs.py::test_rounding (xfailed: known rounding bug)",
		"✓ tests/test_outputs.py::test_flaky_now_fine (xpassed: was flaky)",
		"✗ tests/test_outputs.py::test_uses_fixture (error: RuntimeError: fixture could ...)",
		"✗ tests/test_outputs.py::test_run_exists (failed: AssertionError: File /app/run...)",
		"✗ tests/test_outputs.py::test_square[2-5] (failed: assert (2 * 2) == 5)",
	}
	got := brief(r.Checks)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.Passed != 5 || r.Total != 8 {
		t.Errorf("passed %d of %d, want 5 of 8", r.Passed, r.Total)
	}
}

func TestAFailedTestsEvidenceIsItsReportSection(t *testing.T) {
	r := Parse(read(t, "rA.txt"))
	ev := map[string]string{}
	for _, c := range r.Checks {
		if s, ok := c.Evidence.(string); ok {
			ev[c.Text] = s
		} else if c.Evidence != nil {
			t.Errorf("%s: evidence %T, want text", c.Text, c.Evidence)
		}
		if c.Pass && c.Evidence != nil {
			t.Errorf("%s passed but has evidence", c.Text)
		}
	}
	for id, want := range map[string]string{
		"tests/test_outputs.py::test_run_exists":   "E       AssertionError: File /app/run.py does not exist",
		"tests/test_outputs.py::test_square[2-5]":  "E       assert (2 * 2) == 5",
		"tests/test_outputs.py::test_uses_fixture": "E       RuntimeError: fixture could not start the server",
	} {
		if !strings.Contains(ev[id], want) {
			t.Errorf("%s evidence %q lacks %q", id, ev[id], want)
		}
	}
	if strings.Contains(ev["tests/test_outputs.py::test_run_exists"], "test_square") {
		t.Errorf("evidence runs into the next section: %q", ev["tests/test_outputs.py::test_run_exists"])
	}
}

func TestClassTestsFindTheirSection(t *testing.T) {
	r := Parse(read(t, "class.txt"))
	got := brief(r.Checks)
	want := []string{
		"✓ tests/test_outputs.py::TestServer::test_starts (passed)",
		"✗ tests/test_outputs.py::TestServer::test_port (failed: AssertionError: port di...)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ev, _ := r.Checks[1].Evidence.(string); !strings.Contains(ev, "AssertionError: port differs") {
		t.Errorf("evidence %q", ev)
	}
}

// Without -rA the summary names only the failures: the count line still
// gives the totals.
func TestCountLineGivesTheTotalsTheSummaryLeavesOut(t *testing.T) {
	r := Parse(read(t, "plain.txt"))
	if len(r.Checks) != 1 || r.Checks[0].Pass || r.Checks[0].Text != "tests/test_outputs.py::TestServer::test_port" {
		t.Fatalf("checks %v", brief(r.Checks))
	}
	if r.Passed != 1 || r.Total != 2 {
		t.Errorf("passed %d of %d, want 1 of 2", r.Passed, r.Total)
	}
}

// -v alone: every test's result line is a check, in the order they ran,
// the skip and xfail reasons from the parentheses.
func TestVerboseResultLinesAreChecks(t *testing.T) {
	r := Parse(read(t, "verbose.txt"))
	got := brief(r.Checks)
	want := []string{
		"✓ tests/test_outputs.py::test_greeting_file (passed)",
		"✗ tests/test_outputs.py::test_run_exists (failed: AssertionError: File /app/run...)",
		"✓ tests/test_outputs.py::test_square[1-1] (passed)",
		"✗ tests/test_outputs.py::test_square[2-5] (failed: assert (2 * 2) == 5)",
		"✗ tests/test_outputs.py::test_uses_fixture (error: RuntimeError: fixture could ...)",
		"✓ tests/test_outputs.py::test_gpu (skipped: needs a GPU)",
		"✓ tests/test_outputs.py::test_rounding (xfailed: known rounding bug)",
		"✓ tests/test_outputs.py::test_flaky_now_fine (xpassed: was flaky)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// -rA -v gives the same tests once each.
	rv := Parse(read(t, "rA-verbose.txt"))
	if g := brief(rv.Checks); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("-rA -v checks:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

func TestPytest8SummaryForms(t *testing.T) {
	out := strings.Join([]string{
		"=========================== short test summary info ============================",
		"PASSED ../tests/test_outputs.py::test_ok[a b]",
		"XPASS ../tests/test_outputs.py::test_xp - was flaky",
		"FAILED ../tests/test_outputs.py::test_bad[a b] - AssertionError: nope",
		"========================= 1 failed, 2 passed in 0.05s ==========================",
	}, "\n")
	got := brief(Parse(out).Checks)
	want := []string{
		"✓ ../tests/test_outputs.py::test_ok[a b] (passed)",
		"✓ ../tests/test_outputs.py::test_xp (xpassed: was flaky)",
		"✗ ../tests/test_outputs.py::test_bad[a b] (failed: AssertionError: nope)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOutputWithoutPytestFindsNothing(t *testing.T) {
	for _, out := range []string{"", "ok\n", "FAILED to start the server\n", "reward written\n1 failed, 2 passed\n"} {
		if r := Parse(out); r.Found() {
			t.Errorf("%q: found %+v", out, r)
		}
	}
}
