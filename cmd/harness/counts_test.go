package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"harness/report"
	"harness/results"
	"harness/schemas"
)

// counted is one place's counts of a run: trials, graded, passed and
// the trials left out, by owner (by class for those without one).
type counted struct {
	trials, graded, passed int
	errors                 string // "owner n, class n" sorted, "" for none
}

func (c counted) String() string {
	return fmt.Sprintf("%d trials, %d graded, %d passed, errors [%s]", c.trials, c.graded, c.passed, c.errors)
}

// countsRun runs harness with args in dir and returns its stderr; want
// is the exit status expected.
func countsRun(t *testing.T, dir string, want int, args ...string) string {
	t.Helper()
	harness, err := exec.LookPath("harness")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HARNESS_RECORD_KEY_FILE="+filepath.Join(dir, "record.key"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != want {
		t.Fatalf("harness %s: exit %d (%v), want %d\n%s", strings.Join(args, " "), code, err, want, stderr.String())
	}
	if args[0] == "report" {
		return stdout.String()
	}
	return stderr.String()
}

var (
	lastLineRE = regexp.MustCompile(`(?m)^(\d+) records(?:: pass ([0-9.]+)% over (\d+) of \d+ trials?)?(?:; \d+ left out \(([^)]*)\))?[^\n]*$`)
	headlineRE = regexp.MustCompile(`trials: (\d+) graded of (\d+)   passed: (\d+)`)
	markdownRE = regexp.MustCompile(`(\d+) of (\d+) graded trials passed · (?:mean score [^·]* · )?\d+ of \d+ cases graded · (\d+) of (\d+) trials graded`)
	leftOutRE  = regexp.MustCompile(`(?m)^(?:⚠️ )?The pass rate is over \d+ of \d+ trials?; \d+ left out \(([^)]*)\)`)
	excludedRE = regexp.MustCompile(`(?m)^pass [0-9.]+% \[[^]]*\] over \d+ of \d+ trials?; \d+ left out \(([^)]*)\)`)
)

// leftOutText turns "infra: 3, grader: 1" into "grader 1, infra 3".
func leftOutText(s string) string {
	var parts []string
	for _, p := range strings.Split(s, ", ") {
		if p = strings.TrimSpace(strings.Replace(p, ": ", " ", 1)); p != "" && !strings.HasPrefix(p, "ungraded ") && !strings.HasPrefix(p, "missing ") {
			parts = append(parts, p)
		}
	}
	return strings.Join(slices.Sorted(slices.Values(parts)), ", ")
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// lastLine reads the counts of a run's last line.
func lastLine(t *testing.T, stderr string) counted {
	t.Helper()
	m := lastLineRE.FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		t.Fatalf("no last line of counts in:\n%s", stderr)
	}
	l := m[len(m)-1]
	graded := atoi(l[3])
	pct, _ := strconv.ParseFloat(l[2], 64)
	return counted{trials: atoi(l[1]), graded: graded, passed: int(math.Round(pct * float64(graded) / 100)), errors: leftOutText(l[4])}
}

// headline reads the counts of the summary table a run prints.
func headline(t *testing.T, stderr string) counted {
	t.Helper()
	m := headlineRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary table in:\n%s", stderr)
	}
	c := counted{trials: atoi(m[2]), graded: atoi(m[1]), passed: atoi(m[3])}
	if e := excludedRE.FindStringSubmatch(stderr); e != nil {
		c.errors = leftOutText(e[1])
	}
	return c
}

// summaryFile reads the counts of a run's summary file.
func summaryFile(t *testing.T, path string) counted {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s schemas.TrialsSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return counted{trials: s.Trials, graded: s.Graded, passed: s.Passes, errors: classText(s.LeftOut)}
}

func classText(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for class, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", class, n))
	}
	return strings.Join(slices.Sorted(slices.Values(parts)), ", ")
}

// reportCounts reads the counts of the markdown report of a results file.
func reportCounts(t *testing.T, dir, output string) counted {
	t.Helper()
	md := countsRun(t, dir, 0, "report", output, "--markdown", "-")
	m := markdownRE.FindStringSubmatch(md)
	if m == nil {
		t.Fatalf("no counts in the report:\n%s", md)
	}
	c := counted{trials: atoi(m[4]), graded: atoi(m[3]), passed: atoi(m[1])}
	if e := leftOutRE.FindStringSubmatch(md); e != nil {
		c.errors = leftOutText(strings.ReplaceAll(e[1], `\_`, "_")) // markdown-escaped
	}
	if atoi(m[2]) != c.graded {
		t.Errorf("report: %s graded in one place, %d in another:\n%s", m[2], c.graded, md)
	}
	return c
}

// agree fails unless every place says the same counts as the first, and
// those are want.
func agree(t *testing.T, want counted, places map[string]counted) {
	t.Helper()
	for name, c := range places {
		if c != want {
			t.Errorf("%s says %v, want %v", name, c, want)
		}
	}
}

const countsGrader = `#!/bin/sh
in=$(cat)
id=$(printf '%s' "$in" | grep -o '"id":"[^"]*"' | head -n 1 | cut -d'"' -f4)
trial=$(printf '%s' "$in" | grep -o '"trial":[0-9]*' | head -n 1 | cut -d: -f2)
case $id in
always) pass=true ;;
never) pass=false ;;
*) if [ $((trial % 2)) = 1 ]; then pass=true; else pass=false; fi ;;
esac
if [ $pass = true ]; then echo '{"pass":true,"score":1}'; else echo '{"pass":false,"score":0}'; fi
`

// TestCountsAgree: the last line, the headline of the summary table, the
// summary file and the report of a run say the same counts, those of
// every trial of the output: after --resume (the earlier run's trials
// too), in an adaptive run (every trial it ran, not the units it started
// with) and in a replay whose recorded errors the grader graded anyway
// (the agent's own failures: counted in n as failures everywhere, unless
// --leave-out leaves them out, and then everywhere).
func TestCountsAgree(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "g.sh"), countsGrader, 0o755)
	write(t, filepath.Join(dir, "pass.sh"), "#!/bin/sh\ncat >/dev/null\necho '{\"pass\":true,\"score\":1}'\n", 0o755)
	write(t, filepath.Join(dir, "first.jsonl"), `{"id":"always","input":"echo a"}
{"id":"flaky","input":"echo f"}
`, 0o644)
	write(t, filepath.Join(dir, "all.jsonl"), `{"id":"always","input":"echo a"}
{"id":"flaky","input":"echo f"}
{"id":"never","input":"echo n"}
{"id":"flaky2","input":"echo f2"}
`, 0o644)
	write(t, filepath.Join(dir, "errs.jsonl"), `{"id":"always","input":"echo a"}
{"id":"e1","input":"error"}
{"id":"flaky","input":"echo f"}
{"id":"e2","input":"error"}
`, 0o644)

	t.Run("resumed", func(t *testing.T) {
		countsRun(t, dir, 0, "trials", "first.jsonl", "-k", "3", "-g", "./g.sh", "-o", "r.jsonl", "-q", "--", "fakeagent")
		stderr := countsRun(t, dir, 0, "trials", "all.jsonl", "-k", "3", "-g", "./g.sh", "-o", "r.jsonl", "--resume", "--", "fakeagent")
		// always 3/3, flaky 2/3, never 0/3, flaky2 2/3.
		agree(t, counted{trials: 12, graded: 12, passed: 7}, map[string]counted{
			"last line": lastLine(t, stderr), "headline": headline(t, stderr),
			"summary file": summaryFile(t, filepath.Join(dir, "r.summary.json")), "report": reportCounts(t, dir, "r.jsonl"),
		})
	})

	t.Run("adaptive", func(t *testing.T) {
		adaptive := []string{"--adaptive", "--min-k", "3", "--max-k", "8", "--ci-width", "0.4", "-j", "2", "-g", "./g.sh", "-o", "a.jsonl"}
		countsRun(t, dir, 0, append(append([]string{"trials", "first.jsonl"}, adaptive...), "-q", "--", "fakeagent")...)
		stderr := countsRun(t, dir, 0, append(append([]string{"trials", "all.jsonl"}, adaptive...), "--resume", "--", "fakeagent")...)
		// always and never stop at 6 trials, the flaky ones run to 8,
		// passing every other one.
		want := counted{trials: 28, graded: 28, passed: 14}
		agree(t, want, map[string]counted{
			"last line": lastLine(t, stderr), "headline": headline(t, stderr),
			"summary file": summaryFile(t, filepath.Join(dir, "a.summary.json")), "report": reportCounts(t, dir, "a.jsonl"),
		})
		if !strings.Contains(stderr, " units to start (more as the cases' intervals ask for them)") {
			t.Errorf("the units line does not say more may come:\n%s", stderr)
		}
		// The pass rate is the mean of the cases' estimates, not the
		// ratio beside it; the ratio is said as a ratio.
		if regexp.MustCompile(`pass rate: [0-9.]+ \[[^]]*\] \(\d+/\d+ graded trials`).MatchString(stderr) {
			t.Errorf("the adaptive pass rate is shown beside passes/graded, which it is not:\n%s", stderr)
		}
		if !strings.Contains(stderr, fmt.Sprintf("passes/graded, %d/%d = 0.500, is biased", want.passed, want.graded)) {
			t.Errorf("the naive ratio is not given as the ratio it is:\n%s", stderr)
		}
	})

	t.Run("replayed", func(t *testing.T) {
		countsRun(t, dir, 0, "trials", "errs.jsonl", "-k", "2", "-g", "./pass.sh", "-o", "rec.jsonl", "-q", "--", "fakeagent")
		stderr := countsRun(t, dir, 0, "trials", "errs.jsonl", "-k", "2", "-g", "./g.sh", "-o", "p.jsonl", "--", "harness", "replay", "rec.jsonl")
		// The replayed agent errors are the agent's own: failures in n.
		agree(t, counted{trials: 8, graded: 8, passed: 3}, map[string]counted{
			"last line": lastLine(t, stderr), "headline": headline(t, stderr),
			"summary file": summaryFile(t, filepath.Join(dir, "p.summary.json")), "report": reportCounts(t, dir, "p.jsonl"),
		})
	})

	t.Run("leave-out", func(t *testing.T) {
		stderr := countsRun(t, dir, 3, "trials", "errs.jsonl", "-k", "2", "-g", "./g.sh", "--leave-out", "agent", "-o", "f.jsonl", "--", "fakeagent")
		// The agent errors are left out of n, in the report too.
		agree(t, counted{trials: 8, graded: 4, passed: 3, errors: "agent 4"}, map[string]counted{
			"last line": lastLine(t, stderr), "headline": headline(t, stderr),
			"summary file": summaryFile(t, filepath.Join(dir, "f.summary.json")), "report": reportCounts(t, dir, "f.jsonl"),
		})
	})

	t.Run("capture resumed", func(t *testing.T) {
		countsRun(t, dir, 0, "capture", "errs.jsonl", "-g", "./g.sh", "-o", "c.jsonl", "-q", "--", "fakeagent")
		stderr := countsRun(t, dir, 0, "capture", "all.jsonl", "-g", "./g.sh", "-o", "c.jsonl", "--resume", "--", "fakeagent")
		agree(t, counted{trials: 6, graded: 6, passed: 3}, map[string]counted{
			"last line": lastLine(t, stderr), "report": reportCounts(t, dir, "c.jsonl"),
		})
	})
}

// TestReportWallIsTheRuns: the report's wall time is the run's, from the
// first trial's start to the last record written, its grading included.
func TestReportWallIsTheRuns(t *testing.T) {
	dir := t.TempDir()
	const grading = 700 * time.Millisecond
	write(t, filepath.Join(dir, "slow.sh"), fmt.Sprintf("#!/bin/sh\ncat >/dev/null\nsleep %.1f\necho '{\"pass\":true,\"score\":1}'\n", grading.Seconds()), 0o755)
	write(t, filepath.Join(dir, "p.jsonl"), `{"id":"a","input":"echo a"}
{"id":"b","input":"echo b"}
`, 0o644)
	start := time.Now()
	countsRun(t, dir, 0, "trials", "p.jsonl", "-k", "1", "-j", "1", "-g", "./slow.sh", "-o", "t.jsonl", "-q", "--", "fakeagent")
	elapsed := time.Since(start)
	in, err := results.Open(filepath.Join(dir, "t.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := report.ReadRun("t.jsonl", in, report.RunOptions{})
	in.Close()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Duration(run.End-run.Start) * time.Millisecond
	// Each trial is graded after its agent answered: the run lasted at
	// least one grading, and no longer than the command.
	if wall < grading || wall > elapsed {
		t.Errorf("the report's wall is %v for a run of %v whose grading alone took %v or more", wall, elapsed, grading)
	}
}
