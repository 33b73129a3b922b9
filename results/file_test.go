package results

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A run file that an agent replaced with a link or a FIFO before harness
// wrote it is replaced, never written through: the link's target keeps
// its bytes.
func TestReplaceFileNeverFollows(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "summary.json")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "report.md")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{link, fifo, filepath.Join(dir, "new.json")} {
		err := ReplaceFile(name, 0o640, func(w io.Writer) error {
			_, err := io.WriteString(w, "harness\n")
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st, err := os.Lstat(name)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o640 {
			t.Fatalf("%s: %v %v: want a regular file, mode 640", name, st.Mode(), err)
		}
		if b, _ := os.ReadFile(name); string(b) != "harness\n" {
			t.Errorf("%s holds %q", name, b)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	// A failed write leaves nothing behind.
	err := ReplaceFile(filepath.Join(dir, "x"), 0o644, func(io.Writer) error { return io.ErrUnexpectedEOF })
	if err == nil {
		t.Fatal("a failed write reported success")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Errorf("%d entries left, want 4 (no temporary file)", len(ents))
	}
}

// A file that cannot be made (its directory is missing) is named in the
// error as it was asked for, never by the temporary file beside it.
func TestReplaceFileNamesTheFileAsked(t *testing.T) {
	name := filepath.Join(t.TempDir(), "missing", "r.html")
	for _, create := range []func() error{
		func() error { return ReplaceFile(name, 0o644, func(io.Writer) error { return nil }) },
		func() error { _, err := CreateFile(name, nil, true); return err },
		func() error { _, err := OpenOutput(name, OutputOptions{}); return err },
	} {
		err := create()
		if err == nil || !strings.HasSuffix(err.Error(), " "+name+": no such file or directory") || strings.Contains(err.Error(), ".tmp-") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error %v, want one naming %s", err, name)
		}
	}
}
