package evaluation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"harness/schemas"
)

// sharedWrites notices the units of a run without --workspace that wrote
// files in the working directory they all share, so that the run can warn
// once, at its end, that what one unit wrote the next one saw. A unit wrote
// there when its record holds an fs/write_text_file the harness performed
// inside the directory, or a completed edit, delete or move tool call on a
// path inside it that changed during the run (edited after the run
// started, or gone). Commands an agent ran through a shell are not
// inspected.
type sharedWrites struct {
	dir   string
	start time.Time
	mu    sync.Mutex
	units int
	first string // a path written, for the warning
}

// newSharedWrites watches records for writes in dir, the shared working
// directory of a run that started at start.
func newSharedWrites(dir string, start time.Time) *sharedWrites {
	// Filesystems with coarse timestamps round a write down to the second.
	return &sharedWrites{dir: filepath.Clean(dir), start: start.Truncate(time.Second)}
}

// see counts rec when it wrote in the shared directory.
func (s *sharedWrites) see(rec *schemas.CaptureRecord) {
	path, ok := s.written(rec)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.units++
	if s.first == "" {
		s.first, _ = filepath.Rel(s.dir, path)
	}
}

// seen returns how many units wrote in the shared directory, and one path
// written, relative to it.
func (s *sharedWrites) seen() (units int, path string) {
	if s == nil {
		return 0, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.units, s.first
}

// written returns a path inside the shared directory that rec wrote.
func (s *sharedWrites) written(rec *schemas.CaptureRecord) (string, bool) {
	for i := range rec.Trajectory {
		st := &rec.Trajectory[i]
		switch {
		case st.Type == schemas.StepFSWrite && st.Allowed != nil && *st.Allowed && st.Error == "":
			if p, ok := s.inside(st.Path); ok {
				return p, true
			}
		case st.Type == schemas.StepToolCall && st.Status == "completed":
			switch st.Kind {
			case "edit", "delete", "move":
			default:
				continue
			}
			for _, p := range toolCallPaths(st) {
				p, ok := s.inside(p)
				if !ok {
					continue
				}
				info, err := os.Lstat(p)
				if os.IsNotExist(err) && st.Kind != "edit" || err == nil && !info.ModTime().Before(s.start) {
					return p, true
				}
			}
		}
	}
	return "", false
}

// inside returns path, made absolute against the shared directory, when
// it lies within it.
func (s *sharedWrites) inside(path string) (string, bool) {
	if path == "" {
		return "", false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.dir, path)
	}
	path = filepath.Clean(path)
	rel, err := filepath.Rel(s.dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return path, true
}

// toolCallPaths are the paths a tool call names: its locations, and the
// path-like fields of its input.
func toolCallPaths(st *schemas.Step) []string {
	var paths []string
	var locs []struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(st.Locations, &locs) == nil {
		for _, l := range locs {
			paths = append(paths, l.Path)
		}
	}
	var in map[string]any
	if json.Unmarshal(st.Input, &in) == nil {
		for _, key := range []string{"path", "file_path", "filePath", "abs_path", "source", "destination"} {
			if p, ok := in[key].(string); ok {
				paths = append(paths, p)
			}
		}
	}
	return paths
}
