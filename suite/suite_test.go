package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"harness/schemas"
)

// Seed 001's suite.yaml, as agentv's docs write it.
const seed001 = `workspace:
  template: ./workspace-template # copied into a temp dir before each run
target: my_agent
tests:
  - id: implement-feature
    input: "Implement the TODO functions in src/index.ts"
    assert:
      - Agent implements the feature correctly
      - name: functional-check
        type: script
        command: [bun, scripts/functional-check.ts]
`

func TestSeed001(t *testing.T) {
	s, err := Parse("dir/suite.yaml", []byte(seed001), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Target != "my_agent" || len(s.Cases) != 1 || s.Cases[0].ID != "implement-feature" || s.Name != "suite" {
		t.Fatalf("suite: %+v", s)
	}
	if !filepath.IsAbs(s.Workspace.Template) || !strings.HasSuffix(s.Workspace.Template, filepath.Join("dir", "workspace-template")) {
		t.Errorf("template %q", s.Workspace.Template)
	}
	asserts, _ := s.Asserts["implement-feature"].([]any)
	if len(asserts) != 2 || asserts[0] != "Agent implements the feature correctly" {
		t.Errorf("asserts %#v", s.Asserts)
	}
	if m, _ := asserts[1].(map[string]any); m["type"] != "script" || !reflect.DeepEqual(m["command"], []any{"bun", "scripts/functional-check.ts"}) {
		t.Errorf("script assert %#v", asserts[1])
	}
	if len(s.Hash) != 64 {
		t.Errorf("hash %q", s.Hash)
	}
}

func TestFullSuite(t *testing.T) {
	s, err := Parse("s.yaml", []byte(`
name: nightly
prompts: prompts.jsonl
tests:
  - id: multi
    input: [{role: user, content: first}, {role: user, content: [{type: text, text: second}]}]
    expected_output: [{role: assistant, content: "42"}]
    criteria: mentions 42
    assert: {type: contains, value: "42"}
agents:
  fast: ./agent --mode fast
  careful:
    command: ["./agent", "--mode", "careful thinking"]
    env: {TEMPERATURE: "0"}
    sandbox: bwrap
    model: m-1
    flags: {timeout: 2m}
graders: [grader.py, {type: assert, assert: [{type: no-tool-errors}]}]
judge: {model: gpt-4o-mini}
k: 3
prices:
  m-1: {input: 3, output: 15, cache_read: 0.3}
gates:
  min_pass_rate: 0.5
  min-pass-at: {1: 0.6, 3: 0.9}
  fail_on: [timeout, agent_crash]
timeout: 30s
env: [A=1, B=2]
concurrency: 4
maxAgentRequests: 4
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "nightly" || s.K != 3 || !strings.HasSuffix(s.PromptsFile, "prompts.jsonl") || len(s.Graders) != 2 {
		t.Errorf("suite %+v", s)
	}
	c := s.Cases[0]
	if len(c.Input.List) != 2 || c.Input.List[1] != "second" || c.Expected != "42" || c.Hint != "mentions 42" {
		t.Errorf("case %+v", c)
	}
	if len(s.Agents) != 2 || !reflect.DeepEqual(s.Agents[0].Command, []string{"./agent", "--mode", "fast"}) ||
		s.Agents[1].Command[2] != "careful thinking" || s.Agents[1].Env[0] != "TEMPERATURE=0" || s.Agents[1].Sandbox != "bwrap" ||
		s.Agents[1].Flags[0].Name != "timeout" {
		t.Errorf("agents %+v", s.Agents)
	}
	if p := s.Prices["m-1"]; p.Input != 3 || p.Output != 15 || p.CacheRead != 0.3 {
		t.Errorf("prices %+v", s.Prices)
	}
	var flags []string
	for _, f := range s.Flags {
		flags = append(flags, f.Name+"="+strings.Join(f.Values, ","))
	}
	want := []string{"min-pass-rate=0.5", "min-pass-at=1=0.6,3=0.9", "fail-on=timeout,agent_crash", "timeout=30s", "env=A=1,B=2", "concurrency=4", "max-agent-requests=4"}
	if !reflect.DeepEqual(flags, want) {
		t.Errorf("flags\n got %v\nwant %v", flags, want)
	}
}

// Every error names the file, the line and the key.
// TestLine checks that the lines of graders, the judge and asserts are
// recorded by the field paths errors name, a path the suite does not
// record falling back to the value that holds it.
func TestLine(t *testing.T) {
	const text = `graders:
  - grade.sh
  - type: script
    command: [x]
judge:
  model: m
tests:
  - id: a
    input: x
    assert:
      - type: contains
        value: x
  - id: b
    input: y
    assert: {type: contains, value: y}
`
	s, err := Parse("s.yaml", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]int{
		"graders[0]":               2,
		"graders[1]":               3,
		"graders[1].command":       4,
		"graders[1].command[0]":    4,
		"judge.model":              6,
		"tests[0]":                 8,
		"tests[0].assert":          10,
		"tests[0].assert[0].type":  11,
		"tests[0].assert[0].value": 12,
		"tests[0].assert[0].nope":  11,
		"tests[1].assert.value":    15,
		"tests[1].assert[0].type":  15,
		"k":                        0,
	} {
		if got := s.Line(field); got != want {
			t.Errorf("Line(%q) = %d, want %d", field, got, want)
		}
	}
	if got := s.CaseFields["b"]; got != "tests[1]" {
		t.Errorf(`CaseFields["b"] = %q, want "tests[1]"`, got)
	}
}

func TestErrors(t *testing.T) {
	cases := map[string]string{
		"k: 0\ntests: [{id: a, input: x}]":                           `s.yaml:1: field "k": must be a whole number`,
		"tests:\n  - id: a\n    inputt: x":                           `s.yaml:3: field "tests[0].inputt": unknown key`,
		"tests:\n  - id: a\n    input: x\n  - id: a\n    input: y":   `s.yaml:4: field "tests[1].id": duplicate id "a"`,
		"tests:\n  - {id: a}":                                        `s.yaml:2: field "tests[0].input": missing`,
		"prompts: p.jsonl\nagents:\n  a:\n    comand: x":             `s.yaml:4: field "agents.a.comand": unknown key`,
		"prompts: p.jsonl\nprices:\n  m: {output: 1}":                `s.yaml:3: field "prices.m": input: missing`,
		"prompts: p.jsonl\ngates: {min_pass: 1}":                     `s.yaml:2: field "gates.min_pass": unknown gate`,
		"prompts: p.jsonl\nworkspace: {repos: []}":                   `s.yaml:2: field "workspace.repos": not supported`,
		"prompts: p.jsonl\nprompts: q.jsonl":                         `s.yaml:2: field "prompts": set twice`,
		"name: x":                                                    `no cases`,
		"tests: [{id: a, input: x, assert: [x]}, {id: b, input: y}]": `s.yaml:1: field "tests[1]": case "b" has no assert`,
		"prompts: [\n": `s.yaml:1: not valid YAML`,
		"tests:\n  - id: a\n    input: [{role: system, content: x}]":                         `s.yaml:3: field "tests[0].input": message 0: role "system"`,
		"prompts: p.jsonl\nagents: {a: \"./x 'y\"}":                                          `s.yaml:2: field "agents.a": unterminated '`,
		"prompts: p.jsonl\ntimeout: {a: 1}":                                                  `s.yaml:2: field "timeout": unknown key`,
		"prompts: p.jsonl\nagents: {a: x, b: y}\ngates:\n  baseline: c":                      `s.yaml:4: field "gates.baseline": no agent "c" (agents: a, b)`,
		"prompts: p.jsonl\nagents: {main: x, pr: y}\ngates: {baseline: mian}":                `s.yaml:3: field "gates.baseline": no agent "mian": did you mean main?`,
		"prompts: p.jsonl\nagents: {a: x}\ngates: {baseline: a}":                             `s.yaml:3: field "gates.baseline": compares the suite's agents with one of them: name two agents or more`,
		"prompts: p.jsonl\nagents: {a: x, b: y}\ngates:\n  max-regression: 0.1":              `s.yaml:4: field "gates.max-regression": compares each agent with a baseline: name it in gates.baseline`,
		"prompts: p.jsonl\nagents: {a: x, b: y}\ngates:\n  baseline: a\n  max-regression: 5": `s.yaml:5: field "gates.max-regression": want the largest allowed drop of pass rate, a fraction between 0 and 1 (0.05, not 5), got "5"`,
		"prompts: p.jsonl\nagents: {a: x, b: y}\ngates:\n  baseline: a\n  significance: 1":   `s.yaml:5: field "gates.significance": want a significance level between 0 and 1`,
		"prompts: p.jsonl\nagents: {a: x, b: y}\ngates:\n  baselin: a":                       `s.yaml:4: field "gates.baselin": unknown gate: did you mean baseline?`,
	}
	for text, want := range cases {
		_, err := Parse("s.yaml", []byte(text), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %s", text, err, want)
		}
	}
}

// A comparison gate names its baseline agent, the largest allowed drop
// and the significance level (default 0.05), in any order around the
// agents.
func TestRegressionGate(t *testing.T) {
	s, err := Parse("s.yaml", []byte("prompts: p.jsonl\ngates:\n  baseline: main\n  max_regression: 0.1\n  min-pass-rate: 0.5\nagents: {main: x, pr: y}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &RegressionGate{Baseline: "main", MaxDrop: 0.1, Alpha: DefaultAlpha, Line: 3}
	if !reflect.DeepEqual(s.Regression, want) {
		t.Errorf("gate %+v, want %+v", s.Regression, want)
	}
	if len(s.Flags) != 1 || s.Flags[0].Name != "min-pass-rate" {
		t.Errorf("the comparison gate's keys are not run flags: %+v", s.Flags)
	}
	s, err = Parse("s.yaml", []byte("prompts: p.jsonl\nagents: {main: x, pr: y}\ngates: {baseline: main, significance: 0.01}\n"), nil)
	if err != nil || s.Regression.Alpha != 0.01 || s.Regression.MaxDrop != 0 {
		t.Errorf("gate %+v, %v", s.Regression, err)
	}
}

func TestSplitWords(t *testing.T) {
	got, err := SplitWords(`node "a b" 'c d' e\ f "x\"y" ''`)
	want := []string{"node", "a b", "c d", "e f", `x"y`, ""}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %q %v", got, err)
	}
}

// The Suite schema lists exactly the keys the parser takes, and accepts
// the example suites.
func TestSchemaMatchesParser(t *testing.T) {
	b, err := schemas.SchemaDoc("Suite")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties map[string]any `json:"properties"`
		Defs       struct {
			Test struct {
				Properties map[string]any `json:"properties"`
			} `json:"test"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(doc.Properties)), slices.Sorted(slices.Values(RootKeys)); !reflect.DeepEqual(got, want) {
		t.Errorf("schema keys %v, parser keys %v", got, want)
	}
	var gates struct {
		Properties struct {
			Gates struct {
				Properties map[string]any `json:"properties"`
			} `json:"gates"`
		} `json:"properties"`
	}
	json.Unmarshal(b, &gates)
	if got, want := slices.Sorted(maps.Keys(gates.Properties.Gates.Properties)), slices.Sorted(slices.Values(gateKeys)); !reflect.DeepEqual(got, want) {
		t.Errorf("schema gates %v, parser gates %v", got, want)
	}
	var testProps []string
	for k := range doc.Defs.Test.Properties {
		testProps = append(testProps, canonical(k))
	}
	if got, want := slices.Sorted(slices.Values(testProps)), slices.Sorted(slices.Values(testKeys)); !reflect.DeepEqual(got, want) {
		t.Errorf("schema test keys %v, parser keys %v", got, want)
	}
	full, err := schemas.Schema("Suite")
	if err != nil {
		t.Fatal(err)
	}
	sv, _ := jsonschema.UnmarshalJSON(bytes.NewReader(full))
	c := jsonschema.NewCompiler()
	c.AddResource(schemas.SchemaBase+"Suite.json", sv)
	sch, err := c.Compile(schemas.SchemaBase + "Suite.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../examples/suite/suite.yaml", "../examples/suite/agentv/suite.yaml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(normalize(v))
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if _, err := Load(f, nil); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestInlineCaseImage(t *testing.T) {
	s, err := Parse(filepath.Join("dir", "s.yaml"), []byte("prompts:\n  - {id: a, input: hi, image: ./env}\n  - {id: b, input: hi, image: localhost/base:1}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(s.Cases[0].Image) || !strings.HasSuffix(s.Cases[0].Image, filepath.Join("dir", "env")) || s.Cases[1].Image != "localhost/base:1" {
		t.Fatalf("images %q, %q", s.Cases[0].Image, s.Cases[1].Image)
	}
	s, err = Parse(filepath.Join("dir", "s.yaml"), []byte("prompts: p.jsonl\ntasks: ./dataset\nimage: localhost/x:1\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Flags {
		if f.Name == "tasks" && (!filepath.IsAbs(f.Values[0]) || !strings.HasSuffix(f.Values[0], filepath.Join("dir", "dataset"))) || f.Name == "image" && f.Values[0] != "localhost/x:1" {
			t.Errorf("flag %s = %q", f.Name, f.Values)
		}
	}
	if _, err := Parse("s.yaml", []byte("prompts:\n  - {id: a, input: hi, image: 3}\n"), nil); err == nil || !strings.Contains(err.Error(), "image") {
		t.Fatalf("bad image: %v", err)
	}
}

// A suite file's problems are reported together, in line order, each with
// its line and key; a mistyped key names the one probably meant.
func TestAllErrors(t *testing.T) {
	text := `k: 0
agent:
  fake:
    command: fakeagent
tests:
  - id: a
    inptu: x
  - id: b
    input: y
gates: {min_pass: 1}
concurrency: lots
`
	check := func(f Flag) string {
		if f.Name == "concurrency" {
			return "want a whole number, got " + strconv.Quote(f.Values[0])
		}
		return ""
	}
	_, err := Parse("s.yaml", []byte(text), check)
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want *Errors, got %T: %v", err, err)
	}
	want := []string{
		`s.yaml:1: field "k": must be a whole number of trials, at least 1`,
		`s.yaml:2: field "agent": unknown key: did you mean agents? (a run flag takes a value or a list of values; known keys: ` + strings.Join(RootKeys, ", ") + `)`,
		`s.yaml:7: field "tests[0].inptu": unknown key: did you mean input? (known: ` + strings.Join(testKeys, ", ") + `)`,
		`s.yaml:10: field "gates.min_pass": unknown gate (known: ` + strings.Join(gateKeys, ", ") + `)`,
		`s.yaml:11: field "concurrency": want a whole number, got "lots"`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var first *Error
	if !errors.As(err, &first) || first.Line != 1 {
		t.Errorf("errors.As finds %v", first)
	}

	// Each agent's run flags are checked too.
	_, err = Parse("s.yaml", []byte("prompts: p.jsonl\nconcurrency: lots\nagents:\n  a:\n    command: x\n    flags: {timout: 1s}\n"), func(f Flag) string {
		return "bad " + f.Name
	})
	if got, want := err.Error(), "s.yaml:2: field \"concurrency\": bad concurrency\ns.yaml:6: field \"agents.a.flags.timout\": bad timout"; got != want {
		t.Errorf("flag errors:\n%s\nwant:\n%s", got, want)
	}
}

// Past MaxErrors, the rest are counted.
func TestErrorsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("tests:\n")
	for i := range MaxErrors + 5 {
		fmt.Fprintf(&b, "  - {id: c%d, input: x, nope: 1}\n", i)
	}
	_, err := Parse("s.yaml", []byte(b.String()), nil)
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != MaxErrors+1 || lines[MaxErrors] != "s.yaml: and 5 more errors" || !strings.HasPrefix(lines[0], `s.yaml:2: field "tests[0].nope"`) {
		t.Errorf("%d lines:\n%s", len(lines), err)
	}
}

// An inline case can name a simulated user; its relative command is the
// suite file's, and a bad user names its line and key.
func TestInlineCaseUser(t *testing.T) {
	s, err := Parse(filepath.Join("dir", "s.yaml"), []byte("prompts:\n  - {id: a, input: hi, user: {command: ./user.py, maxTurns: 4, goal: book a flight}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	u := s.Cases[0].User
	if u == nil || !filepath.IsAbs(u.Command[0]) || !strings.HasSuffix(u.Command[0], filepath.Join("dir", "user.py")) || u.MaxTurns != 4 || u.Goal != "book a flight" {
		t.Fatalf("user %+v", u)
	}
	// A model user: its prompt file is the suite file's too.
	s, err = Parse(filepath.Join("dir", "s.yaml"), []byte("prompts:\n  - {id: a, input: hi, user: {model: claude-haiku-4-5, promptFile: user.md, temperature: 0.7}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := s.Cases[0].User; u == nil || u.Model != "claude-haiku-4-5" || len(u.Command) != 0 || !filepath.IsAbs(u.PromptFile) ||
		!strings.HasSuffix(u.PromptFile, filepath.Join("dir", "user.md")) || u.Temperature == nil || *u.Temperature != 0.7 {
		t.Fatalf("model user %+v", u)
	}
	_, err = Parse("s.yaml", []byte("prompts:\n  - id: a\n    input: hi\n    user: {command: ./u, model: m}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "s.yaml:4") || !strings.Contains(err.Error(), "prompts[0].user.model") {
		t.Fatalf("command and model: %v", err)
	}
	_, err = Parse("s.yaml", []byte("prompts:\n  - id: a\n    input: hi\n    user: {command: ./u, maxTurn: 4}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "s.yaml:4") || !strings.Contains(err.Error(), "prompts[0].user.maxTurn") {
		t.Fatalf("bad user: %v", err)
	}
}
