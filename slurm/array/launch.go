package array

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"harness/results"
	"harness/schemas"
)

// Wait watches the tasks of job id to their end, resubmitting the failed
// ones (see Watch), then checks that the output was not replaced while
// they ran (see CheckOutput): after it, the shards are ready to merge.
func (r *Run) Wait(ctx context.Context, id string) error {
	if err := r.Watch(ctx, id); err != nil {
		return err
	}
	return r.CheckOutput()
}

// Written lists the shards the tasks wrote records to, in task order
// (a task with no units of its own writes an empty shard, or none).
func (r *Run) Written() []string {
	var files []string
	for _, f := range r.Shards() {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			files = append(files, f)
		}
	}
	return files
}

// ErrNotFile is the error of Binary for a named binary that is no file.
var ErrNotFile = errors.New("not a file")

// Binary is the harness binary the tasks run, as an absolute path: named,
// when not "" (an error wrapping ErrNotFile when it is no file), else the
// running one by argv0, the name it was started with (looked up in PATH
// when it has no slash), so that a link keeps its name; else the
// executable of the running process.
func Binary(named, argv0 string) (string, error) {
	if named != "" {
		abs, err := filepath.Abs(named)
		if err != nil {
			return "", err
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s: %w", named, ErrNotFile)
		}
		return abs, nil
	}
	if argv0 != "" {
		if p, err := lookPath(argv0); err == nil {
			return p, nil
		}
	}
	return os.Executable()
}

func lookPath(name string) (string, error) {
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", err
		}
		name = p
	}
	return filepath.Abs(name)
}

// CountErrored counts the records of a capture file that carry an error
// (a merged capture run's records with infrastructure errors); 0 when the
// file does not read.
func CountErrored(name string) int {
	in, err := results.Open(name, nil)
	if err != nil {
		return 0
	}
	defer in.Close()
	n := 0
	_, _ = schemas.ReadResults(name, in, func(l schemas.ResultLine) error {
		if l.Capture != nil && l.Capture.Error != nil {
			n++
		}
		return nil
	})
	return n
}
