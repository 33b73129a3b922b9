package evaluation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"harness/schemas"
)

// TestSharedWritesToolCalls checks which tool calls count as writes in the
// shared working directory: completed edits of files changed during the
// run, deletes and moves of paths now gone; not edits that touched no file,
// failed calls, reads, or paths outside the directory.
func TestSharedWritesToolCalls(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	write := func(name string, mtime time.Time) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("edited.go", start.Add(time.Minute))
	write("old.go", start.Add(-time.Hour))
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "o.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	loc := func(p string) json.RawMessage {
		b, _ := json.Marshal([]map[string]string{{"path": p}})
		return b
	}
	cases := []struct {
		name string
		step schemas.Step
		want string
	}{
		{"edit of a changed file", schemas.Step{Kind: "edit", Status: "completed", Locations: loc(filepath.Join(dir, "edited.go"))}, "edited.go"},
		{"edit by relative input path", schemas.Step{Kind: "edit", Status: "completed", Input: json.RawMessage(`{"file_path":"edited.go"}`)}, "edited.go"},
		{"edit of a file that does not exist", schemas.Step{Kind: "edit", Status: "completed", Locations: loc(filepath.Join(dir, "main.go"))}, ""},
		{"edit of a file unchanged since before the run", schemas.Step{Kind: "edit", Status: "completed", Locations: loc(filepath.Join(dir, "old.go"))}, ""},
		{"failed edit", schemas.Step{Kind: "edit", Status: "failed", Locations: loc(filepath.Join(dir, "edited.go"))}, ""},
		{"read", schemas.Step{Kind: "read", Status: "completed", Locations: loc(filepath.Join(dir, "edited.go"))}, ""},
		{"delete of a path now gone", schemas.Step{Kind: "delete", Status: "completed", Locations: loc(filepath.Join(dir, "gone.go"))}, "gone.go"},
		{"edit outside the directory", schemas.Step{Kind: "edit", Status: "completed", Locations: loc(filepath.Join(outside, "o.go"))}, ""},
		{"edit escaping by ..", schemas.Step{Kind: "edit", Status: "completed", Input: json.RawMessage(`{"path":"../o.go"}`)}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSharedWrites(dir, start)
			st := tc.step
			st.Type = schemas.StepToolCall
			s.see(&schemas.CaptureRecord{Trajectory: []schemas.Step{st}})
			n, path := s.seen()
			if tc.want == "" && n != 0 {
				t.Fatalf("counted as a write (%s)", path)
			}
			if tc.want != "" && (n != 1 || path != tc.want) {
				t.Fatalf("seen() = %d, %q; want 1, %q", n, path, tc.want)
			}
		})
	}
}
