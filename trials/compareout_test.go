package trials

import (
	"bytes"
	"strings"
	"testing"

	"harness/schemas"
)

func TestRegressed(t *testing.T) {
	rep := schemas.CompareReport{
		PassRate: &schemas.DiffEstimate{Diff: -0.3},
		McNemar:  schemas.McNemarResult{PValue: 0.01},
		Cases:    []schemas.CaseDelta{{ID: "a", Change: "lost"}, {ID: "b", Change: "same"}, {ID: "c", Change: "lost"}},
	}
	r := Regressed(rep, 0.1)
	if r == nil || r.Drop != 0.3 || strings.Join(r.Lost, ",") != "a,c" {
		t.Fatalf("Regressed = %+v, want a drop of 0.3 losing a and c", r)
	}
	if r := Regressed(rep, 0.3); r != nil {
		t.Errorf("a drop of 0.3 is not over 0.3, yet %+v", r)
	}
	rep.McNemar.PValue = 0.2
	if r := Regressed(rep, 0.1); r != nil {
		t.Errorf("p = 0.2 is no real change, yet %+v", r)
	}
	if r := Regressed(schemas.CompareReport{}, 0); r != nil {
		t.Errorf("no pass rates, yet %+v", r)
	}
	// A run that lost a fifth of its trials to the infrastructure decides
	// no regression: the gate fails for that reason.
	rep.McNemar.PValue = 0.5
	rep.B.Coverage, rep.B.Covered = "over 48 of 60 trials; 12 left out (infra: 12)", 0.8
	if r := Regressed(rep, 0.5); r == nil || !strings.Contains(r.UnderCovered, "12 left out (infra: 12)") {
		t.Errorf("under-covered B: %+v", r)
	}
}

// Crashes and hangs are the candidate's failures: a comparison counts them
// as lost cases, and the regression gate sees them.
func TestCompareCountsAgentFailures(t *testing.T) {
	rec := func(id string, pass bool, e *schemas.ErrorInfo) schemas.CaptureRecord {
		r := schemas.CaptureRecord{ID: id, Trial: 1, Error: e, Provenance: schemas.Provenance{Graders: []string{"g"}}}
		if e == nil {
			r.Score = &schemas.GraderResult{Pass: pass}
		}
		return r
	}
	var ca, cb []*CaseCount
	for i := range 12 {
		id := string(rune('a' + i))
		ra := rec(id, true, nil)
		ca = append(ca, &CaseCount{ID: id})
		ca[i].Add(&ra)
		rb := rec(id, true, nil)
		if i < 6 {
			rb = rec(id, false, &schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Owner: schemas.OwnerAgent})
		}
		cb = append(cb, &CaseCount{ID: id})
		cb[i].Add(&rb)
	}
	a, b := NewRun("a", "capture", ca), NewRun("b", "capture", cb)
	rep := Compare(a, b, CompareOptions{Resamples: 100})
	if rep.McNemar.OnlyA != 6 || rep.B.Failures[schemas.ErrAgentCrash] != 6 || rep.B.Covered != 1 {
		t.Fatalf("only A %d, B failures %v, covered %v", rep.McNemar.OnlyA, rep.B.Failures, rep.B.Covered)
	}
	if r := Regressed(rep, 0.1); r == nil || len(r.Lost) != 6 {
		t.Errorf("regression: %+v", r)
	}
}

func TestWriteCompareCSV(t *testing.T) {
	half := 0.5
	rep := schemas.CompareReport{Cases: []schemas.CaseDelta{{ID: "a,b", A: schemas.CaseSide{N: 2, C: 1, PassRate: &half}, Change: "gained"}}}
	var b bytes.Buffer
	if err := WriteCompareCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	want := "id,a_n,a_c,a_passRate,b_n,b_c,b_passRate,delta,change\n\"a,b\",2,1,0.5,0,0,,,gained\n"
	if b.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The comparison gate fails a significant drop over the allowed one,
// says why with the p-value, and passes a drop that is not significant
// at its level or within the allowance; no common graded case fails.
func TestRegressionGateDecide(t *testing.T) {
	rep := schemas.CompareReport{
		PassRate: &schemas.DiffEstimate{MeanA: 0.9, MeanB: 0.5, Diff: -0.4},
		McNemar:  schemas.McNemarResult{PValue: 0.0039},
		Cases:    []schemas.CaseDelta{{ID: "a", Change: "lost"}, {ID: "b", Change: "same"}},
	}
	g := RegressionGate{Baseline: "main", MaxDrop: 0.1, Alpha: 0.05}
	v := g.Decide("pr", rep)
	if !v.Failed || *v.Drop != 0.4 || v.PValue != 0.0039 || len(v.Lost) != 1 {
		t.Fatalf("verdict %+v", v)
	}
	want := "pr: pass rate 0.500 against 0.900 for the baseline main, a drop of 0.400, over the 0.1 allowed, and significant (McNemar p = 0.0039 < 0.05; 1 lost: a)"
	if v.Reason != want {
		t.Errorf("reason\n got %s\nwant %s", v.Reason, want)
	}
	g.Alpha = 0.001
	if v := g.Decide("pr", rep); v.Failed || !strings.Contains(v.Reason, "not significant (McNemar p = 0.0039, not below 0.001") {
		t.Errorf("at 0.001: %+v", v)
	}
	g.Alpha, g.MaxDrop = 0.05, 0.5
	if v := g.Decide("pr", rep); v.Failed || !strings.Contains(v.Reason, "a change of -0.400, within the 0.5 drop allowed") {
		t.Errorf("within 0.5: %+v", v)
	}
	if v := g.Decide("pr", schemas.CompareReport{}); !v.Failed || !strings.Contains(v.Reason, "no case was graded in both main and pr") {
		t.Errorf("nothing common: %+v", v)
	}
}
