package graders

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// A reply's keys that harness does not read are noted with the key
// probably meant; agentv's "passed" is read in checks as at the top.
func TestResultNotes(t *testing.T) {
	r, ei := parseResult([]byte(`{"pass": true, "scroe": 0.3, "checks": [{"text": "a", "passed": true}, {"text": "b", "pased": true}]}`), 0.5)
	if ei != nil {
		t.Fatal(ei.Message)
	}
	want := []string{
		`result key "scroe" is not one harness reads, and is ignored (did you mean "score"?)`,
		`check key "pased" is not one harness reads, and is ignored (did you mean "passed"?)`,
	}
	if strings.Join(r.Notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(r.Notes, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Checks) != 2 || !r.Checks[0].Pass || r.Checks[1].Pass {
		t.Errorf("checks = %+v; want the first passed (from passed: true)", r.Checks)
	}
	r, _ = parseResult([]byte(`{"passed": true, "reason": "r", "grader": "x", "durationMs": 3}`), 0.5)
	if len(r.Notes) != 0 || !r.Pass {
		t.Errorf("known keys noted: %v (pass %v)", r.Notes, r.Pass)
	}
}

// Each note of a loaded grader is told once, named by the grader.
func TestNotesWarnedOnce(t *testing.T) {
	p := writeConfig(t, "typo.yaml", "type: script\nscript: \"function grade() { return {pass: true, scroe: 0.3}; }\"\n")
	var mu sync.Mutex
	var warned []string
	g, err := Load(p, Options{Warn: func(s string) { mu.Lock(); warned = append(warned, s); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := g.Grade(context.Background(), &Input{Record: record("x", "")}); !r.Pass || r.Notes != nil {
			t.Fatalf("result = %+v", r)
		}
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "js:"+p+`: result key "scroe"`) {
		t.Errorf("warned %q; want one warning naming the grader and the key", warned)
	}
}

// A composite's check of a grader that gave no reasoning says its verdict,
// not "weight 0.5: " with nothing after.
func TestCompositeCheckReason(t *testing.T) {
	p := writeConfig(t, "comp.yaml", `graders:
  - {type: script, script: "function grade() { return 1; }", weight: 0.5}
  - {type: script, script: "function grade() { return 0.25; }", weight: 0.5}
`)
	r := grade(t, load(t, p, Options{}), record("x", ""))
	if len(r.Checks) != 2 || r.Checks[0].Reason != "weight 0.5: pass, score 1" || r.Checks[1].Reason != "weight 0.5: fail, score 0.25" {
		t.Errorf("checks = %+v", r.Checks)
	}
}

// A judge nobody answers at (connection refused) is a grader error that
// says so, not a timeout, however long the retries waited.
func TestJudgeUnreachable(t *testing.T) {
	p := writeConfig(t, "judge.yaml", "type: llm-judge\nmodel: gpt-4o-mini\nbaseURL: http://127.0.0.1:1/v1\ntimeout: 300ms\nprompt: \"Rate {{response}}\"\n")
	g, err := Load(p, Options{Getenv: func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "sk-test"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := g.Grade(context.Background(), &Input{Record: record("x", "")})
	if r.Error == nil || r.Error.Class != "grader_error" || !strings.Contains(r.Error.Message, "judge unreachable") {
		t.Errorf("error = %+v; want grader_error, judge unreachable", r.Error)
	}
}
