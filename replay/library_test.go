package replay

import (
	"errors"
	"strings"
	"testing"
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

// Setup steps go out at session/new only when every record has the same.
func TestSharedSetup(t *testing.T) {
	setup := func(id, cmd string) string {
		return `{"id":"` + id + `","trial":1,"input":"` + id + `","trajectory":[{"type":"commands","stepId":"` + id +
			`-t1-s1","timestamp":3,"phase":"setup","update":"available_commands_update","raw":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"` + cmd + `"}]}}]}`
	}
	lib, err := load(t, setup("a", "x"), setup("b", "x"))
	if err != nil || !lib.SharedSetup() || len(lib.setup) != 1 {
		t.Errorf("same setup: shared %v, %d steps, %v", lib.SharedSetup(), len(lib.setup), err)
	}
	lib, err = load(t, setup("a", "x"), setup("b", "y"))
	if err != nil || lib.SharedSetup() {
		t.Errorf("different setup: shared %v, %v", lib.SharedSetup(), err)
	}
	sc := buildScript(lib.byPrompt["b"][0], false)
	if len(sc.setup) != 0 || len(sc.turns[0].main) != 1 {
		t.Errorf("unshared setup goes at the start of the first turn: %d setup, %d main", len(sc.setup), len(sc.turns[0].main))
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
