package results

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoundTripAndAppend writes records in two sessions (as --resume does)
// to plain, gzip and zstd files and reads every record back.
func TestRoundTripAndAppend(t *testing.T) {
	for _, name := range []string{"out.jsonl", "out.jsonl.gz", "out.jsonl.zst"} {
		path := filepath.Join(t.TempDir(), name)
		for run := 0; run < 2; run++ {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			w, err := NewWriter(name, f)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if err := w.Write(map[string]any{"run": run, "i": i, "text": "a<b & c>d"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		r, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 6 || !strings.Contains(lines[5], `"run":1`) || !strings.Contains(lines[0], `a<b & c>d`) {
			t.Errorf("%s: read back %q", name, lines)
		}
	}
}

// TestFlushedPerRecord: a record is on disk as soon as Write returns, even
// compressed and before Close, so a crash loses nothing finished.
func TestFlushedPerRecord(t *testing.T) {
	for _, name := range []string{"x.jsonl", "x.jsonl.gz", "x.jsonl.zst"} {
		var buf bytes.Buffer
		w, _ := NewWriter(name, &buf)
		w.Write(map[string]int{"a": 1})
		r, err := Decompress(name, io.NopCloser(bytes.NewReader(buf.Bytes())))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		if string(got) != "{\"a\":1}\n" {
			t.Errorf("%s: after one Write the stream holds %q", name, got)
		}
	}
}
