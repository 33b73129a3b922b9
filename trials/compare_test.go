package trials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"harness/schemas"
)

// captureLines writes capture records: one per (id, verdict) with trial
// numbers counted per id; verdict "P" pass, "F" fail, "E" timeout, "U"
// ungraded.
func captureLines(spec ...string) string {
	var b strings.Builder
	trial := map[string]int{}
	for _, s := range spec {
		id, v, _ := strings.Cut(s, "=")
		for _, ch := range v {
			trial[id]++
			line := fmt.Sprintf(`{"id":%q,"trial":%d,"input":"x","output":"o","trajectory":[],"metadata":{},"timing":{"start":0,"end":5},"toolErrors":false`, id, trial[id])
			switch ch {
			case 'P':
				line += `,"score":{"pass":true,"score":1}`
			case 'F':
				line += `,"score":{"pass":false,"score":0}`
			case 'E':
				line += `,"error":{"class":"timeout","message":"slow"}`
			}
			b.WriteString(line + "}\n")
		}
	}
	return b.String()
}

func mustRun(t *testing.T, name, text string) *Run {
	t.Helper()
	r, err := ReadRun(name, strings.NewReader(text))
	if err != nil {
		t.Fatalf("ReadRun(%s): %v", name, err)
	}
	return r
}

func TestCompare(t *testing.T) {
	a := mustRun(t, "a.jsonl", captureLines("c1=PP", "c2=FF", "c3=FF", "c4=PF", "c5=E", "onlyA=P", "c6=PP"))
	b := mustRun(t, "b.jsonl", captureLines("c1=PP", "c2=PP", "c3=PF", "c4=FF", "c5=P", "onlyB=F", "c6=PE"))
	rep := Compare(a, b, CompareOptions{K: 2, Seed: 3, Resamples: 400})
	if rep.CommonCases != 6 || len(rep.OnlyInA) != 1 || rep.OnlyInA[0] != "onlyA" || len(rep.OnlyInB) != 1 || rep.OnlyInB[0] != "onlyB" {
		t.Errorf("case sets: %+v", rep)
	}
	if len(rep.NotComparable) != 1 || rep.NotComparable[0] != "c5" {
		t.Errorf("not comparable = %v", rep.NotComparable)
	}
	// Outcomes (strict majority): A: c1 P, c2 F, c3 F, c4 F (1/2), c6 P.
	// B: c1 P, c2 P, c3 F (1/2), c4 F, c6 P (1/1).
	m := rep.McNemar
	if m.Cases != 5 || m.BothPass != 2 || m.OnlyA != 0 || m.OnlyB != 1 || m.BothFail != 2 || m.PValue != 1 {
		t.Errorf("mcnemar = %+v", m)
	}
	changes := map[string]string{}
	for _, c := range rep.Cases {
		changes[c.ID] = c.Change
	}
	if changes["c2"] != "gained" || changes["c1"] != "same" || changes["c5"] != "not comparable" {
		t.Errorf("changes = %v", changes)
	}
	// pass rate per case: A 1, 0, 0, .5, 1; B 1, 1, .5, 0, 1 → means .5 and .7.
	if d := rep.PassRate; d == nil || !near(d.MeanA, 0.5, 1e-12) || !near(d.MeanB, 0.7, 1e-12) || !near(d.Diff, 0.2, 1e-12) || d.Cases != 5 {
		t.Errorf("pass rate diff = %+v", d)
	}
	// pass@2 needs n ≥ 2 in both: c1..c4 (c6 has n=1 in B).
	// A: 1, 0, 0, 1; B: 1, 1, 1, 0 → .5 and .75.
	if d := rep.PassAtK; d == nil || d.Cases != 4 || !near(d.MeanA, 0.5, 1e-12) || !near(d.MeanB, 0.75, 1e-12) || d.Low > d.Diff || d.High < d.Diff {
		t.Errorf("pass@2 diff = %+v", d)
	}
	w := strings.Join(rep.Warnings, "\n")
	for _, sub := range []string{"in one run only", "no graded trial in a run", "fewer than k=2"} {
		if !strings.Contains(w, sub) {
			t.Errorf("warnings lack %q:\n%s", sub, w)
		}
	}
	if b, err := json.Marshal(rep); err != nil || bytes.Contains(b, []byte("NaN")) {
		t.Errorf("encode: %v", err)
	}
	var text bytes.Buffer
	if err := WriteCompareText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"McNemar (exact binomial, two-sided): both pass 2, only A 0, only B 1, both fail 2; p = 1", "c2  gained", "only in A (1): onlyA"} {
		if !strings.Contains(text.String(), sub) {
			t.Errorf("text lacks %q:\n%s", sub, text.String())
		}
	}
}

func TestCompareDisjoint(t *testing.T) {
	rep := Compare(mustRun(t, "a", captureLines("x=P")), mustRun(t, "b", captureLines("y=P")), CompareOptions{Resamples: 10})
	if rep.CommonCases != 0 || rep.PassRate != nil || rep.PassAtK != nil || rep.McNemar.PValue != 1 {
		t.Errorf("disjoint = %+v", rep)
	}
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "no case in common") {
		t.Errorf("warnings = %v", rep.Warnings)
	}
}

func TestReadRunErrors(t *testing.T) {
	trialsLine := `{"id":"t","input":"x","k":1,"trials":[{"trialNum":1,"output":"o","trajectory":[],"duration":1,"pass":true,"score":1}]}`
	tests := []struct {
		name, text, want string
	}{
		{"mixed", captureLines("a=P") + trialsLine + "\n", "f.jsonl:2: mixed formats: this line is a trials record but line 1 is a capture record"},
		{"dup trial", captureLines("a=P") + captureLines("a=F"), `f.jsonl:2: field "trial": case "a" trial 1 appears twice (first on line 1)`},
		{"dup case", trialsLine + "\n" + trialsLine + "\n", `f.jsonl:2: field "id": case "t" appears twice`},
		{"no id", `{"output":"x"}` + "\n", `f.jsonl:1: field "id": missing`},
		{"bad json", "{\n", "f.jsonl:1: not a JSON object"},
		{"bad field", `{"id":"a","trial":"one","trajectory":[]}` + "\n", `f.jsonl:1: field "trial": capture record`},
		{"empty", "\n\n", "f.jsonl: no records"},
		{"trials not array", `{"id":"a","trials":3}` + "\n", `field "trials": must be an array`},
	}
	for _, tt := range tests {
		_, err := ReadRun("f.jsonl", strings.NewReader(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestReadRunTrialsFile(t *testing.T) {
	rec := BuildRecord(schemas.PromptCase{ID: "a", Input: schemas.SingleTurn("x")}, 3,
		[]schemas.CaptureRecord{rec(1, true), errRec(2, "agent_crash"), rec(3, false)})
	b, _ := json.Marshal(rec)
	sum := NewSummary(3)
	sum.Add(rec)
	sb, _ := json.Marshal(sum.Result(1, 10))
	run := mustRun(t, "t.jsonl", string(b)+"\n"+string(sb)+"\n")
	c := run.Case("a")
	if run.Kind != schemas.KindTrials || c == nil || c.N != 2 || c.C != 1 || c.Errors["agent_crash"] != 1 || c.Trials != 3 {
		t.Errorf("run = %+v case = %+v", run, c)
	}
	// Recount agrees with BuildRecord.
	var back schemas.TrialsRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.N, back.C = 0, 0
	Recount(&back)
	if back.N != 2 || back.C != 1 || back.PassAtK != nil || *back.PassRate != 0.5 {
		t.Errorf("recount = %+v", back)
	}
}

// A case whose content hash differs between the runs is another case under
// the same id: listed apart as changed, never "same", and in no statistic.
// Records without a hash (older runs) pair by id as before.
func TestCompareChangedCases(t *testing.T) {
	hashed := func(text string, hashes map[string]string) string {
		var b strings.Builder
		for line := range strings.Lines(text) {
			var rec struct {
				ID string `json:"id"`
			}
			json.Unmarshal([]byte(line), &rec)
			if h, ok := hashes[rec.ID]; ok {
				line = strings.TrimSuffix(line, "}\n") + `,"caseHash":"` + h + "\"}\n"
			}
			b.WriteString(line)
		}
		return b.String()
	}
	h1, h2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	a := mustRun(t, "a.jsonl", hashed(captureLines("same=P", "edited=P", "old=P"), map[string]string{"same": h1, "edited": h1}))
	b := mustRun(t, "b.jsonl", hashed(captureLines("same=P", "edited=P", "old=F"), map[string]string{"same": h1, "edited": h2, "old": h2}))
	rep := Compare(a, b, CompareOptions{Resamples: 0})
	if len(rep.ChangedCases) != 1 || rep.ChangedCases[0] != "edited" {
		t.Fatalf("changed cases %v, want [edited]", rep.ChangedCases)
	}
	changes := map[string]string{}
	for _, d := range rep.Cases {
		changes[d.ID] = d.Change
	}
	if changes["edited"] != "changed" || changes["same"] != "same" || changes["old"] != "lost" {
		t.Errorf("changes %v, want edited changed, same same, old (no hash in A) lost", changes)
	}
	if rep.McNemar.Cases != 2 || rep.CommonCases != 3 {
		t.Errorf("McNemar over %d cases of %d common, want 2 of 3", rep.McNemar.Cases, rep.CommonCases)
	}
	var text bytes.Buffer
	if err := WriteCompareText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "cases that changed between the runs, not compared (1): edited") {
		t.Errorf("text does not list the changed case:\n%s", text.String())
	}
}
