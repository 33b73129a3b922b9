package termprogress

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/evaluation"
	"harness/schemas"
	"harness/trials"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// clock is a clock that moves only when told.
type clock struct{ t time.Time }

func (c *clock) now() time.Time                    { return c.t }
func (c *clock) advance(d time.Duration)           { c.t = c.t.Add(d) }
func newClock() *clock                             { return &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }
func (c *clock) set(v *View, ticks chan time.Time) { v.now = c.now; v.ticks = fixedTicks(ticks) }

// fixedTicks is a status line clock that ticks when the test sends on
// ticks (never, when ticks is nil).
func fixedTicks(ticks chan time.Time) func() (<-chan time.Time, func()) {
	return func() (<-chan time.Time, func()) { return ticks, func() {} }
}

// testView is a View on a buffer whose clock the test moves.
func testView(s Settings) (*View, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	v := New(&buf, s)
	c := newClock()
	c.set(v, nil)
	return v, &buf, c
}

// testNotes are Notes that say which event asked for them.
type testNotes struct{}

func (testNotes) Adapter(name string) string { return "-a " + name }
func (testNotes) Resume() string             { return "RESUME" }
func (testNotes) Started(ev evaluation.Started) []string {
	return []string{fmt.Sprintf("note: started with %d units", ev.Total)}
}
func (testNotes) Finished(res *evaluation.Result) []string {
	return []string{fmt.Sprintf("note: %d written", res.Written), "note: second line"}
}

func passRec(id string, pass bool) *schemas.CaptureRecord {
	return &schemas.CaptureRecord{ID: id, Trial: 1, StopReason: "end_turn",
		Score: &schemas.GraderResult{Pass: pass}, Timing: schemas.Timing{Total: 1200}}
}

// wholeRun is the events of a run of five units with one of every kind
// of record, strays, a summary and a final count; between events, the
// clock moves two seconds.
func wholeRun(c *clock) []func(v *View) {
	ev := func(e evaluation.Event) func(v *View) {
		return func(v *View) { c.advance(2 * time.Second); v.Event(e) }
	}
	rate := 2.0 / 3
	counts := trials.Counts{Trials: 5, Graded: 3, Passed: 2, Ungraded: 1, Errors: map[string]int{"grader_error": 1}}
	summary := schemas.TrialsSummary{Cases: 5, ScoredCases: 3, Trials: 5, Graded: 3, Passes: 2, Ungraded: 1,
		Errors: map[string]int{"grader_error": 1}, Cost: &schemas.Cost{InputTokens: 10},
		PassRate: &rate, Confidence: 0.95, Resamples: 1000, Seed: 1}
	events := []func(v *View){
		ev(evaluation.Planned{Total: 4, Done: 1}),
		ev(evaluation.Started{Agent: &acp.InitializeResponse{ProtocolVersion: 1, AgentInfo: &acp.Implementation{Name: "fake", Version: "1.2.3"}}, Total: 4}),
		ev(evaluation.RecordWritten{Record: passRec("a", true)}),
		ev(evaluation.Stray{Stray: capture.Stray{What: "stdout: hello there"}}),
		ev(evaluation.RecordWritten{Record: passRec("b", false)}),
		ev(evaluation.UnitsAdded{N: 1}),
		ev(evaluation.RecordWritten{Record: &schemas.CaptureRecord{ID: "c", Trial: 2, Timing: schemas.Timing{Total: 30},
			Score: &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: "grader_error", Message: "grader exited with status 1",
				Stderr: "Traceback (most recent call last):\n  File \"g.py\", line 1\nZeroDivisionError: division by zero\n"}}}}),
		ev(evaluation.RecordWritten{Record: &schemas.CaptureRecord{ID: "d", Trial: 1, StopReason: "end_turn"}}),
	}
	for i := range 7 {
		events = append(events, ev(evaluation.Stray{Stray: capture.Stray{What: "session/update agent_message_chunk", SessionID: fmt.Sprintf("s%d", i)}}))
	}
	return append(events,
		ev(evaluation.RecordWritten{Record: &schemas.CaptureRecord{ID: "e", Trial: 1, Error: &schemas.ErrorInfo{Class: "timeout", Message: "turn 1 exceeded its 1s timeout"}}}),
		ev(evaluation.SummaryWritten{Summary: summary, Path: "out.summary.json"}),
		ev(evaluation.Finished{Result: &evaluation.Result{Stats: &capture.Stats{}, Counts: counts, Written: 5}}),
		func(v *View) { v.Stop() },
	)
}

// golden compares got with the golden file name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update after a deliberate change):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestGoldenLog pins the whole output of a run in a log (--progress):
// the agent's line, a line per record, strays (the first five), the
// summary table, the counts and the notes.
func TestGoldenLog(t *testing.T) {
	v, buf, c := testView(Settings{Lines: true, Notes: testNotes{}})
	for _, do := range wholeRun(c) {
		do(v)
	}
	if strings.ContainsAny(buf.String(), "\r\033") {
		t.Errorf("a log has terminal controls: %q", buf.String())
	}
	if strings.Contains(buf.String(), "cost:") {
		t.Errorf("the summary table has the cost the notes say: %q", buf.String())
	}
	golden(t, "log.golden", buf.String())
}

// TestGoldenTerminal pins the whole output of a run on a terminal, with
// {clear} for the erasing of the status line: every line is written
// with the status line erased and redrawn after it (the summary table
// too), and the status line is gone before the counts.
func TestGoldenTerminal(t *testing.T) {
	v, buf, c := testView(Settings{Terminal: true, Notes: testNotes{}})
	for _, do := range wholeRun(c) {
		do(v)
	}
	out := buf.String()
	if !strings.HasSuffix(out, "note: second line\n"+"harness: protocol: ... and 2 more such messages\n") {
		t.Errorf("the run does not end with its notes and the strays left: %q", out)
	}
	golden(t, "terminal.golden", strings.ReplaceAll(out, "\r\033[K", "{clear}"))
}

// TestModes: a terminal has the status line and record lines, a log has
// record lines only when asked, a pipe only the counts, and quiet nothing.
func TestModes(t *testing.T) {
	errRec := &schemas.CaptureRecord{ID: "e", Trial: 1, Error: &schemas.ErrorInfo{Class: "timeout", Message: "slow"}}
	counts := trials.Counts{Trials: 3, Graded: 2, Passed: 1, Errors: map[string]int{"timeout": 1}}
	for _, tc := range []struct {
		name          string
		s             Settings
		want, notWant []string
	}{
		{"terminal", Settings{Terminal: true},
			[]string{"\r\033[K", "3/3 done, 1 passed, 1 failed, 1 errors, 6s elapsed, ETA 0s", "[2/3] b trial 1: fail", "3 records: pass 50.0% over 2 of 3 trials; 1 left out (timeout: 1)"}, nil},
		{"log", Settings{Lines: true},
			[]string{"[1/3] a trial 1: pass end_turn (1200 ms)", "[3/3] e trial 1: ERR timeout: slow", "3 records"}, []string{"\r", "\033", "ETA"}},
		{"pipe", Settings{}, []string{"3 records"}, []string{"[1/3]", "\r"}},
		{"quiet", Settings{Terminal: true, Lines: true, Quiet: true}, nil, []string{"records", "[1/3]", "\r"}},
	} {
		v, buf, c := testView(tc.s)
		v.Event(evaluation.Planned{Total: 3})
		for _, rec := range []*schemas.CaptureRecord{passRec("a", true), passRec("b", false), errRec} {
			c.advance(2 * time.Second)
			v.Event(evaluation.RecordWritten{Record: rec})
		}
		v.Event(evaluation.Finished{Result: &evaluation.Result{Stats: &capture.Stats{}, Counts: counts}})
		v.Stop()
		out := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%q", tc.name, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%s: output has %q:\n%q", tc.name, w, out)
			}
		}
		if tc.name == "terminal" && !strings.HasSuffix(out, "\r\033[K3 records: pass 50.0% over 2 of 3 trials; 1 left out (timeout: 1)\n") {
			t.Errorf("%s: the status line was not erased before the counts, or drawn after them: %q", tc.name, out)
		}
	}
}

// TestTickRedraws: on a terminal, the status line is redrawn at every
// tick of its clock with the time elapsed and left, and not after Stop.
func TestTickRedraws(t *testing.T) {
	v, buf, c := testView(Settings{Terminal: true})
	ticks := make(chan time.Time)
	c.set(v, ticks)
	v.Event(evaluation.Planned{Total: 4})
	c.advance(time.Second)
	v.Event(evaluation.RecordWritten{Record: passRec("a", true)})
	c.advance(4 * time.Second)
	ticks <- c.t
	ticks <- c.t // the first tick is drawn once the second is taken
	v.Stop()
	out := buf.String()
	want := "\r\033[K1/4 done, 1 passed, 0 failed, 0 errors, 5s elapsed, ETA 15s"
	if !strings.Contains(out, want) {
		t.Errorf("no redraw %q after the tick: %q", want, out)
	}
	if !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("the status line is left on the screen after Stop: %q", out)
	}
	n := len(out)
	v.Printf("after\n")
	if got := buf.String()[n:]; got != "after\n" {
		t.Errorf("a line after Stop is %q, want it alone, without a status line", got)
	}
}

// TestErrorCause: a crashed Python grader's line shows its exception, not
// the "Traceback" header.
func TestErrorCause(t *testing.T) {
	e := &schemas.ErrorInfo{Class: "grader_error", Message: "grader exited with status 1",
		Stderr: "Traceback (most recent call last):\n  File \"g.py\", line 3, in <module>\n    x = 1 / 0\n        ~~^~~\nZeroDivisionError: division by zero\n"}
	if got := errorCause(e); got != "grader_error: grader exited with status 1 (ZeroDivisionError: division by zero)" {
		t.Errorf("cause = %q", got)
	}
	e = &schemas.ErrorInfo{Class: "agent_crash", Message: "Traceback (most recent call last):\n  File \"a.py\"\nKeyError: 'x'"}
	if got := errorCause(e); got != "agent_crash: File \"a.py\"" {
		t.Errorf("cause = %q, want the first line after the traceback header", got)
	}
	e = &schemas.ErrorInfo{Class: "agent_crash", Message: "exited: KeyError: 'x'", Stderr: "KeyError: 'x'\n\n"}
	if got := errorCause(e); got != "agent_crash: exited: KeyError: 'x'" {
		t.Errorf("cause = %q, want the stderr line left out when the message has it", got)
	}
	if got := errorCause(&schemas.ErrorInfo{Class: "timeout", Message: "turn 1 exceeded its 1s timeout"}); got != "timeout: turn 1 exceeded its 1s timeout" {
		t.Errorf("cause = %q", got)
	}
}

// TestStopping: the first stop is said at once, and the status line then
// says what the run waits for instead of an ETA; quiet, nothing is said.
func TestStopping(t *testing.T) {
	for _, tc := range []struct {
		name           string
		turns, grading int
		want           string
	}{
		{"graders", 0, 2, "stopping: waiting for 2 graders/verifiers in flight; press Ctrl-C again to stop them (finished turns are kept for RESUME to grade)"},
		{"turns and graders", 1, 1, "stopping: cancelling 1 turn in flight, waiting for 1 grader/verifier in flight; press Ctrl-C again to stop them (finished turns are kept for RESUME to grade)"},
		{"turns", 3, 0, "stopping: cancelling 3 turns in flight; press Ctrl-C again to kill the agents now"},
		{"nothing", 0, 0, "stopping: no new unit starts; writing the last records"},
	} {
		v, buf, c := testView(Settings{Terminal: true, Notes: testNotes{}})
		v.Event(evaluation.Planned{Total: 4})
		c.advance(3 * time.Second)
		v.Event(evaluation.RecordWritten{Record: passRec("a", true)})
		v.Event(evaluation.Stopping{InFlight: func() (int, int) { return tc.turns, tc.grading }})
		if !strings.Contains(buf.String(), "\r\033[K"+tc.want+"\n") {
			t.Errorf("%s: said %q, want %q on a line of its own", tc.name, buf.String(), tc.want)
		}
		_, line, _ := strings.Cut(buf.String(), tc.want+"\n")
		if !strings.HasPrefix(line, "\r\033[K"+tc.want+" | 1/4 done, 1 passed, 0 failed, 0 errors, 3s elapsed") || strings.Contains(line, "ETA") {
			t.Errorf("%s: status line %q", tc.name, line)
		}
		v.Stop()
	}
	v, buf, _ := testView(Settings{Quiet: true})
	v.Event(evaluation.Planned{Total: 1})
	v.Event(evaluation.Stopping{InFlight: func() (int, int) { return 0, 1 }})
	if buf.Len() > 0 {
		t.Errorf("said %q quietly", buf.String())
	}
	v, buf, _ = testView(Settings{})
	v.Event(evaluation.Planned{Total: 1})
	v.Event(evaluation.Stopping{InFlight: func() (int, int) { return 0, 1 }})
	if want := "stopping: waiting for 1 grader/verifier in flight; press Ctrl-C again to stop them (finished turns are kept for a resumed run to grade)\n"; buf.String() != want {
		t.Errorf("without notes, said %q, want %q", buf.String(), want)
	}
}

// TestAgentLine: the agent's line names it, its version and protocol,
// or its adapter as the notes word it; an adaptive run says more units
// come.
func TestAgentLine(t *testing.T) {
	headless := evaluation.Started{Agent: &acp.InitializeResponse{AgentInfo: &acp.Implementation{Name: "claude-code"}}, Adapter: "claude-stream-json", Total: 1}
	for _, tc := range []struct {
		name  string
		notes Notes
		ev    evaluation.Started
		want  string
	}{
		{"acp", nil, evaluation.Started{Agent: &acp.InitializeResponse{ProtocolVersion: 1, AgentInfo: &acp.Implementation{Name: "fake", Version: "2.0"}}, Total: 3},
			"agent fake 2.0 (ACP 1); 3 units\n"},
		{"adaptive", nil, evaluation.Started{Agent: &acp.InitializeResponse{ProtocolVersion: 1, AgentInfo: &acp.Implementation{Name: "fake", Version: "2.0"}}, Total: 1, Adaptive: true},
			"agent fake 2.0 (ACP 1); 1 unit to start (more as the cases' intervals ask for them)\n"},
		{"headless", nil, headless, "agent claude-code, headless (adapter claude-stream-json); 1 unit\n"},
		{"headless worded", testNotes{}, headless, "agent claude-code, headless (-a claude-stream-json); 1 unit\nnote: started with 1 units\n"},
		{"no agent info", nil, evaluation.Started{Agent: &acp.InitializeResponse{ProtocolVersion: 1}, Total: 3}, ""},
	} {
		v, buf, _ := testView(Settings{Notes: tc.notes})
		v.Event(evaluation.Planned{Total: tc.ev.Total})
		v.Event(tc.ev)
		if buf.String() != tc.want {
			t.Errorf("%s: said %q, want %q", tc.name, buf.String(), tc.want)
		}
	}
}

// TestNothingToRun: a run whose output holds every unit says so, and
// shows no counts.
func TestNothingToRun(t *testing.T) {
	v, buf, _ := testView(Settings{Terminal: true, Output: "out.jsonl"})
	v.Printf("before the plan\n")
	v.Event(evaluation.Planned{Total: 0, Done: 3})
	v.Event(evaluation.Finished{Result: &evaluation.Result{Done: 3, Counts: trials.Counts{Trials: 3}}})
	v.Stop()
	v.Stop()
	if got := strings.ReplaceAll(buf.String(), "\r\033[K", ""); !strings.HasPrefix(got, "nothing to run: all 3 units in out.jsonl\n") || strings.Contains(got, "records") || strings.Contains(got, "before") {
		t.Errorf("said %q", buf.String())
	}
}

// redactor hides one secret.
type redactor string

func (r redactor) String(s string) string { return strings.ReplaceAll(s, string(r), "***") }

// TestRedaction: what the agent or the user wrote is redacted in record
// lines, messages and strays.
func TestRedaction(t *testing.T) {
	v, buf, _ := testView(Settings{Lines: true, Redact: redactor("s3cret")})
	v.Event(evaluation.Planned{Total: 1})
	v.Event(evaluation.Stray{Stray: capture.Stray{What: "stdout: token s3cret"}})
	v.Event(evaluation.Stray{Stray: capture.Stray{What: "session/update", SessionID: "s3cret-session"}})
	v.Event(evaluation.RecordWritten{Record: &schemas.CaptureRecord{ID: "a", Trial: 1, Error: &schemas.ErrorInfo{Class: "agent_crash", Message: "bad key s3cret"}}})
	v.Printf("message with s3cret\n")
	out := buf.String()
	if strings.Contains(out, "s3cret") || strings.Count(out, "***") != 4 {
		t.Errorf("not redacted in every line: %q", out)
	}
}

// TestLateStrayIsNotShown: an update for a finished case's session (a
// title the agent made after the turn) is its case's, not a message for
// no case: no line, and not counted among the strays.
func TestLateStrayIsNotShown(t *testing.T) {
	v, buf, _ := testView(Settings{Lines: true})
	v.Event(evaluation.Planned{Total: 1})
	v.Event(evaluation.Stray{Stray: capture.Stray{What: "session/update session_info_update", SessionID: "sess-1", Late: true}})
	if out := buf.String(); strings.Contains(out, "session_info_update") || strings.Contains(out, "no case") {
		t.Errorf("a late update was shown: %q", out)
	}
	v.Event(evaluation.Stray{Stray: capture.Stray{What: "session/update agent_message_chunk", SessionID: "nope"}})
	if out := buf.String(); !strings.Contains(out, `agent_message_chunk for session "nope", which no case has`) {
		t.Errorf("a stray for no case was not shown: %q", out)
	}
}
