package evaluation

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"harness/graders"
	"harness/results"
	"harness/schemas"
)

// outputGrader passes a record whose output is "yes".
type outputGrader struct{}

func (outputGrader) Name() string { return "exec:yes" }

func (outputGrader) Grade(_ context.Context, in *graders.Input) schemas.GraderResult {
	if in.Record.Output == "yes" {
		return schemas.GraderResult{Pass: true, Score: 1}
	}
	return schemas.GraderResult{Score: 0}
}

func captureRec(id string, trial int, output string) schemas.CaptureRecord {
	return schemas.CaptureRecord{ID: id, Trial: trial, Input: schemas.SingleTurn("q"), Output: output, StopReason: "end_turn",
		Metadata: map[string]any{"keep": "me"}}
}

func TestCountRecords(t *testing.T) {
	key := results.NewKey([]byte("k"))
	files := map[string][]byte{
		"two.jsonl":   shard(t, key, captureRec("a", 1, "yes"), captureRec("b", 1, "no")),
		"empty.jsonl": nil,
		"bad.jsonl":   append(shard(t, key, captureRec("a", 1, "yes")), "[1,2]\n"...),
	}
	src := sources(files, "two.jsonl", "empty.jsonl", "bad.jsonl")
	if n, err := CountRecords(src[0]); err != nil || n != 2 {
		t.Errorf("two.jsonl: %d records, err %v; want 2", n, err)
	}
	var ie *schemas.InputError
	if _, err := CountRecords(src[1]); !errors.As(err, &ie) || ie.File != "empty.jsonl" {
		t.Errorf("empty.jsonl: err %v, want an input error naming the file", err)
	}
	if _, err := CountRecords(src[2]); !errors.As(err, &ie) || ie.File != "bad.jsonl" || ie.Line != 2 {
		t.Errorf("bad.jsonl: err %v, want an input error at bad.jsonl:2", err)
	}
}

func TestSample(t *testing.T) {
	count := func(chosen func(int) bool) (n int, picked []int) {
		for i := range 10 {
			if chosen(i) {
				n++
				picked = append(picked, i)
			}
		}
		return n, picked
	}
	n, a := count(Sample(10, 3, 7))
	if n != 3 {
		t.Fatalf("chose %d of 10, want 3", n)
	}
	if _, b := count(Sample(10, 3, 7)); !equalInts(a, b) {
		t.Errorf("the same seed chose %v, then %v", a, b)
	}
	if n, _ := count(Sample(10, 20, 7)); n != 10 {
		t.Errorf("a sample larger than the set chose %d, want all 10", n)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Regrading a results file writes each chosen record back with its new
// score and everything else as it was.
func TestRegradeFile(t *testing.T) {
	key := results.NewKey([]byte("k"))
	files := map[string][]byte{"r.jsonl": shard(t, key, captureRec("a", 1, "yes"), captureRec("b", 1, "no"), captureRec("c", 1, "no"))}
	src := sources(files, "r.jsonl")
	var buf bytes.Buffer
	out, err := results.OpenOutput("-", results.OutputOptions{Stdout: &buf, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Regrade(context.Background(), src, out, RegradeOptions{
		Grader: outputGrader{}, Count: 1, Names: []string{"exec:yes"}, Concurrency: 2,
		Chosen: func(i int) bool { return i != 2 }, // leave c out
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Close()
	if st.Graded != 2 || st.Passed != 1 || st.Failed != 1 {
		t.Errorf("stats %+v, want 2 graded: 1 passed, 1 failed", st)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("wrote %d lines, want 2 (c not chosen):\n%s", len(lines), buf.String())
	}
	for i, want := range []struct {
		id   string
		pass bool
	}{{"a", true}, {"b", false}} {
		rl, err := schemas.ParseResultLine([]byte(lines[i]))
		if err != nil {
			t.Fatal(err)
		}
		r := rl.Capture
		if r.ID != want.id || r.Score == nil || r.Score.Pass != want.pass {
			t.Errorf("line %d: id %s score %+v, want %s pass %v", i+1, r.ID, r.Score, want.id, want.pass)
		}
		if r.Metadata["keep"] != "me" || len(r.Provenance.Graders) != 1 || r.Provenance.Graders[0] != "exec:yes" {
			t.Errorf("line %d: metadata %v, graders %v; want the metadata kept and the grader named", i+1, r.Metadata, r.Provenance.Graders)
		}
	}
}

func TestGradeSingle(t *testing.T) {
	if r := GradeSingle(context.Background(), outputGrader{}, SingleShot{Output: "yes", Input: "q"}, schemas.Provenance{}); !r.Pass {
		t.Errorf("output yes: %+v, want a pass", r)
	}
	if r := GradeSingle(context.Background(), outputGrader{}, SingleShot{Output: "no"}, schemas.Provenance{}); r.Pass {
		t.Errorf("output no: %+v, want a failure", r)
	}
}
