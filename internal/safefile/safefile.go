// Package safefile reads files an agent may have tampered with: only plain
// files, never through a final symlink, and never blocking on a FIFO or a
// device swapped in where a file was.
package safefile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read reads the plain file at path, of at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, err
}
