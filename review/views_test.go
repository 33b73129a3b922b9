package review

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"harness/schemas"
)

const captureFixture = "../testdata/results/capture_a.jsonl"

func viewOf(t *testing.T, v View) string {
	t.Helper()
	in, err := os.Open(captureFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	if err := WriteView(&out, in, "capture_a.jsonl", ViewOptions{View: v, Seed: 1, Resamples: 50}); err != nil {
		t.Fatalf("view %d: %v", v, err)
	}
	return out.String()
}

func TestWriteViews(t *testing.T) {
	b, _ := os.ReadFile(captureFixture)
	records := bytes.Count(bytes.TrimSpace(b), []byte("\n")) + 1

	compact := strings.Split(strings.TrimSpace(viewOf(t, ViewCompact)), "\n")
	if len(compact) != records {
		t.Errorf("compact view: %d lines, want one per record (%d)", len(compact), records)
	}
	var first struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(compact[0]), &first); err != nil || first.ID == "" {
		t.Errorf("compact line %q: err %v, want an id", compact[0], err)
	}

	rows, err := csv.NewReader(strings.NewReader(viewOf(t, ViewCSV))).ReadAll()
	if err != nil || len(rows) != records+1 || rows[0][0] != "id" || rows[1][0] != first.ID {
		t.Errorf("CSV: %d rows (err %v), want a header and %d rows, the first for %s", len(rows), err, records, first.ID)
	}

	var sum schemas.TrialsSummary
	if err := json.Unmarshal([]byte(viewOf(t, ViewAggregateJSON)), &sum); err != nil || sum.Type != schemas.SummaryType {
		t.Errorf("aggregate JSON: err %v, type %q; want a trials summary", err, sum.Type)
	}
	if md := viewOf(t, ViewMarkdown); !strings.Contains(md, first.ID) {
		t.Errorf("markdown does not name %s", first.ID)
	}
}

func TestWriteViewEmpty(t *testing.T) {
	for _, v := range []View{ViewCompact, ViewCSV, ViewMarkdown} {
		err := WriteView(&bytes.Buffer{}, strings.NewReader(""), "empty.jsonl", ViewOptions{View: v})
		var ie *schemas.InputError
		if !errors.As(err, &ie) || ie.File != "empty.jsonl" {
			t.Errorf("view %d of an empty file: err %v, want an input error naming it", v, err)
		}
	}
}
