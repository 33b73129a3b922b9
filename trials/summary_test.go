package trials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"harness/schemas"
)

// trialsRec builds a trials record with n graded trials, c of them passing.
func trialsRec(id string, k, n, c int, errs ...string) schemas.TrialsRecord {
	var recs []schemas.CaptureRecord
	for i := 1; i <= n; i++ {
		r := rec(i, i <= c)
		r.ID = id
		recs = append(recs, r)
	}
	for i, class := range errs {
		recs = append(recs, errRec(n+i+1, class))
	}
	return BuildRecord(schemas.PromptCase{ID: id, Input: schemas.SingleTurn("x")}, k, recs)
}

func TestSummaryMeans(t *testing.T) {
	s := NewSummary(0)
	s.Add(trialsRec("a", 3, 3, 3))                // pass@k: 1,1,1  pass^k: 1,1,1
	s.Add(trialsRec("b", 3, 3, 1))                // pass@k: 1/3, 2/3, 1  pass^k: 1/3, 0, 0
	s.Add(trialsRec("c", 3, 2, 0, "timeout"))     // n=2: pass@k 0,0
	s.Add(trialsRec("d", 3, 0, 0, "agent_crash")) // unscored
	r := s.Result(DefaultSeed, 500)
	if r.Type != schemas.SummaryType || r.K != 3 || r.Cases != 4 || r.ScoredCases != 3 || r.Trials != 10 || r.Graded != 8 || r.Passes != 4 {
		t.Fatalf("counts = %+v", r)
	}
	if r.Errors["timeout"] != 1 || r.Errors["agent_crash"] != 1 || len(r.UnscoredCases) != 1 || r.UnscoredCases[0] != "d" {
		t.Errorf("errors = %v unscored = %v", r.Errors, r.UnscoredCases)
	}
	if r.PassRate == nil || *r.PassRate != 0.5 {
		t.Errorf("passRate = %v, want 4/8", r.PassRate)
	}
	want := []struct {
		at, exp float64
		cases   int
	}{
		{(1 + 1.0/3 + 0) / 3, (1 + 1.0/3 + 0) / 3, 3},
		{(1 + 2.0/3 + 0) / 3, (1 + 0 + 0) / 3.0, 3},
		{(1 + 1) / 2.0, (1 + 0) / 2.0, 2},
	}
	for i, w := range want {
		key := string(rune('1' + i))
		a, e := r.PassAt[key], r.PassExp[key]
		if !near(a.Mean, w.at, 1e-12) || !near(e.Mean, w.exp, 1e-12) || a.Cases != w.cases || a.K != i+1 {
			t.Errorf("k=%d: pass@k %+v pass^k %+v; want %v %v over %d", i+1, a, e, w.at, w.exp, w.cases)
		}
		if a.Low > a.Mean || a.High < a.Mean || a.Low < 0 || a.High > 1 {
			t.Errorf("k=%d: interval [%v,%v] around %v", i+1, a.Low, a.High, a.Mean)
		}
	}
	if len(r.PassAt) != 3 {
		t.Errorf("curve has %d points", len(r.PassAt))
	}
	if r.PassAtK == nil || r.PassAtK.K != 3 || r.PassAtK.Cases != 2 {
		t.Errorf("passAtK = %+v", r.PassAtK)
	}
	w := strings.Join(r.Warnings, "\n")
	for _, sub := range []string{"no graded trial", "only the 2 of 3", "between 2 and 3"} {
		if !strings.Contains(w, sub) {
			t.Errorf("warnings lack %q:\n%s", sub, w)
		}
	}
	// Same seed, same numbers; the result encodes without NaN.
	r2 := s.Result(DefaultSeed, 500)
	b1, _ := json.Marshal(r)
	b2, err := json.Marshal(r2)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Errorf("results differ or fail to encode: %v", err)
	}
}

func TestSummaryEdgeCases(t *testing.T) {
	empty := NewSummary(5).Result(1, 100)
	if empty.PassRate != nil || len(empty.PassAt) != 0 || empty.PassAtK != nil {
		t.Errorf("empty = %+v", empty)
	}
	if _, err := json.Marshal(empty); err != nil {
		t.Error(err)
	}
	s := NewSummary(5)
	s.Add(trialsRec("a", 5, 2, 1))
	r := s.Result(1, 0)
	if r.PassAtK != nil || !strings.Contains(strings.Join(r.Warnings, "\n"), "no case has 5 graded trials") {
		t.Errorf("k > n: passAtK = %v warnings = %v", r.PassAtK, r.Warnings)
	}
	if a := r.PassAt["1"]; a.Low != 0.5 || a.High != 0.5 {
		t.Errorf("no bootstrap: %+v", a)
	}
	// NewSummary(k) keeps k even when records ask for more.
	s = NewSummary(2)
	s.Add(trialsRec("a", 4, 4, 1))
	if r := s.Result(1, 10); r.K != 2 || r.PassAtK == nil || r.PassAtK.K != 2 {
		t.Errorf("fixed k: %+v", r.PassAtK)
	}
}

func TestWriteTable(t *testing.T) {
	s := NewSummary(2)
	s.Add(trialsRec("a", 2, 2, 1, "timeout"))
	s.Add(trialsRec("b", 2, 2, 2))
	var b bytes.Buffer
	if err := s.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"cases: 2 graded of 2 run   trials: 4 graded of 5   passed: 3",
		"pass 75.0% [50.0, 100.0] over 4 of 5 trials; 1 left out (timeout: 1)",
		"pass rate: 0.750",
		"k    pass@k  95% CI                pass^k  95% CI          cases\n",
		"2 *  1.000   [0.158, 1.000] exact  0.500   [0.000, 1.000]  2\n",
		"2 *  1.000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestGates(t *testing.T) {
	gates := []Gate{{Metric: GatePassRate, Min: 0.6}, {Metric: GatePassAt, K: 2, Min: 0.9},
		{Metric: GatePassAt, K: 1, Min: 0.8}, {Metric: GatePassExp, K: 2, Min: 0.5}}
	if got := gates[2].String() + "; " + gates[3].String(); got != "pass@1 >= 0.8; pass^2 >= 0.5" {
		t.Errorf("String = %q", got)
	}
	s := NewSummary(2)
	s.Add(trialsRec("a", 2, 2, 1)) // pass@1 .5 pass@2 1 pass^2 0
	s.Add(trialsRec("b", 2, 2, 2)) // 1 1 1
	res := s.Result(1, 100)
	// pass rate .75 ≥ .6 ok; pass@2 = 1 ok; pass@1 = .75 < .8 fails; pass^2 = .5 ok.
	fails := CheckGates(gates, res)
	if len(fails) != 1 || !strings.Contains(fails[0], "pass@1 is 0.7500, below 0.8") {
		t.Errorf("fails = %q", fails)
	}
	fails = CheckGates([]Gate{{Metric: GatePassAt, K: 3, Min: 0.1}}, res)
	if len(fails) != 1 || !strings.Contains(fails[0], "not available") {
		t.Errorf("unavailable k: %q", fails)
	}
	fails = CheckGates([]Gate{{Metric: GatePassRate, Min: 0.1}}, NewSummary(1).Result(1, 1))
	if len(fails) != 1 {
		t.Errorf("nothing graded: %q", fails)
	}
	for _, bad := range []string{"80", "x", "NaN", "-0.1"} {
		if _, err := ParseFraction(bad); err == nil {
			t.Errorf("ParseFraction(%q): no error", bad)
		}
	}
	for _, bad := range []string{"0=0.5", "3", "3=1.5", "x=0.5"} {
		if _, _, err := ParseKX(bad); err == nil {
			t.Errorf("ParseKX(%q): no error", bad)
		}
	}
	if k, x, err := ParseKX(" 3 = 0.25 "); k != 3 || x != 0.25 || err != nil {
		t.Errorf("ParseKX: %d %g %v", k, x, err)
	}
}

// TestSummaryOrderIndependent: the same cases added in another order give
// the same summary, intervals included.
func TestSummaryOrderIndependent(t *testing.T) {
	pairs := [][2]int{{10, 3}, {10, 7}, {9, 5}, {10, 10}, {8, 0}, {10, 1}}
	a, b := NewSummary(5), NewSummary(5)
	for i := range pairs {
		p, q := pairs[i], pairs[len(pairs)-1-i]
		a.Add(schemas.TrialsRecord{ID: fmt.Sprint("c", i), K: 5, N: p[0], C: p[1]})
		b.Add(schemas.TrialsRecord{ID: fmt.Sprint("c", len(pairs)-1-i), K: 5, N: q[0], C: q[1]})
	}
	ra, rb := a.Result(7, 500), b.Result(7, 500)
	ja, _ := json.Marshal(ra)
	jb, _ := json.Marshal(rb)
	if string(ja) != string(jb) {
		t.Errorf("order changed the summary:\n%s\n%s", ja, jb)
	}
}

// Why a run has no graded trial: "no grader was given" only when the trials
// ran without one.
func TestNoGradedReason(t *testing.T) {
	for _, c := range []struct {
		ungraded, missing int
		errors            map[string]int
		want              string
	}{
		{3, 0, nil, "no grader was given"},
		{0, 0, map[string]int{"grader_error": 2, "agent_crash": 1}, "the trials ended in errors: 1 agent_crash, 2 grader_error"},
		{2, 0, map[string]int{"agent_crash": 1}, "the trials ended in errors: 1 agent_crash; 2 ran without a grader"},
		{0, 4, nil, "4 asked trials have no record"},
		{0, 0, nil, "no trial ran"},
	} {
		if got := NoGradedReason(c.ungraded, c.missing, c.errors); got != c.want {
			t.Errorf("NoGradedReason(%d, %d, %v) = %q, want %q", c.ungraded, c.missing, c.errors, got, c.want)
		}
	}
}
