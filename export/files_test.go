package export_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"harness/export"
	"harness/schemas"
)

// jsonl encodes records as a results file.
func jsonl(t *testing.T, recs ...schemas.CaptureRecord) *bytes.Reader {
	t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return bytes.NewReader(b.Bytes())
}

func record(id string, trial int) schemas.CaptureRecord {
	return schemas.CaptureRecord{ID: id, Trial: trial, Input: schemas.SingleTurn("q"), Output: "a", StopReason: "end_turn",
		Trajectory: []schemas.Step{{Type: schemas.StepMessage, StepID: "s1", Content: json.RawMessage(`"a"`)}}}
}

// Each record gets a file of its own: ids made safe for a file name, and
// ids that map to the same name told apart by a suffix.
func TestWriteDirNames(t *testing.T) {
	convert, ok := export.Converter("openai-messages", true)
	if !ok {
		t.Fatal("no openai-messages converter")
	}
	in := jsonl(t, record("a/b", 1), record("a:b", 1), record("c", 2), record("..", 0))
	files := map[string][]byte{}
	var order []string
	err := export.WriteDir(in, "r.jsonl", convert, func(file string, doc []byte) error {
		files[file] = doc
		order = append(order, file)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "a_b-t1.json a_b-t1-2.json c-t2.json _..-t1.json"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("files %s, want %s", got, want)
	}
	var doc struct {
		Metadata struct {
			ID string `json:"id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(files["a_b-t1-2.json"], &doc); err != nil || doc.Metadata.ID != "a:b" {
		t.Errorf("a_b-t1-2.json holds id %q (err %v), want a:b", doc.Metadata.ID, err)
	}
	if !bytes.HasSuffix(files["c-t2.json"], []byte("}\n")) || !bytes.Contains(files["c-t2.json"], []byte("\n  ")) {
		t.Errorf("c-t2.json is not pretty-printed JSON with a final newline:\n%s", files["c-t2.json"])
	}
}

func TestWriteDirEmpty(t *testing.T) {
	convert, _ := export.Converter("atif", false)
	err := export.WriteDir(bytes.NewReader(nil), "empty.jsonl", convert, func(string, []byte) error {
		t.Error("wrote a file for no record")
		return nil
	})
	var ie *schemas.InputError
	if !errors.As(err, &ie) || ie.File != "empty.jsonl" {
		t.Fatalf("err = %v, want an input error naming empty.jsonl", err)
	}
}

func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{"ok-1.x_y": "ok-1.x_y", "..": "_..", "": "_", "a b/c": "a_b_c", strings.Repeat("x", 90): strings.Repeat("x", 80)} {
		if got := export.FileSafe(in); got != want {
			t.Errorf("FileSafe(%q) = %q, want %q", in, got, want)
		}
	}
	if _, ok := export.Converter("yaml", false); ok {
		t.Error("an unknown format has a converter")
	}
}
