package report

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"harness/schemas"
	"harness/trials"
)

func TestReadRunTrialsFixture(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", false)
	if run.Kind != schemas.KindTrials || len(run.Cases) != 14 || run.Trials() != 56 {
		t.Fatalf("kind %s, %d cases, %d trials", run.Kind, len(run.Cases), run.Trials())
	}
	want := map[string]string{
		"answer": StatusPass, "wrong-answer": StatusFail, "flaky-echo": StatusFlaky,
		"crash": StatusError, "hang": StatusError, "grader-hiccup": StatusPass, "html</script>": StatusPass,
	}
	for id, st := range want {
		c := run.Case(id)
		if c == nil {
			t.Fatalf("no case %q", id)
		}
		if c.Status() != st {
			t.Errorf("%s: status %s, want %s (n=%d c=%d errors %v)", id, c.Status(), st, c.Count.N, c.Count.C, c.Count.Errors)
		}
	}
	if c := run.Case("grader-hiccup"); c.Count.N != 3 || c.Count.Errors[schemas.ErrGraderError] != 1 || c.Trials[1].Status != StatusError {
		t.Errorf("grader-hiccup: %+v, trial 2 %s", c.Count, c.Trials[1].Status)
	}
	if c := run.Case("crash"); c.Trials[0].Error == nil || c.Trials[0].Error.Class != schemas.ErrAgentCrash || !strings.Contains(c.Trials[0].Error.Stderr, "simulated crash") {
		t.Errorf("crash: error %+v", c.Trials[0].Error)
	}
	if c := run.Case("flaky-echo"); c.Category != "math" || c.K != 4 || len(c.Trials[1].Checks) != 2 || c.Trials[1].Checks[1].Pass {
		t.Errorf("flaky-echo: category %q k %d checks %+v", c.Category, c.K, c.Trials[1].Checks)
	}
	// The counts agree with the trials package's own reading of the file.
	f, err := os.Open(fixture("trials_a.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trials.ReadRun("trials_a.jsonl", f)
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range tr.Cases {
		c := run.Case(cc.ID)
		if c.Count.N != cc.N || c.Count.C != cc.C || c.Count.Trials != cc.Trials || fmt.Sprint(c.Count.Errors) != fmt.Sprint(cc.Errors) {
			t.Errorf("%s: %+v, trials.ReadRun says %+v", cc.ID, c.Count, *cc)
		}
	}
	if run.HasDetails() {
		t.Error("HasDetails without RunOptions.Details")
	}
}

func TestReadRunCaptureFixture(t *testing.T) {
	run := readFixture(t, "capture.jsonl", true)
	if run.Kind != schemas.KindCapture || len(run.Cases) != 14 || run.Trials() != 14 || !run.HasDetails() {
		t.Fatalf("kind %s, %d cases, %d trials", run.Kind, len(run.Cases), run.Trials())
	}
	if run.Agent != "fakeagent" || run.AgentVersion != "1.2.3" || run.Start == 0 || run.End < run.Start {
		t.Errorf("provenance %q %q, span %d..%d", run.Agent, run.AgentVersion, run.Start, run.End)
	}
	if c := run.Case("tools"); c.K != 1 || c.Trials[0].Steps < 10 || c.Trials[0].ToolCalls != 2 || c.Trials[0].chunk != 0 {
		t.Errorf("tools: k %d trial %+v", c.K, *c.Trials[0])
	}
	sum := run.Summary(1, 10)
	if sum.K != 1 || len(sum.PassAt) != 1 || sum.Errors[schemas.ErrTimeout] != 1 {
		t.Errorf("summary: k %d, %d curve points, errors %v", sum.K, len(sum.PassAt), sum.Errors)
	}
}

func TestReadRunErrors(t *testing.T) {
	capture := func(id string, trial int) string {
		return fmt.Sprintf(`{"id":%q,"trial":%d,"input":"x","output":"y","trajectory":[],"metadata":{},"timing":{"start":1,"end":2,"sessionCreation":0,"total":1},"toolErrors":false,"provenance":{"harness":"t"}}`, id, trial)
	}
	trialsLine := `{"id":"a","input":"x","k":1,"n":0,"c":0,"trials":[{"output":"y","trialNum":1,"duration":1,"pass":true,"score":1}],"passAt":{},"passExp":{}}`
	cases := []struct {
		name, text, want string
	}{
		{"empty", "\n\n", "in.jsonl: no records (the file is empty)"},
		{"not json", capture("a", 1) + "\n{nope\n", "in.jsonl:2: not a JSON object"},
		{"no id", `{"trial":1}`, `in.jsonl:1: field "id": missing`},
		{"bad type", `{"id":"a","trial":"one","trajectory":[]}`, `in.jsonl:1: field "trial": capture record: must be a whole number`},
		{"dup trial", capture("a", 1) + "\n" + capture("b", 1) + "\n" + capture("a", 1), `in.jsonl:3: field "trial": case "a" trial 1 appears twice (first on line 1)`},
		{"dup case", trialsLine + "\n" + trialsLine, `in.jsonl:2: field "id": case "a" appears twice (first on line 1)`},
		{"mixed", capture("a", 1) + "\n" + trialsLine, "in.jsonl:2: mixed formats"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRun("in.jsonl", strings.NewReader(tc.text), RunOptions{Details: true, TempDir: t.TempDir()})
			var ie *schemas.InputError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v (%T), want an InputError starting %q", err, err, tc.want)
			}
		})
	}
	// acp-harness capture files have no trial numbers: repeated ids are trials.
	run, err := ReadRun("acp.jsonl", strings.NewReader(capture("a", 0)+"\n"+capture("a", 0)), RunOptions{})
	if err != nil || len(run.Cases[0].Trials) != 2 || run.Cases[0].Trials[1].Num != 2 {
		t.Errorf("trial-less records: %v", err)
	}
}

func TestRunAddKinds(t *testing.T) {
	run, err := NewRun("live", RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := synthRecord("a", 2, true, 3, "")
	if err := run.AddCapture(&rec); err != nil {
		t.Fatal(err)
	}
	rec1 := synthRecord("a", 1, false, 3, "")
	if err := run.AddCapture(&rec1); err != nil {
		t.Fatal(err)
	}
	if c := run.Cases[0]; c.Trials[0].Num != 1 || c.Trials[1].Num != 2 || c.K != 2 || c.Status() != StatusFlaky {
		t.Errorf("trials out of order or miscounted: %+v %+v", *c.Trials[0], c.Count)
	}
	tr := trials.BuildRecord(schemas.PromptCase{ID: "b", Input: schemas.SingleTurn("x")}, 1, []schemas.CaptureRecord{rec})
	if err := run.AddTrials(&tr); err == nil || !strings.Contains(err.Error(), "a trials record in a run of capture records") {
		t.Errorf("adding a trials record to a capture run: %v", err)
	}
}

func TestCaseStatusAndRules(t *testing.T) {
	cases := []struct {
		n, c     int
		errs     map[string]int
		status   string
		all, maj string
		any      string
	}{
		{3, 3, nil, StatusPass, VerdictPass, VerdictPass, VerdictPass},
		{3, 0, nil, StatusFail, VerdictFail, VerdictFail, VerdictFail},
		{3, 2, nil, StatusFlaky, VerdictFail, VerdictPass, VerdictPass},
		{4, 2, nil, StatusFlaky, VerdictFail, VerdictFail, VerdictPass},
		{2, 2, map[string]int{"timeout": 1}, StatusPass, VerdictPass, VerdictPass, VerdictPass},
		{0, 0, map[string]int{"timeout": 2}, StatusError, VerdictError, VerdictError, VerdictError},
		{0, 0, nil, StatusUngraded, VerdictSkipped, VerdictSkipped, VerdictSkipped},
	}
	for _, tc := range cases {
		c := &Case{Count: trials.CaseCount{N: tc.n, C: tc.c, Errors: tc.errs}}
		if c.Status() != tc.status || c.Verdict(RuleAll) != tc.all || c.Verdict(RuleMajority) != tc.maj || c.Verdict(RuleAny) != tc.any {
			t.Errorf("n=%d c=%d errors %v: status %s, verdicts %s %s %s", tc.n, tc.c, tc.errs,
				c.Status(), c.Verdict(RuleAll), c.Verdict(RuleMajority), c.Verdict(RuleAny))
		}
	}
	for _, s := range []string{"all", "majority", "any"} {
		r, err := ParseCaseRule(s)
		if err != nil || r.String() != s {
			t.Errorf("ParseCaseRule(%q) = %v, %v", s, r, err)
		}
	}
	if _, err := ParseCaseRule("most"); err == nil {
		t.Error("ParseCaseRule accepted \"most\"")
	}
}

func TestShortenAndTail(t *testing.T) {
	if got := shorten("héllo wörld", 2); got != "h…" {
		t.Errorf("shorten cut inside a rune: %q", got)
	}
	if got := tail("héllo wörld", 4); got != "…rld" {
		t.Errorf("tail = %q", got)
	}
}
