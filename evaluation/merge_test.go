package evaluation

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"harness/results"
	"harness/schemas"
)

// shard encodes records as one shard file, signed with key (nil: not
// signed).
func shard(t *testing.T, key *results.Key, recs ...schemas.CaptureRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := results.NewWriter("shard.jsonl", &b)
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		w.Sign(key)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func rec(id string, trial int, pass bool) schemas.CaptureRecord {
	return schemas.CaptureRecord{ID: id, Trial: trial, Input: schemas.SingleTurn("q"), Output: "a",
		StopReason: "end_turn", Score: &schemas.GraderResult{Pass: pass, Score: map[bool]float64{true: 1}[pass]}}
}

func sources(files map[string][]byte, order ...string) []Source {
	var out []Source
	for _, name := range order {
		b := files[name]
		out = append(out, Source{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }})
	}
	return out
}

func TestReadShardsTrials(t *testing.T) {
	key := results.NewKey([]byte("k"))
	files := map[string][]byte{
		"s1.jsonl": shard(t, key, rec("b", 2, true), rec("a", 1, true)),
		"s2.jsonl": shard(t, key, rec("a", 2, false), rec("b", 1, true)),
	}
	cases := []schemas.PromptCase{{ID: "a", Input: schemas.SingleTurn("q")}, {ID: "b", Input: schemas.SingleTurn("q")}}
	s, err := ReadShards(ShardOptions{Files: sources(files, "s1.jsonl", "s2.jsonl"), Cases: cases, PromptsName: "p.jsonl", K: 2, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Records() != 4 || s.Units() != 4 || len(s.Gaps) != 0 {
		t.Fatalf("records %d, units %d, gaps %v; want 4, 4, none", s.Records(), s.Units(), s.Gaps)
	}
	var out bytes.Buffer
	w, _ := results.NewWriter("out.jsonl", &out)
	sum, err := s.WriteTrials(w, MergeTrialsOptions{Seed: 1, Resamples: 10})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d trials records, want 2:\n%s", len(lines), out.String())
	}
	for i, want := range []struct {
		id   string
		n, c int
	}{{"a", 2, 1}, {"b", 2, 2}} {
		rl, err := schemas.ParseResultLine([]byte(lines[i]))
		if err != nil || rl.Trials == nil {
			t.Fatalf("line %d: %v (%s)", i+1, err, lines[i])
		}
		if rl.Trials.ID != want.id || rl.Trials.N != want.n || rl.Trials.C != want.c {
			t.Errorf("line %d: id %s n %d c %d, want %s %d %d", i+1, rl.Trials.ID, rl.Trials.N, rl.Trials.C, want.id, want.n, want.c)
		}
	}
	if sum.K != 2 {
		t.Errorf("summary k = %d, want 2", sum.K)
	}
}

func TestReadShardsCapturesInOrder(t *testing.T) {
	key := results.NewKey([]byte("k"))
	files := map[string][]byte{
		"s1.jsonl": shard(t, key, rec("b", 1, true), rec("a", 2, true)),
		"s2.jsonl": shard(t, key, rec("a", 1, false)),
	}
	s, err := ReadShards(ShardOptions{Files: sources(files, "s1.jsonl", "s2.jsonl"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Without prompts, k is the largest trial seen: case b lacks trial 2.
	if s.K != 2 || len(s.Gaps) != 1 || s.Gaps[0].ID != "b" || s.Gaps[0].Trial != 2 {
		t.Fatalf("k %d, gaps %+v; want 2 and b trial 2", s.K, s.Gaps)
	}
	var out bytes.Buffer
	w, _ := results.NewWriter("out.jsonl", &out)
	if err := s.WriteCaptures(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		rl, err := schemas.ParseResultLine([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rl.Capture.ID+string(rune('0'+rl.Capture.Trial)))
	}
	if strings.Join(got, " ") != "b1 a1 a2" {
		t.Errorf("order %v, want cases as first seen, trials in order: b1 a1 a2", got)
	}
}

func TestReadShardsRejects(t *testing.T) {
	key := results.NewKey([]byte("k"))
	cases := []schemas.PromptCase{{ID: "a", Input: schemas.SingleTurn("q")}}
	t.Run("beyond k and unknown case", func(t *testing.T) {
		files := map[string][]byte{"s.jsonl": shard(t, key, rec("a", 1, true), rec("a", 2, true), rec("zz", 1, true))}
		_, err := ReadShards(ShardOptions{Files: sources(files, "s.jsonl"), Cases: cases, PromptsName: "p.jsonl", K: 1, Key: key})
		var stray *StrayRecordsError
		if !errors.As(err, &stray) {
			t.Fatalf("err = %v, want a *StrayRecordsError", err)
		}
		if len(stray.Beyond) != 1 || !strings.Contains(stray.Beyond[0], `s.jsonl:2: case "a" trial 2`) {
			t.Errorf("beyond = %q", stray.Beyond)
		}
		if len(stray.NotInCases) != 1 || !strings.Contains(stray.NotInCases[0], `s.jsonl:3: case "zz" is not in p.jsonl`) {
			t.Errorf("not in cases = %q", stray.NotInCases)
		}
	})
	t.Run("unsigned lines", func(t *testing.T) {
		files := map[string][]byte{"s.jsonl": shard(t, nil, rec("a", 1, true))}
		_, err := ReadShards(ShardOptions{Files: sources(files, "s.jsonl"), Key: key})
		var bad *MergeInputError
		if !errors.As(err, &bad) || !bad.Foreign || !strings.Contains(err.Error(), "s.jsonl:1") {
			t.Fatalf("err = %v, want a foreign *MergeInputError naming s.jsonl:1", err)
		}
	})
	t.Run("a unit twice", func(t *testing.T) {
		files := map[string][]byte{
			"s1.jsonl": shard(t, key, rec("a", 1, true)),
			"s2.jsonl": shard(t, key, rec("a", 1, false)),
		}
		_, err := ReadShards(ShardOptions{Files: sources(files, "s1.jsonl", "s2.jsonl"), Key: key})
		var bad *MergeInputError
		if !errors.As(err, &bad) || bad.Foreign || !strings.Contains(err.Error(), "s2.jsonl") {
			t.Fatalf("err = %v, want a *MergeInputError naming s2.jsonl", err)
		}
	})
}
