package results

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is a whole file being written: a report, a summary, a review sheet
// or a merged output. A regular file (or a new one) is written to a
// temporary file beside it and renamed into place by Commit, so a command
// that fails leaves the target as it was; what is not a regular file (a
// FIFO, /dev/stdout) is written through.
type File struct {
	io.Writer
	name string
	path string   // the target, symlinks resolved
	tmp  *os.File // nil when written through or to stdout
	thru *os.File // a non-regular target opened for writing
	// redact, when set, rewrites the whole content at Commit; the
	// content is held in buf until then.
	redact func([]byte) []byte
	out    io.Writer
	buf    *bytes.Buffer
}

// Redact makes the file pass its whole content through fn before it is
// written (secrets out). It must be called before the first write.
func (f *File) Redact(fn func([]byte) []byte) {
	f.redact, f.out, f.buf = fn, f.Writer, &bytes.Buffer{}
	f.Writer = f.buf
}

// CreateFile opens name for writing a whole file ("" or "-" is stdout).
// An existing non-empty regular file is refused unless force.
func CreateFile(name string, stdout io.Writer, force bool) (*File, error) {
	if name == "" || name == "-" {
		return &File{Writer: stdout, name: "stdout"}, nil
	}
	st, err := os.Stat(name)
	if err == nil && !st.Mode().IsRegular() {
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		return &File{Writer: f, name: name, thru: f}, nil
	}
	if err == nil && st.Size() > 0 && !force {
		return nil, &ExistsError{Path: name}
	}
	path := name
	if real, err := filepath.EvalSymlinks(name); err == nil {
		path = real
	}
	tmp, err := createTemp(path)
	if err != nil {
		return nil, err
	}
	if st != nil {
		tmp.Chmod(st.Mode().Perm())
	}
	return &File{Writer: tmp, name: name, path: path, tmp: tmp}, nil
}

// Name is the file's name as given ("stdout" for standard output).
func (f *File) Name() string { return f.name }

// Commit puts the file in place.
func (f *File) Commit() error {
	if f.redact != nil {
		if _, err := f.out.Write(f.redact(f.buf.Bytes())); err != nil {
			f.Abort()
			return fmt.Errorf("output %s: %w", f.name, err)
		}
	}
	switch {
	case f.thru != nil:
		if err := f.thru.Close(); err != nil {
			return fmt.Errorf("output %s: %w", f.name, err)
		}
	case f.tmp != nil:
		if err := errors.Join(f.tmp.Sync(), f.tmp.Close()); err != nil {
			os.Remove(f.tmp.Name())
			return fmt.Errorf("output %s: %w", f.name, err)
		}
		if err := os.Rename(f.tmp.Name(), f.path); err != nil {
			os.Remove(f.tmp.Name())
			return fmt.Errorf("output %s: %w", f.name, err)
		}
	}
	return nil
}

// Abort leaves the target as it was.
func (f *File) Abort() {
	switch {
	case f.thru != nil:
		f.thru.Close()
	case f.tmp != nil:
		f.tmp.Close()
		os.Remove(f.tmp.Name())
	}
}

// WriteFile writes a whole file with fn, committing it only when fn
// succeeds.
func WriteFile(name string, stdout io.Writer, force bool, fn func(io.Writer) error) error {
	f, err := CreateFile(name, stdout, force)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// ReplaceFile writes a whole file of a run that an agent may have reached
// (a summary, a report, a job script): fn writes a temporary file beside
// name, renamed over name when fn succeeds. Whatever stands at name is
// replaced, never followed or written through: a link, a FIFO or a file
// an agent planted there cannot make harness write anywhere else.
func ReplaceFile(name string, mode os.FileMode, fn func(io.Writer) error) error {
	tmp, err := createTemp(name)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := fn(tmp); err != nil {
		return fail(fmt.Errorf("output %s: %w", name, err))
	}
	if err := errors.Join(tmp.Chmod(mode), tmp.Sync()); err != nil {
		return fail(fmt.Errorf("output %s: %w", name, err))
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("output %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("output %s: %w", name, err)
	}
	return nil
}
