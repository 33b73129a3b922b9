package graders

import (
	"context"
	"strings"
	"testing"

	"harness/schemas"
)

// agentv's per-test assert lists in one config: a rubric string goes to
// the judge (with the config's judge settings), an assertion object to the
// assert grader, a script object runs the script; every grader of the case
// must pass.
func TestCasesGrader(t *testing.T) {
	srv := newFakeLLM(t, openAIReply(`{"pass": true, "score": 0.9, "reasoning": "meets the rubric"}`),
		openAIReply(`{"pass": true, "score": 1, "reasoning": "fine"}`),
		openAIReply(`{"pass": true, "score": 1, "reasoning": "fine"}`))
	cfg := writeConfig(t, "asserts.yaml", `
judge: {model: judge-model, baseURL: `+srv.URL+`, apiKeyEnv: JUDGE_KEY}
cases:
  add:
    - The answer is the number four
    - {type: contains, value: "4"}
  script-case:
    name: exits-zero
    type: script
    command: [sh, -c, "exit 0"]
default: Any answer is fine
`)
	g := load(t, cfg, Options{Getenv: envFunc(map[string]string{"JUDGE_KEY": "k"})})
	add := g.Grade(context.Background(), &Input{Record: record("it is 4", ""), Case: &schemas.PromptCase{ID: "add"}})
	if !add.Pass || add.Error != nil || len(add.Checks) != 2 || add.Score != 0.95 {
		t.Errorf("add: %+v", add)
	}
	// The result names the case's own graders, not the table's file.
	if !strings.HasPrefix(add.Grader, "judge:") || !strings.Contains(add.Grader, " + assert:") || strings.HasPrefix(add.Grader, "cases:") {
		t.Errorf("add graded by %q, want its judge and its assertion", add.Grader)
	}
	body := srv.bodies[0]
	if body["model"] != "judge-model" || !strings.Contains(string(mustJSON(body)), "The answer is the number four") {
		t.Errorf("judge request: %v", body)
	}
	wrong := g.Grade(context.Background(), &Input{Record: record("it is 5", ""), Case: &schemas.PromptCase{ID: "add"}})
	if wrong.Pass {
		t.Errorf("a failed assertion passed the case: %+v", wrong)
	}
	sc := g.Grade(context.Background(), &Input{Record: &schemas.CaptureRecord{ID: "script-case", Output: "x"}})
	if !sc.Pass || sc.Error != nil {
		t.Errorf("script case (by record id): %+v", sc)
	}
	other := g.Grade(context.Background(), &Input{Record: &schemas.CaptureRecord{ID: "zzz", Output: "x"}})
	if !other.Pass || other.Error != nil {
		t.Errorf("default: %+v", other)
	}

	none := load(t, writeConfig(t, "c.json", `{"cases": {"a": {"type": "equals", "value": "x"}}}`), Options{})
	if r := none.Grade(context.Background(), &Input{Record: &schemas.CaptureRecord{ID: "b"}}); r.Error == nil || !strings.Contains(r.Error.Message, `no graders for case "b"`) {
		t.Errorf("a case with no graders: %+v", r)
	}
}

func TestCasesGraderErrors(t *testing.T) {
	for text, want := range map[string]string{
		`{"cases": []}`:                            `field "cases": must be an object`,
		`{"cases": {"a": []}}`:                     `field "cases.a": is empty`,
		`{"cases": {"a": [5]}}`:                    `field "cases.a[0]": must be a rubric`,
		`{"cases": {"a": [{"type": "nope"}]}}`:     `field "cases.a[0].type": unknown type "nope" (want an assertion, equals, contains,`,
		`{"cases": {"a": [{"type": "contans"}]}}`:  `field "cases.a[0].type": unknown type "contans": did you mean "contains"? (want an assertion, equals, contains,`,
		`{"cases": {"a": [{"type": "not-regx"}]}}`: `did you mean "not-regex"?`,
		`{"cases": {"a": [{"type": "scirpt"}]}}`:   `field "cases.a[0].type": unknown type "scirpt": did you mean "script"?`,
		`{"cases": {"a": "x"}, "judge": "gpt"}`:    `field "judge": must be an object`,
		`{"cases": {"a": "x"}, "extra": 1}`:        `extra`,
	} {
		_, err := Load(writeConfig(t, "c.json", text), Options{Getenv: envFunc(map[string]string{"OPENAI_API_KEY": "k"})})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", text, err, want)
		}
	}
}
