package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"harness/schemas"
)

var testKey = NewKey(bytes.Repeat([]byte{7}, 32))

func TestSignVerifyRoundTrip(t *testing.T) {
	line := []byte(`{"id":"a","trajectory":[],"format":2}`)
	signed, mac := testKey.Sign(line)
	if !json.Valid(signed) {
		t.Fatalf("signed line is not JSON: %s", signed)
	}
	var v map[string]any
	json.Unmarshal(signed, &v)
	if s, _ := v["integrity"].(string); !strings.HasPrefix(s, "hmac-sha256:") || len(s) != len("hmac-sha256:")+64 {
		t.Errorf("integrity = %q", s)
	}
	body, got, err := testKey.Verify("f", 1, signed)
	if err != nil || !bytes.Equal(body, line) || got != mac {
		t.Fatalf("Verify = %s, %v; want the line back", body, err)
	}
	// Signing a signed line replaces its field: never two.
	again, _ := testKey.Sign(signed)
	if !bytes.Equal(again, signed) {
		t.Errorf("re-signed line differs:\n%s\n%s", again, signed)
	}
}

func TestVerifyRefusesForeignLines(t *testing.T) {
	signed, _ := testKey.Sign([]byte(`{"id":"a","pass":false}`))
	other, _ := NewKey([]byte("another key of sixteen+ bytes")).Sign([]byte(`{"id":"a","pass":false}`))
	for name, line := range map[string][]byte{
		"unsigned":   []byte(`{"id":"a","pass":true}`),
		"changed":    bytes.Replace(signed, []byte("false"), []byte("true "), 1),
		"other key":  other,
		"bad digits": bytes.Replace(signed, []byte("hmac-sha256:"), []byte("hmac-sha256:z"), 1),
	} {
		_, _, err := testKey.Verify("out.jsonl", 3, line)
		var fe *ForeignLineError
		if !errors.As(err, &fe) || fe.File != "out.jsonl" || fe.Line != 3 || !strings.HasPrefix(err.Error(), "out.jsonl:3: not written by harness") {
			t.Errorf("%s: Verify error = %v, want a ForeignLineError at out.jsonl:3", name, err)
		}
	}
}

func TestLoadKeyCreatesPrivateFileOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "harness", "record.key")
	var wg sync.WaitGroup
	keys := make([]*Key, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = LoadKey(path) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(keys[i].secret, keys[0].secret) {
			t.Fatal("processes creating the key at once got different keys")
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v, want 0700", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("key directory holds %d files, want only record.key", len(entries))
	}
	os.WriteFile(path, []byte("nonsense\n"), 0o600)
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a bad key file: err = %v, want one naming it", err)
	}
}

func TestKeyPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{KeyFileEnv: "/k", "XDG_STATE_HOME": "/s", "HOME": "/h"}, "/k"},
		{map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/harness/record.key"},
		{map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/h"}, "/h/.local/state/harness/record.key"},
	} {
		if got, err := KeyPath(env(c.env)); err != nil || got != c.want {
			t.Errorf("KeyPath(%v) = %q, %v; want %q", c.env, got, err, c.want)
		}
	}
}

// writeSigned writes records to a new signed output and closes it.
func writeSigned(t *testing.T, name string, ids ...string) *Output {
	t.Helper()
	out, err := OpenOutput(name, OutputOptions{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := out.Write(map[string]any{"id": id, "trajectory": []any{}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// appendRaw appends text to a file as an outsider would.
func appendRaw(t *testing.T, name, text string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(text)
	f.Close()
}

func TestCheckWrittenFindsForeignLines(t *testing.T) {
	for _, name := range []string{"out.jsonl", "out.jsonl.zst", "out.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			out := writeSigned(t, path, "a", "b")
			if err := out.CheckWritten(); err != nil {
				t.Fatalf("an untouched output: %v", err)
			}
			if strings.HasSuffix(name, ".jsonl") {
				// Forged, then replayed: a copy of line 1 is a line
				// harness did not write here either.
				first, _, _ := strings.Cut(readAll(t, path), "\n")
				appendRaw(t, path, `{"id":"forged","trajectory":[],"score":{"pass":true,"score":1}}`+"\n"+first+"\n")
				err := out.CheckWritten()
				var fe *ForeignLinesError
				if !errors.As(err, &fe) || fe.N != 2 || fe.Lines[0].Line != 3 || fe.Lines[1].Line != 4 {
					t.Fatalf("CheckWritten = %v, want lines 3 and 4 reported", err)
				}
				if !strings.Contains(err.Error(), path+":3: not written by harness") {
					t.Errorf("message does not name file:line: %v", err)
				}
				return
			}
			// A compressed output rewritten with one line dropped and a
			// forged one in its place.
			kept, _, _ := strings.Cut(readAll(t, path), "\n")
			os.Remove(path)
			w, _ := os.Create(path)
			jw, _ := NewWriter(name, w)
			jw.WriteRaw([]byte(kept))
			jw.WriteRaw([]byte(`{"id":"forged","trajectory":[]}`))
			jw.Close()
			w.Close()
			err := out.CheckWritten()
			var fe *ForeignLinesError
			if !errors.As(err, &fe) || fe.N != 1 || fe.Lines[0].Line != 2 || fe.Missing != 1 {
				t.Fatalf("CheckWritten = %v, want line 2 foreign and one line missing", err)
			}
		})
	}
}

func TestResumeRefusesForeignLineAndDropsTornOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	writeSigned(t, path, "a", "b")
	good := readAll(t, path)
	// A line torn by a crash at the end is dropped, as before.
	appendRaw(t, path, `{"id":"c","traj`)
	out, err := OpenOutput(path, OutputOptions{Mode: Append, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	done, _, err := out.ResumeCapture(false)
	if err != nil || len(done) != 2 {
		t.Fatalf("ResumeCapture = %v, %v; want units a and b", done, err)
	}
	out.Write(map[string]any{"id": "c", "trajectory": []any{}})
	out.Close()
	if err := out.CheckWritten(); err != nil {
		t.Fatalf("kept and new lines: %v", err)
	}
	// A forged line in the middle stops the resume, naming it, and the
	// file stays as it was.
	os.WriteFile(path, []byte(strings.Replace(good, "\n", "\n"+`{"id":"x","trajectory":[]}`+"\n", 1)), 0o644)
	before := readAll(t, path)
	out, err = OpenOutput(path, OutputOptions{Mode: Append, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	_, _, err = out.ResumeCapture(false)
	var fe *ForeignLineError
	if !errors.As(err, &fe) || fe.Line != 2 || fe.File != path {
		t.Fatalf("ResumeCapture = %v, want a foreign line at %s:2", err, path)
	}
	if readAll(t, path) != before {
		t.Error("the refused resume changed the file")
	}
}

func TestMergerRefusesForeignLines(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "s1.jsonl")
	writeSigned(t, shard, "a")
	appendRaw(t, shard, `{"id":"b","trajectory":[]}`+"\n")
	m, err := NewMerger([]string{shard})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Key = testKey
	r, _ := Open(shard, nil)
	n, err := m.Read(0, r)
	r.Close()
	if err != nil || n != 1 {
		t.Fatalf("Read = %d, %v; want the one signed record", n, err)
	}
	if m.Foreign.N != 1 || !strings.HasPrefix(m.Foreign.List[0], shard+":2: not written by harness") {
		t.Errorf("Foreign = %+v, want line 2", m.Foreign)
	}
	// The merged output is signed afresh, each line once.
	var buf bytes.Buffer
	w, _ := NewWriter("", &buf)
	w.Sign(testKey)
	if err := m.WriteCaptures(w, m.Order(), 1); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line := bytes.TrimSpace(buf.Bytes())
	if _, _, err := testKey.Verify("merged", 1, line); err != nil || bytes.Count(line, []byte(`"integrity"`)) != 1 {
		t.Errorf("merged line %s: %v", line, err)
	}
}

func TestReadResultsRefusesMixedSigning(t *testing.T) {
	signed, _ := testKey.Sign([]byte(`{"id":"a","trajectory":[]}`))
	plain := `{"id":"b","trajectory":[]}`
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{plain + "\n" + plain + "\n", true},
		{string(signed) + "\n" + string(signed) + "\n", true},
		{string(signed) + "\n" + plain + "\n", false},
		{plain + "\n" + string(signed) + "\n", false},
	} {
		_, err := schemas.ReadResults("r.jsonl", strings.NewReader(c.text), func(schemas.ResultLine) error { return nil })
		var ie *schemas.InputError
		switch {
		case c.ok && err != nil:
			t.Errorf("%q: %v", c.text, err)
		case !c.ok && (!errors.As(err, &ie) || ie.Line != 2 || ie.Field != "integrity"):
			t.Errorf("%q: err = %v, want line 2, field integrity", c.text, err)
		}
	}
}

func TestResumeRefusesForeignLineCompressed(t *testing.T) {
	for _, name := range []string{"out.jsonl.zst", "out.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			writeSigned(t, path, "a", "b")
			lines := strings.Split(strings.TrimSpace(readAll(t, path)), "\n")
			w, _ := os.Create(path)
			jw, _ := NewWriter(name, w)
			jw.WriteRaw([]byte(lines[0]))
			jw.WriteRaw([]byte(`{"id":"x","trajectory":[]}`))
			jw.WriteRaw([]byte(lines[1]))
			jw.Close()
			w.Close()
			out, err := OpenOutput(path, OutputOptions{Mode: Append, Key: testKey})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			_, _, err = out.ResumeCapture(false)
			var fe *ForeignLineError
			if !errors.As(err, &fe) || fe.Line != 2 {
				t.Fatalf("ResumeCapture = %v, want a foreign line at line 2", err)
			}
		})
	}
}

// BenchmarkCheckWritten reads back a signed output of 2000 records of
// about 8 KiB: what the end-of-run check adds to a run.
func BenchmarkCheckWritten(b *testing.B) {
	path := filepath.Join(b.TempDir(), "out.jsonl")
	out, err := OpenOutput(path, OutputOptions{Key: testKey})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("agent output ", 630)
	for i := range 2000 {
		out.Write(map[string]any{"id": strings.Repeat("x", i%7+1), "trial": i, "trajectory": []any{}, "output": text})
	}
	out.Close()
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	for b.Loop() {
		if err := out.CheckWritten(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign signs one 8 KiB record line.
func BenchmarkSign(b *testing.B) {
	line, _ := Marshal(map[string]any{"id": "a", "trajectory": []any{}, "output": strings.Repeat("agent output ", 630)})
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		testKey.Sign(line)
	}
}
