package trials

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"harness/schemas"
)

func rec(trial int, pass bool) schemas.CaptureRecord {
	score := 0.0
	if pass {
		score = 1
	}
	return schemas.CaptureRecord{
		ID: "c1", Trial: trial, Input: schemas.SingleTurn("hi"), Output: "out",
		Timing: schemas.Timing{Start: 1000, End: 1250},
		Score:  &schemas.GraderResult{Pass: pass, Score: score, Reasoning: "r"},
	}
}

func errRec(trial int, class string) schemas.CaptureRecord {
	r := rec(trial, false)
	r.Score = nil
	r.Error = &schemas.ErrorInfo{Class: class, Message: "boom"}
	return r
}

func graderErrRec(trial int) schemas.CaptureRecord {
	r := rec(trial, false)
	r.Score = &schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderTimeout, Message: "slow"}}
	return r
}

var case1 = schemas.PromptCase{ID: "c1", Input: schemas.SingleTurn("hi"), Expected: "x", Metadata: map[string]any{"category": "a"}}

func TestBuildRecord(t *testing.T) {
	tests := []struct {
		name          string
		k             int
		recs          []schemas.CaptureRecord
		n, c          int
		errors        map[string]int
		ungraded      int
		missing       int
		passAtK       float64 // -1: absent
		passExpK      float64
		curveLen      int
		warnSubstring string
	}{
		{
			name: "all graded, n = k",
			k:    5, recs: []schemas.CaptureRecord{rec(1, true), rec(2, false), rec(3, true), rec(4, false), rec(5, false)},
			n: 5, c: 2, passAtK: 1, passExpK: 0, curveLen: 5,
		},
		{
			name: "infra errors leave n < k",
			k:    5, recs: []schemas.CaptureRecord{rec(1, true), errRec(2, schemas.ErrTimeout), rec(3, true), graderErrRec(4), errRec(5, schemas.ErrAgentCrash)},
			n: 2, c: 2, errors: map[string]int{"timeout": 1, "agent_crash": 1, "grader_timeout": 1},
			passAtK: -1, passExpK: -1, curveLen: 2, warnSubstring: "only n=2 of k=5",
		},
		{
			name: "k smaller than n",
			k:    2, recs: []schemas.CaptureRecord{rec(1, true), rec(2, false), rec(3, false), rec(4, false)},
			n: 4, c: 1, passAtK: 0.5, passExpK: 0, curveLen: 4, // 1 − C(3,2)/C(4,2) = 1 − 3/6
		},
		{
			name: "no grader",
			k:    2, recs: func() []schemas.CaptureRecord {
				a, b := rec(1, true), rec(2, true)
				a.Score, b.Score = nil, nil
				return []schemas.CaptureRecord{a, b}
			}(),
			ungraded: 2, passAtK: -1, passExpK: -1, warnSubstring: "without a grader",
		},
		{
			name: "missing trials",
			k:    3, recs: []schemas.CaptureRecord{rec(1, true)},
			n: 1, c: 1, missing: 2, passAtK: -1, passExpK: -1, curveLen: 1, warnSubstring: "have no record",
		},
		{
			name: "error with no class",
			k:    1, recs: []schemas.CaptureRecord{errRec(1, "")},
			errors: map[string]int{Unclassified: 1}, passAtK: -1, passExpK: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := BuildRecord(case1, tt.k, tt.recs)
			if r.ID != "c1" || r.Expected != "x" || r.K != tt.k || len(r.Trials) != len(tt.recs) {
				t.Errorf("header = %+v", r)
			}
			if r.N != tt.n || r.C != tt.c || r.Ungraded != tt.ungraded || r.Missing != tt.missing {
				t.Errorf("n=%d c=%d ungraded=%d missing=%d; want %d %d %d %d", r.N, r.C, r.Ungraded, r.Missing, tt.n, tt.c, tt.ungraded, tt.missing)
			}
			if len(r.Errors) != len(tt.errors) {
				t.Errorf("errors = %v, want %v", r.Errors, tt.errors)
			}
			for k, v := range tt.errors {
				if r.Errors[k] != v {
					t.Errorf("errors[%s] = %d, want %d", k, r.Errors[k], v)
				}
			}
			checkOpt(t, "passAtK", r.PassAtK, tt.passAtK)
			checkOpt(t, "passExpK", r.PassExpK, tt.passExpK)
			if len(r.PassAt) != tt.curveLen || len(r.PassExp) != tt.curveLen {
				t.Errorf("curves have %d/%d points, want %d", len(r.PassAt), len(r.PassExp), tt.curveLen)
			}
			if tt.n > 0 {
				if r.PassRate == nil || *r.PassRate != float64(tt.c)/float64(tt.n) || r.PassRateCI == nil {
					t.Errorf("passRate = %v ci = %v", r.PassRate, r.PassRateCI)
				}
				if r.PassAt["1"] != float64(tt.c)/float64(tt.n) {
					t.Errorf("passAt[1] = %v", r.PassAt["1"])
				}
			} else if r.PassRate != nil || r.PassRateCI != nil {
				t.Errorf("n=0 but passRate = %v", r.PassRate)
			}
			joined := strings.Join(r.Warnings, "\n")
			if tt.warnSubstring != "" && !strings.Contains(joined, tt.warnSubstring) {
				t.Errorf("warnings %q lack %q", joined, tt.warnSubstring)
			}
			if tt.warnSubstring == "" && tt.n > 0 && len(r.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", joined)
			}
			// Nothing in it is NaN: it encodes.
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if bytes.Contains(b, []byte("NaN")) {
				t.Errorf("NaN in %s", b)
			}
		})
	}
}

func checkOpt(t *testing.T, name string, got *float64, want float64) {
	t.Helper()
	switch {
	case want < 0 && got != nil:
		t.Errorf("%s = %v, want absent", name, *got)
	case want >= 0 && got == nil:
		t.Errorf("%s absent, want %v", name, want)
	case want >= 0 && math.Abs(*got-want) > 1e-12:
		t.Errorf("%s = %v, want %v", name, *got, want)
	}
}

// A trials record written by harness encodes the acp-harness TrialEntry
// fields and reads back with the grader result intact.
func TestTrialEntryJSON(t *testing.T) {
	r := BuildRecord(case1, 2, []schemas.CaptureRecord{rec(2, false), errRec(1, schemas.ErrTimeout)})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Trials []map[string]any `json:"trials"`
	}
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	first, second := generic.Trials[0], generic.Trials[1]
	if first["trialNum"] != 1.0 || first["trial"] != 1.0 || first["excluded"] != "timeout" || first["pass"] != nil {
		t.Errorf("errored entry = %v", first)
	}
	if second["trialNum"] != 2.0 || second["pass"] != false || second["score"] != 0.0 || second["reasoning"] != "r" || second["duration"] != 250.0 {
		t.Errorf("graded entry = %v", second)
	}
	if gr, ok := second["graderResult"].(map[string]any); !ok || gr["reasoning"] != "r" {
		t.Errorf("graderResult = %v", second["graderResult"])
	}
	var back schemas.TrialsRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	c := back.Trials[1].Capture()
	if c.Score == nil || c.Score.Pass || c.Score.Reasoning != "r" || c.Trial != 2 || c.Output != "out" {
		t.Errorf("round trip capture = %+v", c)
	}
}

// An acp-harness TrialResult line loads; its flat pass/score become a
// grader result.
func TestTrialEntryFromACPHarness(t *testing.T) {
	line := `{"id":"a1","input":"say hello","k":2,"trials":[{"trialNum":1,"output":"hi","trajectory":[{"type":"message","content":"hi","timestamp":3}],"duration":705,"pass":true,"score":0.5},{"trialNum":2,"output":"","trajectory":[],"duration":9,"pass":false,"reasoning":"Error: boom"}],"passRate":0.5,"passAtK":0.75,"passExpK":0.25}`
	var tr schemas.TrialsRecord
	if err := json.Unmarshal([]byte(line), &tr); err != nil {
		t.Fatal(err)
	}
	c1 := tr.Trials[0].Capture()
	if c1.Trial != 1 || c1.Score == nil || !c1.Score.Pass || c1.Score.Score != 0.5 || schemas.RecordDuration(&c1) != 705 {
		t.Errorf("trial 1 = %+v", c1)
	}
	c2 := tr.Trials[1].Capture()
	if c2.Score == nil || c2.Score.Pass || c2.Score.Reasoning != "Error: boom" {
		t.Errorf("trial 2 = %+v", c2.Score)
	}
}
