package graders

import (
	"math"
	"testing"
)

// FuzzParseResult parses arbitrary grader output: never a panic, and an
// accepted result always has a score in 0..1; a rejected one is classified.
func FuzzParseResult(f *testing.F) {
	for _, s := range []string{
		`{"pass":true,"score":1,"reasoning":"ok"}`, `{"pass":false}`, `{"score":0.4}`,
		`{"score":1.5}`, `{"score":"high"}`, `{"passed":true,"reason":"r","checks":[{"text":"t","pass":true}]}`,
		`{"hits":["a"],"misses":["b"],"score":0.5}`, `{}`, `[]`, `garbage`, `{"score":-0}`, `{"score":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, errInfo := parseResult(b, 0.5)
		if errInfo != nil {
			if errInfo.Class == "" {
				t.Fatal("unclassified grader error")
			}
			return
		}
		if math.IsNaN(r.Score) || r.Score < 0 || r.Score > 1 {
			t.Fatalf("accepted score %v from %q", r.Score, b)
		}
	})
}
