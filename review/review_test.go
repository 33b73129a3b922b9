package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"harness/schemas"
)

func pc(id string, meta map[string]any) schemas.PromptCase {
	return schemas.PromptCase{ID: id, Input: schemas.SingleTurn("q"), Metadata: meta}
}

func TestBalance(t *testing.T) {
	var cases []schemas.PromptCase
	for i := range 5 {
		cases = append(cases, pc(fmt.Sprint("m", i), map[string]any{"category": "math"}))
	}
	cases = append(cases, pc("g1", map[string]any{"category": "geo"}), pc("n1", map[string]any{"category": 3.0}),
		pc("u1", nil), pc("deep", map[string]any{"a": map[string]any{"b": "x"}}))
	a := Balance(cases, "category", 50)
	// 9 cases: math 5 (56%), then geo, 3, (uncategorized) ×2 (22%) in order of first appearance.
	want := []struct {
		name       string
		count      int
		percentage float64
	}{{"math", 5, 56}, {Uncategorized, 2, 22}, {"geo", 1, 11}, {"3", 1, 11}}
	if len(a.Categories) != len(want) {
		t.Fatalf("categories = %+v", a.Categories)
	}
	for i, w := range want {
		c := a.Categories[i]
		if c.Name != w.name || c.Count != w.count || c.Percentage != w.percentage {
			t.Errorf("category %d = %+v, want %+v", i, c, w)
		}
	}
	// even share 25%, threshold 50% → below 12.5%: geo and 3.
	if strings.Join(a.Underrepresented, ",") != "geo,3" {
		t.Errorf("underrepresented = %v", a.Underrepresented)
	}
	wantSugg := []string{
		"Consider adding more test cases for: geo, 3",
		"Category 'math' has 56% of cases - consider diversifying",
		"Categories with < 3 cases may not be reliable: (uncategorized), geo, 3",
		"Consider expanding test set (currently 9 cases) for more statistical significance",
	}
	if strings.Join(a.Suggestions, "|") != strings.Join(wantSugg, "|") {
		t.Errorf("suggestions = %q", a.Suggestions)
	}
	if got := Category(&cases[8], "a.b"); got != "x" {
		t.Errorf("dotted key = %q", got)
	}
	var many []schemas.PromptCase
	for i := range 20 {
		many = append(many, pc(fmt.Sprint(i), map[string]any{"category": fmt.Sprint(i % 4)}))
	}
	if s := Balance(many, "category", 50).Suggestions; len(s) != 1 || s[0] != "Test set appears well-balanced" {
		t.Errorf("balanced: %q", s)
	}
}

func captureLine(id string, trial int, verdict string, score float64) string {
	r := schemas.CaptureRecord{ID: id, Trial: trial, Input: schemas.SingleTurn("q"), Output: "out " + id,
		Trajectory: []schemas.Step{}, Metadata: map[string]any{}, Timing: schemas.Timing{Start: 1, End: 11}}
	switch verdict {
	case "P", "F":
		r.Score = &schemas.GraderResult{Pass: verdict == "P", Score: score}
	case "E":
		r.Error = &schemas.ErrorInfo{Class: "agent_crash", Message: "died"}
	}
	b, _ := json.Marshal(r)
	return string(b) + "\n"
}

func TestCalibrate(t *testing.T) {
	var in strings.Builder
	for i := range 20 {
		in.WriteString(captureLine(fmt.Sprint("f", i), 1, "F", 0.05))
	}
	in.WriteString(captureLine("p", 1, "P", 1))
	in.WriteString(captureLine("e", 1, "E", 0))
	calls := 0
	flaky := func(_ context.Context, r *schemas.CaptureRecord, _ *schemas.PromptCase) schemas.GraderResult {
		calls++
		return schemas.GraderResult{Pass: calls%2 == 0, Score: float64(calls % 2)}
	}
	run := func(seed uint64) schemas.CalibrationReport {
		rep, err := Calibrate(context.Background(), "r.jsonl", strings.NewReader(in.String()),
			CalibrateOptions{Sample: 5, Seed: seed, Grade: flaky, GraderName: "flaky", Repeat: 2})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run(3)
	if rep.Records != 22 || rep.Graded != 21 || rep.Failures != 20 || rep.Errors["agent_crash"] != 1 || len(rep.Samples) != 5 {
		t.Fatalf("counts: %+v", rep)
	}
	ids := func(r schemas.CalibrationReport) string {
		var s []string
		for _, x := range r.Samples {
			s = append(s, x.ID)
		}
		return strings.Join(s, ",")
	}
	if a, b := ids(rep), ids(run(3)); a != b {
		t.Errorf("same seed, different samples: %s vs %s", a, b)
	}
	if a, b := ids(rep), ids(run(4)); a == b {
		t.Errorf("different seeds, same samples: %s", a)
	}
	// Scores: 20 × 0.05 and one 1.0: mean 2/21, std = sqrt(E[x²] − mean²).
	h := rep.Health
	mean := 2.0 / 21
	if d := h.Mean - mean; d > 1e-12 || d < -1e-12 || !h.TooStrict || h.TooLenient || h.Histogram[0].Count != 20 || h.Histogram[9].Count != 1 {
		t.Errorf("health = %+v", h)
	}
	// The flaky grader alternates, so every re-graded trial flips.
	if d := rep.Determinism; d == nil || d.Records != 5 || d.Flipped != 5 || d.FlipRate != 1 || d.MeanScoreStd != 0.5 {
		t.Errorf("determinism = %+v", rep.Determinism)
	}
	for _, s := range rep.Samples {
		if s.RescoredResult == nil {
			t.Errorf("sample %s not re-scored", s.ID)
		}
	}
	var md bytes.Buffer
	if err := WriteCalibrationMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Samples: 5", "- [ ] Valid failure", "Too strict (most scores < 0.1): yes", "5 flipped (flip rate 1.000)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestLabels(t *testing.T) {
	ls, err := ReadLabels("l.jsonl", strings.NewReader(`{"id":"a","pass":true}
{"id":"b","trial":1,"label":"valid_failure"}
{"id":"c","label":"ambiguous"}
`))
	if err != nil {
		t.Fatal(err)
	}
	results := captureLine("a", 1, "P", 1) + captureLine("a", 2, "F", 0) + captureLine("b", 1, "F", 0) + captureLine("c", 1, "P", 1)
	rep, err := Calibrate(context.Background(), "r.jsonl", strings.NewReader(results), CalibrateOptions{Labels: ls})
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Agreement
	// human: a1 pass, a2 pass, b1 fail; grader: pass, fail, fail.
	if a == nil || a.Items != 3 || a.Ambiguous != 1 || a.Kappa.Confusion[0][0] != 1 || a.Kappa.Confusion[0][1] != 1 || a.Kappa.Confusion[1][1] != 1 {
		t.Fatalf("agreement = %+v", a)
	}
	// po = 2/3; pe = (2/3)(1/3) + (1/3)(2/3) = 4/9; kappa = (2/3 − 4/9)/(5/9) = 0.4.
	if k := a.Kappa.Kappa; k == nil || *k < 0.4-1e-12 || *k > 0.4+1e-12 {
		t.Errorf("kappa = %v", k)
	}
	for _, bad := range []struct{ text, want string }{
		{`{"id":"a","pass":true,"label":"fail"}`, `l.jsonl:1: field "label": give either`},
		{`{"id":"a"}`, `l.jsonl:1: field "label": missing`},
		{`{"id":"a","pass":"yes"}`, `l.jsonl:1: field "pass": must be`},
		{`{"id":"a","pass":true}` + "\n" + `{"id":"a","pass":false}`, `l.jsonl:2: field "id": case "a" trial 0 is labelled twice`},
		{``, `l.jsonl: no labels`},
	} {
		if _, err := ReadLabels("l.jsonl", strings.NewReader(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %q", bad.text, err, bad.want)
		}
	}
}

func TestValidateRefs(t *testing.T) {
	cases := []schemas.PromptCase{
		{ID: "a", Input: schemas.SingleTurn("q"), Expected: "yes", Reference: "yes", NegativeReference: "no"},
		{ID: "b", Input: schemas.SingleTurn("q"), Expected: "yes", Reference: "nope"},
		{ID: "c", Input: schemas.SingleTurn("q")},
	}
	var seen []*schemas.CaptureRecord
	grade := func(_ context.Context, r *schemas.CaptureRecord, c *schemas.PromptCase) schemas.GraderResult {
		seen = append(seen, r)
		return schemas.GraderResult{Pass: strings.Contains(r.Output, c.Expected), Score: 1}
	}
	var got []schemas.ValidationResult
	st, err := ValidateRefs(context.Background(), cases, grade, func(v schemas.ValidationResult) error {
		got = append(got, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Checked != 3 || st.Misjudged != 1 || st.Skipped != 1 || strings.Join(st.Failing, ",") != "b (reference)" {
		t.Errorf("stats = %+v", st)
	}
	if !got[0].Correct || !got[1].Correct || got[1].Kind != schemas.RefNegative || got[1].Passes || got[2].Correct {
		t.Errorf("results = %+v", got)
	}
	if seen[1].Output != "no" || seen[0].Expected != "yes" || seen[0].StopReason != "end_turn" {
		t.Errorf("graded record = %+v", seen[1])
	}
	// The answer is the conversation's final message, as if the agent
	// had given it.
	if tr := seen[1].Trajectory; len(tr) != 1 || tr[0].Type != schemas.StepMessage || tr[0].TextContent() != "no" || tr[0].Turn != 1 {
		t.Errorf("graded trajectory = %+v", tr)
	}
}

func TestMarkdownToolPreview(t *testing.T) {
	long := strings.Repeat("line\n", 200)
	in, _ := json.Marshal(map[string]any{"file_path": "src/a.go", "content": long})
	d := int64(12)
	rec := schemas.CaptureRecord{ID: "x", Trial: 2, Input: schemas.SingleTurn("q"), Output: strings.Repeat("o", 250),
		Trajectory: []schemas.Step{
			{Type: schemas.StepToolCall, Name: "Write", Status: "completed", Duration: &d, Input: in},
			{Type: schemas.StepMessage, Content: json.RawMessage(`"` + strings.Repeat("m", 120) + `"`), StepID: "x-t2-s9"},
			{Type: schemas.StepUsage},
		}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, &rec); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"1. [TOOL:Write] -> completed (12ms) [→x-t2-s1]",
		"   File: src/a.go (1000 chars)",
		"   ```go",
		"   // ... 189 lines omitted ...",
		"2. [MESSAGE] " + strings.Repeat("m", 100) + "... [→x-t2-s9]",
		"**Output:** " + strings.Repeat("o", 200) + "...",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "3. ") {
		t.Error("usage step listed")
	}
}

func TestEachRecordTrialsFile(t *testing.T) {
	f, err := os.Open("../testdata/results/acp_trials.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	kind, err := EachRecord("acp_trials.jsonl", f, func(_ int, r *schemas.CaptureRecord) error {
		got = append(got, fmt.Sprintf("%s#%d:%s:%v", r.ID, r.Trial, r.Input.Text(), r.Score != nil && r.Score.Pass))
		return nil
	})
	if err != nil || kind != schemas.KindTrials {
		t.Fatal(kind, err)
	}
	want := "add#1:What is 2+2?:true,add#2:What is 2+2?:false,add#3:What is 2+2?:true,capital#1:Capital of France?:false,capital#2:Capital of France?:false,capital#3:Capital of France?:true"
	if strings.Join(got, ",") != want {
		t.Errorf("got %s", strings.Join(got, ","))
	}
}
