package results

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func readAll(t *testing.T, name string) string {
	t.Helper()
	r, err := Open(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOutputModeFollowsUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, name := range []string{"a.jsonl", "b.jsonl.zst"} {
		out, err := OpenOutput(filepath.Join(dir, name), OutputOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Write(map[string]int{"x": 1}); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(dir, name))
		if got := st.Mode().Perm(); got != 0o640 {
			t.Errorf("%s: mode %v, want 0640 (0666 less umask 027)", name, got)
		}
	}
	if err := WriteFile(filepath.Join(dir, "c.json"), nil, false, func(w io.Writer) error { _, err := io.WriteString(w, "{}\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "c.json")); st.Mode().Perm() != 0o640 {
		t.Errorf("WriteFile: mode %v, want 0640", st.Mode().Perm())
	}
}

func TestOutputRefusesExistingAndForceTruncatesThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.jsonl")
	link := filepath.Join(dir, "link.jsonl")
	os.WriteFile(target, []byte("{\"old\":1}\n"), 0o644)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := OpenOutput(link, OutputOptions{Resumable: true})
	var ee *ExistsError
	if !errors.As(err, &ee) || !ee.Resumable || ee.Path != link {
		t.Fatalf("existing output: err = %v, want a resumable ExistsError", err)
	}
	out, err := OpenOutput(link, OutputOptions{Mode: Truncate})
	if err != nil {
		t.Fatal(err)
	}
	out.Write(map[string]int{"new": 2})
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v %v", st.Mode(), err)
	}
	if got := readAll(t, target); got != "{\"new\":2}\n" {
		t.Errorf("target holds %q", got)
	}
}

func TestOutputWritesThroughFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- string(b)
	}()
	out, err := OpenOutput(fifo, OutputOptions{Mode: Truncate})
	if err != nil {
		t.Fatal(err)
	}
	if out.IsFile() {
		t.Error("a FIFO is not a file to resume")
	}
	out.Write(map[string]int{"a": 1})
	out.Close()
	if s := <-got; s != "{\"a\":1}\n" {
		t.Errorf("read %q from the FIFO", s)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v", err)
	}
	if _, err := OpenOutput(fifo, OutputOptions{Mode: Append}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("--resume on a FIFO: err = %v", err)
	}
}

func TestOutputLockAndResumeKeepsIt(t *testing.T) {
	name := filepath.Join(t.TempDir(), "out.jsonl")
	os.WriteFile(name, []byte("{\"id\":\"a\",\"trial\":1}\n{\"id\":\"a\",\"trial\":1}\n{\"id\":\"b\",\"trial\":1,\"error\":{\"class\":\"interrupted\"}}\n{\"id\":\"c\""), 0o644)
	out, err := OpenOutput(name, OutputOptions{Mode: Append})
	if err != nil {
		t.Fatal(err)
	}
	var le *LockedError
	if _, err := OpenOutput(name, OutputOptions{Mode: Append}); !errors.As(err, &le) || !strings.Contains(err.Error(), name) {
		t.Fatalf("second open: err = %v, want LockedError naming the file", err)
	}
	done, _, err := out.ResumeCapture(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !done[UnitKey{"a", 1}] {
		t.Errorf("done = %v, want only a/1", done)
	}
	// The file was replaced; the lock moved with it.
	if _, err := OpenOutput(name, OutputOptions{Mode: Append}); !errors.As(err, &le) {
		t.Fatalf("after resume: err = %v, want LockedError", err)
	}
	out.Write(map[string]any{"id": "b", "trial": 1})
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, name); got != "{\"id\":\"a\",\"trial\":1}\n{\"id\":\"b\",\"trial\":1}\n" {
		t.Errorf("after resume the file holds %q", got)
	}
	out, err = OpenOutput(name, OutputOptions{Mode: Append})
	if err != nil {
		t.Fatalf("after close the lock is free: %v", err)
	}
	out.Close()
}

func TestOutputErrorSticks(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	out, err := OpenOutput("/dev/full", OutputOptions{Mode: Truncate})
	if err != nil {
		t.Fatal(err)
	}
	err1 := out.Write(map[string]int{"a": 1})
	err2 := out.Write(map[string]int{"b": 2})
	if !errors.Is(err1, syscall.ENOSPC) || !errors.Is(err2, syscall.ENOSPC) || out.Written() != 0 {
		t.Errorf("writes to a full device: %v, %v, written %d", err1, err2, out.Written())
	}
	out.Close()
}

func TestDiscardRemovesOnlyWhatItCreated(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "new.jsonl")
	out, err := OpenOutput(name, OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out.Discard()
	if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a discarded new output is left: %v", err)
	}
	old := filepath.Join(dir, "old.jsonl")
	os.WriteFile(old, nil, 0o644)
	out, _ = OpenOutput(old, OutputOptions{})
	out.Discard()
	if _, err := os.Stat(old); err != nil {
		t.Errorf("a file that was there before is removed: %v", err)
	}
}

func TestOpenSniffsCompression(t *testing.T) {
	dir := t.TempDir()
	for _, suffix := range []string{".zst", ".gz", ""} {
		name := filepath.Join(dir, "r.jsonl"+suffix)
		out, err := OpenOutput(name, OutputOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out.Write(map[string]string{"id": "x"})
		out.Close()
		renamed := filepath.Join(dir, "renamed"+strings.TrimPrefix(suffix, "."))
		os.Rename(name, renamed)
		if got := readAll(t, renamed); got != "{\"id\":\"x\"}\n" {
			t.Errorf("%s read as %q", suffix, got)
		}
	}
}

func TestCreateFileLeavesTargetOnAbort(t *testing.T) {
	name := filepath.Join(t.TempDir(), "report.html")
	os.WriteFile(name, []byte("old"), 0o644)
	if _, err := CreateFile(name, nil, false); err == nil {
		t.Fatal("existing file overwritten without force")
	}
	err := WriteFile(name, nil, true, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("want the write error")
	}
	if b, _ := os.ReadFile(name); string(b) != "old" {
		t.Errorf("target changed to %q", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(name))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	var buf bytes.Buffer
	if err := WriteFile("-", &buf, false, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil || buf.String() != "x" {
		t.Errorf("stdout: %q %v", buf.String(), err)
	}
}

// TestResumeCaptureReturnsUngraded: a record whose agent's turn was
// complete and whose grading a stop cut short is taken out of the output
// and returned, to be graded; a plain interrupted one is only taken out,
// to run again.
func TestResumeCaptureReturnsUngraded(t *testing.T) {
	name := filepath.Join(t.TempDir(), "out.jsonl")
	os.WriteFile(name, []byte(`{"id":"a","trial":1,"trajectory":[]}
{"id":"b","trial":1,"trajectory":[],"output":"done","error":{"class":"interrupted","message":"interrupted: grading was stopped","pending":"grading"}}
{"id":"c","trial":1,"trajectory":[],"error":{"class":"interrupted","message":"interrupted during turn 1"}}
`), 0o644)
	out, err := OpenOutput(name, OutputOptions{Mode: Append})
	if err != nil {
		t.Fatal(err)
	}
	done, ungraded, err := out.ResumeCapture(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || !done[UnitKey{"a", 1}] {
		t.Errorf("done = %v, want only a/1", done)
	}
	if rec := ungraded[UnitKey{"b", 1}]; len(ungraded) != 1 || rec == nil || rec.Output != "done" || !rec.Ungraded() {
		t.Errorf("ungraded = %v, want b/1 with its output", ungraded)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, name); got != "{\"id\":\"a\",\"trial\":1,\"trajectory\":[]}\n" {
		t.Errorf("after resume the file holds %q", got)
	}
}
