package suiterun

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"harness/cost"
	"harness/graders"
	"harness/schemas"
	"harness/suite"
)

// parse writes files into a temporary directory and parses its suite.yaml.
func parse(t *testing.T, files map[string]string) *suite.Suite {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := suite.Load(filepath.Join(dir, "suite.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const promptsWithAssert = `{"id":"p1","input":"hi"}
{"id":"p2","input":"bye","assert":[{"type":"contains","value":"bye"}]}
`

func TestReadCasesPromptsThenInline(t *testing.T) {
	s := parse(t, map[string]string{
		"prompts.jsonl": promptsWithAssert,
		"suite.yaml": `prompts: prompts.jsonl
tests:
  - id: t1
    input: hello
    assert: [{type: contains, value: hello}]
`,
	})
	cs, err := ReadCases(s)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs.List {
		ids = append(ids, c.ID)
	}
	if want := []string{"p1", "p2", "t1"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("case ids %v, want %v", ids, want)
	}
	if _, ok := cs.List[1].Extra["assert"]; ok {
		t.Errorf("the assert of prompts line 2 stayed in the case: %v", cs.List[1].Extra)
	}
	if cs.AssertLines["p2"] != 2 {
		t.Errorf("assert line of p2 = %d, want 2", cs.AssertLines["p2"])
	}
	if _, ok := cs.Asserts["p2"]; !ok {
		t.Error("the prompts line's assert is not among the asserts")
	}
	if _, ok := cs.Asserts["t1"]; !ok {
		t.Error("the inline case's assert is not among the asserts")
	}
}

func TestReadCasesDuplicateID(t *testing.T) {
	s := parse(t, map[string]string{
		"prompts.jsonl": promptsWithAssert,
		"suite.yaml": `prompts: prompts.jsonl
tests:
  - id: p2
    input: again
`,
	})
	_, err := ReadCases(s)
	var ie *schemas.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("want an input error, got %v", err)
	}
	if ie.File != s.File || ie.Field != "tests[0].id" || ie.Line != 3 || !strings.Contains(ie.Msg, `case "p2"`) {
		t.Errorf("error %+v, want %s line 3 tests[0].id naming p2", ie, s.File)
	}
}

func TestGraderConfig(t *testing.T) {
	s := parse(t, map[string]string{
		"grade.py": "",
		"suite.yaml": `graders: [grade.py]
judge: {model: m}
tests:
  - id: a
    input: x
    assert: {type: contains, value: x}
  - id: b
    input: y
`,
	})
	cs, err := ReadCases(s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := GraderConfig(s, cs.Asserts)
	file := map[string]any{"type": "file", "path": filepath.Join(s.Dir, "grade.py")}
	want := map[string]any{
		"type":    "cases",
		"dir":     s.Dir,
		"default": []any{file},
		"judge":   map[string]any{"model": "m"},
		"cases":   map[string]any{"a": []any{file, map[string]any{"type": "contains", "value": "x"}}},
	}
	got, _ := json.Marshal(cfg)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("config\n%s\nwant\n%s", got, wantJSON)
	}
	if GraderConfig(&suite.Suite{}, nil) != nil {
		t.Error("a suite without graders or asserts has a grader config")
	}
}

func TestGraderErrorNamesWhereTheUserWroteIt(t *testing.T) {
	s := parse(t, map[string]string{
		"grade.py":      "",
		"prompts.jsonl": promptsWithAssert,
		"suite.yaml": `prompts: prompts.jsonl
graders: [grade.py]
tests:
  - id: t1
    input: hello
    assert:
      - {type: contains, value: hello}
      - type: contains
        value: 3
  - id: t2
    input: one
    assert: {type: contains, value: one}
`,
	})
	cs, err := ReadCases(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field     string
		wantFile  string
		wantField string
		wantLine  int
	}{
		{"default[0].path", s.File, "graders[0].path", 2},
		{"cases.t1[2].value", s.File, "tests[0].assert[1].value", 9},
		{"cases.t1[0]", s.File, "graders[0]", 2},
		{"cases.t2[1].value", s.File, "tests[1].assert.value", 12},
		{"cases.p2[1].value", s.PromptsFile, "assert[0].value", 2},
	} {
		err := GraderError(s, cs, &graders.ConfigError{File: s.File, Field: tc.field, Msg: "bad"})
		var ie *schemas.InputError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: want an input error, got %v", tc.field, err)
		}
		if ie.File != tc.wantFile || ie.Field != tc.wantField || ie.Line != tc.wantLine || ie.Msg != "bad" {
			t.Errorf("%s: got %s:%d %s, want %s:%d %s", tc.field, ie.File, ie.Line, ie.Field, tc.wantFile, tc.wantLine, tc.wantField)
		}
	}
	other := errors.New("other")
	if GraderError(s, cs, other) != other {
		t.Error("an error that is no config error was changed")
	}
}

func TestGradersReportsSuiteLine(t *testing.T) {
	s := parse(t, map[string]string{"suite.yaml": `tests:
  - id: t1
    input: hello
    assert:
      - type: no-such-grader
`})
	cs, err := ReadCases(s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Graders(s, cs)(graders.Options{Dir: s.Dir})
	var ie *schemas.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("want an input error, got %v", err)
	}
	if ie.File != s.File || !strings.HasPrefix(ie.Field, "tests[0].assert[0]") || ie.Line != 5 {
		t.Errorf("error %s:%d %s, want %s:5 tests[0].assert[0]...", ie.File, ie.Line, ie.Field, s.File)
	}
	if Graders(&suite.Suite{}, &Cases{}) != nil {
		t.Error("a suite that grades nothing has graders")
	}
}

func TestWriteForTasks(t *testing.T) {
	s := parse(t, map[string]string{"suite.yaml": `tests:
  - id: t1
    input: hello
    assert: {type: contains, value: hello}
`})
	cs, err := ReadCases(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tf, err := WriteForTasks(dir, s, cs.Asserts, cost.Table{"m": {Input: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if tf.Graders != filepath.Join(dir, GradersName) || tf.Prices != filepath.Join(dir, PricesName) {
		t.Fatalf("files %+v", tf)
	}
	var cfg map[string]any
	b, _ := os.ReadFile(tf.Graders)
	if err := json.Unmarshal(b, &cfg); err != nil || cfg["type"] != "cases" {
		t.Errorf("graders file %s: %v", b, err)
	}
	if _, err := cost.LoadTable(tf.Prices); err != nil {
		t.Errorf("prices file: %v", err)
	}
	none, err := WriteForTasks(t.TempDir(), &suite.Suite{}, nil, nil)
	if err != nil || none != (TaskFiles{}) {
		t.Errorf("nothing to write: %+v, %v", none, err)
	}
}
