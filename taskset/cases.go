package taskset

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"harness/image"
)

// ErrTimeoutScale is the error for a timeout scale that is not positive.
var ErrTimeoutScale = errors.New("the timeout scale must be positive")

// WriteCases writes one prompt case per task, as a JSON line: its id the
// task's name, its input instruction.md (a multi-step task's: each
// step's instruction, one turn each), its timeout the task's agent
// timeout multiplied by scale, its metadata the task's and the task
// directory ("task"), and its simulated user, when it has one. A scale that is not positive is ErrTimeoutScale.
func (s *Set) WriteCases(w io.Writer, scale float64) error {
	if scale <= 0 {
		return ErrTimeoutScale
	}
	enc := json.NewEncoder(w)
	for _, t := range s.Tasks {
		meta := map[string]any{"task": t.Dir}
		for k, v := range t.Config.Metadata {
			meta[k] = v
		}
		timeout := time.Duration(float64(t.Config.AgentTimeout) * scale)
		var input any = t.Instruction
		if t.MultiStep() {
			// One turn per step, in one session.
			input = t.Prompts()
		}
		c := map[string]any{"id": t.Name, "input": input, "timeout": timeout.String(), "metadata": meta}
		if t.Config.SimulatedUser != nil {
			c["user"] = t.Config.SimulatedUser
		}
		if err := enc.Encode(c); err != nil {
			return fmt.Errorf("the case of task %s: %w", t.Name, err)
		}
	}
	return nil
}

// WriteSuite writes the suite that stands for the set in "harness run":
// its cases are the tasks (their agent timeouts multiplied by scale), run
// as the tasks of the set's directory. The suite and its prompts file go
// into the image cache (cacheDir, "" = image.DefaultCacheDir), under
// task-suites/, named by the directory (so the same directory always has
// the same suite). It returns the suite file's path.
func (s *Set) WriteSuite(cacheDir string, scale float64) (string, error) {
	abs, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", err
	}
	if cacheDir == "" {
		if cacheDir, err = image.DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	// The suite names its prompts file by path, read from the suite's
	// directory: a relative cache directory would be counted twice.
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	base := filepath.Join(cacheDir, "task-suites", fmt.Sprintf("%s-%x", filepath.Base(abs), sum[:6]))
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return "", err
	}
	var cases bytes.Buffer
	if err := s.WriteCases(&cases, scale); err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".jsonl", cases.Bytes(), 0o644); err != nil {
		return "", err
	}
	name, _ := json.Marshal(filepath.Base(abs))
	prompts, _ := json.Marshal(base + ".jsonl")
	tasksDir, _ := json.Marshal(abs)
	doc := fmt.Sprintf("# The tasks of %s, for harness run.\nname: %s\nprompts: %s\ntasks: %s\n", abs, name, prompts, tasksDir)
	if err := os.WriteFile(base+".yaml", []byte(doc), 0o644); err != nil {
		return "", err
	}
	return base + ".yaml", nil
}
