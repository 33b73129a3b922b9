package schemas_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/review"
	"harness/schemas"
	"harness/trials"
)

// compile compiles one bundled schema on its own, in its strict form (no
// undeclared fields): no other document is available, so every $ref must
// resolve inside the bundle.
func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	b, err := schemas.StrictSchema(name)
	if err != nil {
		t.Fatalf("StrictSchema(%s): %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	url := schemas.SchemaBase + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return sch
}

func TestEverySchemaCompiles(t *testing.T) {
	names := schemas.SchemaNames()
	if len(names) < 15 {
		t.Fatalf("only %d schemas: %v", len(names), names)
	}
	for _, n := range names {
		compile(t, n)
		var doc map[string]any
		b, _ := schemas.SchemaDoc(n)
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if doc["title"] != n || doc["$id"] != schemas.SchemaBase+n+".json" || doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: title %v, $id %v, $schema %v", n, doc["title"], doc["$id"], doc["$schema"])
		}
	}
	for alias, n := range schemas.SchemaAliases() {
		a, err := schemas.Schema(alias)
		b, _ := schemas.Schema(n)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("alias %s: %v", alias, err)
		}
	}
	if _, err := schemas.Schema("Nope"); err == nil {
		t.Error("unknown schema: no error")
	}
}

func validate(t *testing.T, sch *jsonschema.Schema, where string, b []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

// eachLine validates every line of a JSONL file; lines with "type" equal to
// a key of byType use that schema instead.
func eachLine(t *testing.T, file string, sch *jsonschema.Schema, byType map[string]*jsonschema.Schema) int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		use := sch
		var probe struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(line, &probe)
		if s, ok := byType[probe.Type]; ok {
			use = s
		}
		validate(t, use, file+":"+itoa(n), line)
	}
	return n
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

const results = "../testdata/results/"

// The fixtures and the golden outputs of every command (which the
// testscript scripts compare with what the commands print) conform to
// their schemas.
func TestFilesConform(t *testing.T) {
	sum := compile(t, "TrialsSummary")
	jsonl := []struct {
		file, schema string
		byType       map[string]*jsonschema.Schema
	}{
		{"capture_a.jsonl", "CaptureRecord", nil},
		{"capture_b.jsonl", "CaptureRecord", nil},
		{"capture_steps.jsonl", "CaptureRecord", nil},
		{"ungraded.jsonl", "CaptureRecord", nil},
		{"trials_a.jsonl", "TrialsRecord", map[string]*jsonschema.Schema{schemas.SummaryType: sum}},
		{"acp_trials.jsonl", "TrialsRecord", nil},
		{"acp_trials_ungraded.jsonl", "TrialsRecord", nil},
		{"prompts.jsonl", "PromptCase", nil},
		{"labels.jsonl", "CalibrationLabel", nil},
		{"golden/summarize_a.jsonl", "SummaryResult", nil},
		{"golden/summarize_trials.jsonl", "SummaryResult", nil},
	}
	for _, f := range jsonl {
		if n := eachLine(t, results+f.file, compile(t, f.schema), f.byType); n == 0 {
			t.Errorf("%s: no lines", f.file)
		}
	}
	whole := []struct{ file, schema string }{
		{"golden/summary_trials.json", "TrialsSummary"},
		{"golden/summary_acp.json", "TrialsSummary"},
		{"golden/compare_ab.json", "CompareReport"},
		{"golden/balance.json", "BalanceAnalysis"},
		{"golden/calibrate.json", "CalibrationReport"},
	}
	for _, f := range whole {
		b, err := os.ReadFile(results + f.file)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, compile(t, f.schema), f.file, b)
	}
}

// Outputs built in-process (the paths the commands take) conform too,
// including the edge cases: errors, no grader, k > n.
func TestOutputsConform(t *testing.T) {
	rec := func(id string, trial int, pass *bool, errClass string) schemas.CaptureRecord {
		r := schemas.CaptureRecord{ID: id, Trial: trial, Input: schemas.SingleTurn("q"), Output: "o",
			Timing: schemas.Timing{Start: 1, End: 9}}
		if pass != nil {
			r.Score = &schemas.GraderResult{Pass: *pass, Score: map[bool]float64{true: 1, false: 0}[*pass]}
		}
		if errClass != "" {
			r.Error = &schemas.ErrorInfo{Class: errClass, Message: "x"}
		}
		return r
	}
	yes, no := true, false
	c := schemas.PromptCase{ID: "a", Input: schemas.SingleTurn("q")}
	records := []schemas.TrialsRecord{
		trials.BuildRecord(c, 3, []schemas.CaptureRecord{rec("a", 1, &yes, ""), rec("a", 2, &no, ""), rec("a", 3, nil, "timeout")}),
		trials.BuildRecord(c, 2, []schemas.CaptureRecord{rec("a", 1, nil, ""), rec("a", 2, nil, "")}),
		trials.BuildRecord(c, 5, nil),
	}
	tr := compile(t, "TrialsRecord")
	s := trials.NewSummary(0)
	for i, r := range records {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, tr, "trials record "+itoa(i), b)
		s.Add(r)
	}
	b, _ := json.Marshal(s.Result(1, 50))
	validate(t, compile(t, "TrialsSummary"), "summary", b)
	b, _ = json.Marshal(trials.NewSummary(1).Result(1, 10))
	validate(t, compile(t, "TrialsSummary"), "empty summary", b)

	// validate-refs with a grader that passes everything and fails "bad".
	grade := func(_ context.Context, r *schemas.CaptureRecord, _ *schemas.PromptCase) schemas.GraderResult {
		if strings.Contains(r.Output, "boom") {
			return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "boom"}}
		}
		return schemas.GraderResult{Pass: r.Output != "bad", Score: 1, Reasoning: "ok"}
	}
	cases := []schemas.PromptCase{
		{ID: "x", Input: schemas.SingleTurn("q"), Reference: "good", NegativeReference: "bad"},
		{ID: "y", Input: schemas.SingleTurn("q"), Reference: "boom"},
	}
	vr := compile(t, "ValidationResult")
	n := 0
	if _, err := review.ValidateRefs(context.Background(), cases, grade, func(v schemas.ValidationResult) error {
		n++
		b, err := json.Marshal(v)
		validate(t, vr, "validation "+v.ID+" "+v.Kind, b)
		return err
	}); err != nil || n != 3 {
		t.Fatalf("ValidateRefs: n=%d err=%v", n, err)
	}
}

// A record that breaks its schema is caught: the schemas are not vacuous.
func TestSchemasReject(t *testing.T) {
	bad := []struct{ schema, doc string }{
		{"CaptureRecord", `{"id":"a","input":"q","output":"o","trajectory":[{"timestamp":1}],"timing":{"start":1,"end":2},"toolErrors":false}`},
		{"CaptureRecord", `{"id":"a","input":"q","output":"o","trajectory":[],"timing":{"start":1,"end":2},"toolErrors":false,"score":{"pass":true,"score":2}}`},
		{"TrialsRecord", `{"id":"a","input":"q","k":1,"trials":[],"passAt":{"0":0.5}}`},
		{"TrialsRecord", `{"id":"a","input":"q","k":1,"trials":[],"passRate":1.5}`},
		{"TrialEntry", `{"trialNum":1,"output":"o","trajectory":[],"duration":1,"score":{"pass":true,"score":1}}`},
		{"CalibrationLabel", `{"id":"a","pass":true,"label":"fail"}`},
		{"CalibrationLabel", `{"id":"a","label":"maybe"}`},
		{"PromptCase", `{"id":"a","input":[]}`},
		{"SummaryResult", `{"id":"a","input":"q","output":"o","duration":1}`},
		{"CompareReport", `{"type":"compare"}`},
	}
	for _, b := range bad {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(b.doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := compile(t, b.schema).Validate(v); err == nil {
			t.Errorf("%s accepted %s", b.schema, b.doc)
		}
	}
}

func TestGoldenFilesExist(t *testing.T) {
	m, _ := filepath.Glob(results + "golden/*")
	if len(m) < 8 {
		t.Errorf("golden files: %v", m)
	}
}

// A ranking of three runs (compare of three, a suite's compare.json of
// three agents) conforms to the Ranking schema.
func TestRankingConforms(t *testing.T) {
	names := []string{"../testdata/report/trials_a.jsonl", "../testdata/report/trials_b.jsonl", "../testdata/report/trials_a.jsonl"}
	runs, err := trials.ReadRuns(names, func(name string) (io.ReadCloser, error) { return os.Open(name) })
	if err != nil {
		t.Fatal(err)
	}
	rk := trials.Rank(runs, trials.CompareOptions{K: 1, Seed: 1, Resamples: 50})
	b, _ := json.Marshal(rk)
	if !bytes.Contains(b, []byte(`"onlyA":`)) {
		t.Errorf("pairs are not in the schema's keys: %s", b)
	}
	validate(t, compile(t, "Ranking"), "ranking", b)
}
