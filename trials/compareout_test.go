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
