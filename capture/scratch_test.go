package capture

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"harness/sandbox"
)

// countingSandbox runs commands as they are and counts them.
type countingSandbox struct {
	mu   sync.Mutex
	dirs []string
}

func (c *countingSandbox) Wrap(cmd sandbox.Command) (sandbox.Wrapped, error) {
	c.mu.Lock()
	c.dirs = append(c.dirs, cmd.Dir)
	c.mu.Unlock()
	return sandbox.None{}.Wrap(cmd)
}

func (c *countingSandbox) Info() sandbox.Info { return sandbox.Info{Backend: "test"} }

// TestFirstUnitRunsOnTheAgentThatCheckedTheStart: in a sandbox with
// workspaces, the agent started to check that the agent starts (in an
// empty scratch directory, the only one it may write) serves the first
// unit, whose copy is made in that directory, instead of being thrown
// away: three units start three agent processes, not four. The other
// units get agents of their own in their copies, and nothing is left.
func TestFirstUnitRunsOnTheAgentThatCheckedTheStart(t *testing.T) {
	tmpl := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmpl, "f.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copies := t.TempDir()
	cfg := testConfig(t)
	sb := &countingSandbox{}
	cfg.Sandbox = sb
	cfg.Workspace = tmpl
	cfg.WorkspaceTmp = copies
	recs := run(t, cfg, cases("echo one", "echo two", "echo three"))
	if len(sb.dirs) != 3 {
		t.Errorf("%d agent processes started (in %q), want 3", len(sb.dirs), sb.dirs)
	}
	scratch := sb.dirs[0]
	if !strings.HasPrefix(filepath.Base(scratch), "harness-scratch-") {
		t.Fatalf("the first agent started in %s, not a scratch directory", scratch)
	}
	for i, r := range recs {
		if r.Error != nil || r.Workspace == nil {
			t.Fatalf("record %d: error %+v, workspace %+v", i, r.Error, r.Workspace)
		}
		inScratch := filepath.Dir(r.Workspace.Path) == scratch
		if inScratch != (i == 0) {
			t.Errorf("record %d: workspace %s (scratch %s)", i, r.Workspace.Path, scratch)
		}
		if i > 0 && sb.dirs[i] != r.Workspace.Path {
			t.Errorf("record %d: its agent started in %s, not in its copy %s", i, sb.dirs[i], r.Workspace.Path)
		}
	}
	left, _ := os.ReadDir(copies)
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}
