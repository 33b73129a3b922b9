package graders

import (
	"os"
	"path/filepath"
	"testing"

	"harness/schemas"
)

// Combined results keep how a grader ended: a grader of several that died
// of the stop makes the combination one that died of it too.
func TestCombineKeepsTheStopSignal(t *testing.T) {
	code := 1
	res := Combine([]schemas.GraderResult{
		{Grader: "a", Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "exit 1", ExitCode: &code}},
		{Grader: "b", Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: "grader was killed by terminated", Signal: "terminated"}},
	})
	if sig, ok := res.Error.DiedOfStop(); !ok || sig != "terminated" {
		t.Fatalf("combined error %+v does not carry the stop signal", res.Error)
	}
}

// A sandboxed grader may write only a directory harness made for a case:
// a regraded record naming another directory gets no writable bind.
func TestIsWorkspaceCopy(t *testing.T) {
	dir := t.TempDir()
	copyDir := filepath.Join(dir, "harness-ws-a-123")
	os.Mkdir(copyDir, 0o755)
	link := filepath.Join(dir, "harness-ws-link")
	os.Symlink(dir, link)
	for path, want := range map[string]bool{
		copyDir:                                  true,
		dir:                                      false, // any other directory (a home, the user's own)
		link:                                     false, // a link named like a copy
		filepath.Join(dir, "harness-ws-missing"): false,
		"":                                       false,
	} {
		if got := isWorkspaceCopy(path); got != want {
			t.Errorf("isWorkspaceCopy(%q) = %v, want %v", path, got, want)
		}
	}
}
