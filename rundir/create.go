package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"harness/results"
	"harness/schemas"
)

// CasesName is the file of the cases run, in a run directory.
const CasesName = "cases.jsonl"

// ErrNotRunDir is the error of OpenToResume for a directory whose manifest
// does not read.
var ErrNotRunDir = errors.New("not a run directory")

// TimeFormat is the time in a run directory's name (UTC).
const TimeFormat = "20060102T150405Z"

// New makes a fresh run directory under runs (made when missing), named
// after the time now and name: RUNS/<time>-<name>, or with "-2", "-3"...
// added when that exists. name must be safe as a file name.
func New(runs, name string, now time.Time) (string, error) {
	if err := os.MkdirAll(runs, 0o777); err != nil {
		return "", err
	}
	base := filepath.Join(runs, now.UTC().Format(TimeFormat)+"-"+name)
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o777)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
		dir = base + "-" + strconv.Itoa(i)
	}
}

// Create makes dir, a run directory given by name, and its parents; dir
// must not exist (the error then wraps os.ErrExist).
func Create(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o777); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o777)
}

// OpenToResume reads the manifest of the run in dir, to continue it: an
// error wraps ErrNotRunDir when it does not read, and says so when it
// names no suite file.
func OpenToResume(dir string) (*Manifest, error) {
	m, err := Read(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRunDir, err)
	}
	if m.Suite.Path == "" {
		return nil, fmt.Errorf("%s: names no suite file", filepath.Join(dir, ManifestName))
	}
	return m, nil
}

// WriteCases writes the cases of a run to dir's cases file (CasesName),
// one JSON object a line, replacing it whole.
func WriteCases(dir string, cases []schemas.PromptCase) error {
	return results.ReplaceFile(filepath.Join(dir, CasesName), 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, c := range cases {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	})
}

// ChangedCases compares the cases a run in dir was started with (its
// cases file) with cases, by content hash, and returns the ids of those
// that changed, in cases' order. A case that is new, or a run directory
// with no cases file, is no change.
func ChangedCases(dir string, cases []schemas.PromptCase) ([]string, error) {
	name := filepath.Join(dir, CasesName)
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	old, err := schemas.ReadPrompts(name, f)
	if err != nil {
		return nil, err
	}
	was := map[string]string{}
	for _, c := range old {
		was[c.ID] = c.ContentHash()
	}
	var changed []string
	for _, c := range cases {
		if h, ok := was[c.ID]; ok && h != c.ContentHash() {
			changed = append(changed, c.ID)
		}
	}
	return changed, nil
}
