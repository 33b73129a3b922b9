package safefile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("hello"), 0o644)
	if b, err := Read(file, 5); err != nil || string(b) != "hello" {
		t.Errorf("plain file: %q %v", b, err)
	}
	if _, err := Read(file, 4); err == nil {
		t.Error("a file over the limit was read")
	}
	os.Symlink(file, filepath.Join(dir, "link"))
	if _, err := Read(filepath.Join(dir, "link"), 10); err == nil {
		t.Error("read through a symlink")
	}
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	if _, err := Read(filepath.Join(dir, "fifo"), 10); err == nil {
		t.Error("a FIFO was read") // and the call returned: it did not block
	}
}
