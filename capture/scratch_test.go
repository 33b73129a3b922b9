package capture

import (
	"context"
	"fmt"
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

// TestEveryUnitsAgentStartsInItsOwnCopy: in a sandbox with workspaces
// the agent started to check that the agent starts (in an empty scratch
// directory) serves no unit; every unit, the first too, gets an agent
// started in its own workspace copy, so what the agent writes in its
// working directory, as its own tools do, is in the copy whose changes
// the record lists. The same with units prepared ahead (the default, two)
// and without (warm start off). Nothing is left behind.
func TestEveryUnitsAgentStartsInItsOwnCopy(t *testing.T) {
	for _, warm := range []int{0, -1} {
		t.Run(fmt.Sprintf("warm=%d", warm), func(t *testing.T) {
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
			cfg.Warm = warm
			recs := run(t, cfg, cases("write-here", "write-here", "write-here", "write-here", "write-here", "write-here"))
			if len(sb.dirs) != 1+len(recs) {
				t.Errorf("%d agent processes started (in %q), want %d: the one that checked the start, then one a unit", len(sb.dirs), sb.dirs, 1+len(recs))
			}
			if scratch := sb.dirs[0]; !strings.HasPrefix(filepath.Base(scratch), "harness-scratch-") {
				t.Errorf("the agent that checked the start started in %s, not a scratch directory", scratch)
			}
			for i, r := range recs {
				if r.Error != nil || r.Workspace == nil || r.Session == nil {
					t.Fatalf("record %d: error %+v, workspace %+v, session %+v", i, r.Error, r.Workspace, r.Session)
				}
				// The units prepared ahead start their agents in either
				// order, each in its own copy.
				if n := countOf(sb.dirs[1:], r.Workspace.Path); n != 1 {
					t.Errorf("record %d: %d agents started in its copy %s (agents started in %q)", i, n, r.Workspace.Path, sb.dirs)
				}
				want := "turn-" + r.Session.ID + ".txt"
				var got []string
				for _, c := range r.Workspace.FileChanges {
					got = append(got, c.Status+" "+c.Path)
				}
				if !slices.Equal(got, []string{"added " + want}) {
					t.Errorf("record %d (%s): fileChanges %q, want [added %s]", i, r.ID, got, want)
				}
			}
			left, _ := os.ReadDir(copies)
			for _, e := range left {
				t.Errorf("left behind: %s", e.Name())
			}
		})
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
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
