package capture

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/sandbox"
	"harness/schemas"
)

// countingSandbox runs commands as they are and counts them; third, when
// set, is closed at the third.
type countingSandbox struct {
	mu    sync.Mutex
	dirs  []string
	third chan struct{}
}

func (c *countingSandbox) Wrap(cmd sandbox.Command) (sandbox.Wrapped, error) {
	c.mu.Lock()
	c.dirs = append(c.dirs, cmd.Dir)
	if len(c.dirs) == 3 && c.third != nil {
		close(c.third)
	}
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
		// The units after the first are prepared side by side (two ahead
		// in a sandbox with workspaces): their agents start in either
		// order, each in its own copy.
		if i > 0 && !slices.Contains(sb.dirs[1:], r.Workspace.Path) {
			t.Errorf("record %d: no agent started in its copy %s (agents started in %q)", i, r.Workspace.Path, sb.dirs)
		}
	}
	left, _ := os.ReadDir(copies)
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestSandboxWithWorkspacesPreparesTwoAhead: in a sandbox with workspaces
// every unit starts an agent of its own, which takes longer than a short
// turn, so by default a worker prepares the next two units while one
// runs: the third agent starts while the first unit's turn is still
// running. Anywhere else the default stays one unit ahead.
func TestSandboxWithWorkspacesPreparesTwoAhead(t *testing.T) {
	tmpl := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmpl, "f.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	sb := &countingSandbox{third: make(chan struct{})}
	cfg.Sandbox = sb
	cfg.Workspace = tmpl
	cfg.WorkspaceTmp = t.TempDir()
	cfg.TurnTimeout = 2 * time.Minute
	r := NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// A bound on a test gone wrong: one unit ahead, the third agent
		// would start only once the first turn (a minute) has ended.
		select {
		case <-sb.third:
		case <-time.After(30 * time.Second):
			t.Error("the third agent did not start while the first unit ran")
		}
		cancel()
	}()
	if _, err := r.Run(ctx, slices.Values(cases("sleep 60000", "echo two", "echo three", "echo four")), func(*schemas.CaptureRecord) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want int
	}{
		{Config{Sandbox: sb, Workspace: tmpl}, 2},
		{Config{Sandbox: sb, AnyCaseWorkspace: true}, 2},
		{Config{Sandbox: sb, Workspace: tmpl, Warm: 1}, 1},
		{Config{Sandbox: sb, Workspace: tmpl, Warm: -1}, 0},
		{Config{Workspace: tmpl}, 1},
		{Config{Sandbox: sb}, 1},
		{Config{Sandbox: sb, Workspace: tmpl, Image: &ImageConfig{}}, 1},
	} {
		c.cfg.defaults()
		if got := c.cfg.warmDepth(); got != c.want {
			t.Errorf("sandbox %v, workspace %q, any case workspace %v, image %v, warm %d: %d ahead, want %d",
				c.cfg.Sandbox != nil, c.cfg.Workspace, c.cfg.AnyCaseWorkspace, c.cfg.Image != nil, c.cfg.Warm, got, c.want)
		}
	}
}
