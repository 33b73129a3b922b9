package replay

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"harness/schemas"
)

func load(t *testing.T, lines ...string) (*Library, error) {
	t.Helper()
	return Load("r.jsonl", strings.NewReader(strings.Join(lines, "\n")+"\n"))
}

// The n-th session with a prompt gets its n-th trial, in the file's case
// order then by trial number; a prompt of no record, or one asked more
// often than it was recorded, is an error naming it.
func TestTakeByPromptAndTrialOrder(t *testing.T) {
	lib, err := load(t,
		`{"id":"a","trial":2,"input":"same","output":"a2","trajectory":[]}`,
		`{"id":"b","trial":1,"input":"same","output":"b1","trajectory":[]}`,
		`{"id":"a","trial":1,"input":"same","output":"a1","trajectory":[]}`,
		`{"id":"c","trial":1,"input":["other","second turn"],"output":"c1","trajectory":[]}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	if lib.Records() != 4 {
		t.Errorf("%d records", lib.Records())
	}
	for _, want := range []string{"a1", "a2", "b1"} {
		rec, err := lib.take("same")
		if err != nil || rec.Output != want {
			t.Fatalf("take: %v %v, want %s", rec, err, want)
		}
	}
	var nr *errNoRecord
	if _, err := lib.take("same"); !errors.As(err, &nr) || !strings.Contains(err.Error(), `all 3 recorded trials of this prompt were served (case "a")`) {
		t.Errorf("fourth take: %v", err)
	}
	if rec, err := lib.take("other"); err != nil || rec.ID != "c" {
		t.Errorf("multi-turn case found by its first turn: %v %v", rec, err)
	}
	if _, err := lib.take("second turn"); err == nil || !strings.Contains(err.Error(), `no recorded trial has this prompt (the results hold 4 records of 2 prompts): "second turn"`) {
		t.Errorf("unknown prompt: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{`{"id":"a","trial":1,"input":"x","trajectory":[]}`, `{"id":"a","trial":1,"input":"y","trajectory":[]}`},
			`r.jsonl:2: field "trial": case "a" trial 1 is also on line 1`},
		{[]string{`{"id":"a","trial":1,"trajectory":[]}`}, `r.jsonl:1: field "input": missing`},
		{[]string{`{"id":"a","trial":1,"input":"x"}`}, `r.jsonl:1: field "trajectory"`},
		{[]string{`{"type":"trials-summary"}`}, `no records to replay`},
	} {
		_, err := load(t, tc.lines...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.lines, err, tc.want)
		}
	}
}

// The n-th session of a process expects the n-th record (cases in file
// order, then trials); what the agent sent before the first prompt goes
// out before session/new answers when the record is the expected one.
func TestSetupOfTheExpectedRecord(t *testing.T) {
	commands := func(id, where, cmd string) string {
		return `{"type":"commands","stepId":"` + id + `-t1-s1","timestamp":3,` + where +
			`,"update":"available_commands_update","raw":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"` + cmd + `"}]}}`
	}
	msg := func(id string) string {
		return `{"type":"message","stepId":"` + id + `-t1-s2","timestamp":10,"turn":1,"content":"hi","chunks":1}`
	}
	lib, err := load(t,
		`{"id":"b","trial":2,"input":"b","trajectory":[`+commands("b", `"phase":"setup"`, "x")+`,`+msg("b")+`]}`,
		`{"id":"a","trial":1,"input":"a","trajectory":[`+commands("a", `"turn":1`, "x")+`,`+msg("a")+`]}`,
		`{"id":"b","trial":1,"input":"b","trajectory":[`+commands("b", `"phase":"setup"`, "y")+`,`+msg("b")+`]}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for n := 0; lib.expected(n) != nil; n++ {
		order = append(order, fmt.Sprintf("%s/%d", lib.expected(n).ID, lib.expected(n).Trial))
	}
	if strings.Join(order, " ") != "b/1 b/2 a/1" {
		t.Errorf("expected order %v", order)
	}
	b1, b2, a1 := lib.expected(0), lib.expected(1), lib.expected(2)

	// With start times, sessions are expected in the order the trials
	// started.
	timed, err := load(t,
		`{"id":"b","trial":1,"input":"b","timing":{"start":30},"trajectory":[]}`,
		`{"id":"a","trial":1,"input":"a","timing":{"start":20},"trajectory":[]}`,
		`{"id":"a","trial":2,"input":"a","timing":{"start":40},"trajectory":[]}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	order = nil
	for n := 0; timed.expected(n) != nil; n++ {
		order = append(order, fmt.Sprintf("%s/%d", timed.expected(n).ID, timed.expected(n).Trial))
	}
	if strings.Join(order, " ") != "a/1 b/1 a/2" {
		t.Errorf("expected order by start time %v", order)
	}
	actions := func(rec, sentFor *schemas.CaptureRecord) int {
		var sent []schemas.Step
		if sentFor != nil {
			sent = setupSteps(sentFor)
		}
		return len(buildScript(rec, sent).turns[0].main)
	}
	for _, tc := range []struct {
		name         string
		rec, sentFor *schemas.CaptureRecord
		want         int
	}{
		{"its own setup was sent", b1, b1, 1},
		{"nothing was sent: the setup opens the turn", b1, nil, 2},
		{"another record's setup was sent", b1, b2, 2},
		{"sent steps that open its first turn are not sent again", a1, b2, 1},
		{"nothing sent, no setup", a1, nil, 2},
	} {
		if got := actions(tc.rec, tc.sentFor); got != tc.want {
			t.Errorf("%s: %d actions in turn 1, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSplitText(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want []string
	}{
		{"abcdefg", 3, []string{"abc", "de", "fg"}},
		{"ab", 4, []string{"a", "b", "", ""}},
		{"é𝄞x", 2, []string{"é𝄞", "x"}},
		{"", 2, []string{"", ""}},
		{"a\xffb", 2, []string{"a\xff", "b"}},
	} {
		got := splitText(tc.s, tc.n)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || strings.Join(got, "") != tc.s {
			t.Errorf("splitText(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
