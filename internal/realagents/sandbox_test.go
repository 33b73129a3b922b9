package realagents

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	hsandbox "harness/sandbox"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// TestSandboxedAgents runs Claude Code, Gemini CLI and Codex under
// --sandbox bwrap and has each, through its own shell tool, write a file
// in its workspace, in $HOME, under /tmp and outside by absolute path, and
// start a setsid'd sleep. After the run only the workspace file exists
// (as a change on the record) and no process is left.
func TestSandboxedAgents(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			t.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		t.Skip("bwrap not installed")
	}
	for i, tc := range []struct {
		name  string
		setup func(*testing.T, fakemodel.Options) (*sandbox, *fakemodel.Server, []string)
		auth  string
	}{
		{"claude", claudeSetup, ""},
		{"gemini", geminiSetup, "gemini-api-key"},
		{"codex", codexSetup, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, srv, agent := tc.setup(t, fakemodel.Options{})
			cfg, _ := baseConfig(t, sb, agent)
			cfg.Auth = tc.auth
			var keep []string
			for _, kv := range sb.Env {
				k, _, _ := strings.Cut(kv, "=")
				keep = append(keep, k)
			}
			// The defaults of --sandbox bwrap: the network allowlist of
			// the agent's model endpoints, and the resource caps.
			caps := limits.DefaultCaps()
			bw, err := hsandbox.NewBwrap(hsandbox.Options{HomeTemplate: sb.Home, RW: []string{sb.Home, sb.Tmp}, KeepEnv: keep,
				Allow: egress.DefaultRules(sb.Env, agent), Caps: &caps})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Sandbox = bw
			tmpl := t.TempDir()
			os.WriteFile(filepath.Join(tmpl, "README"), []byte("template\n"), 0o644)
			cfg.Workspace = tmpl
			// Outside: a host directory the sandbox sees (read-only), not
			// one under the host's /tmp, which it does not see at all.
			outside, err := os.MkdirTemp(".", "sandbox-outside-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(outside) })
			if outside, err = filepath.Abs(outside); err != nil {
				t.Fatal(err)
			}
			marker := fmt.Sprintf("30%d.125", 7+i)
			tmpName := "harness-sandbox-probe-" + tc.name
			cmd := fmt.Sprintf("echo w > w.txt; echo h > $HOME/h.txt; echo t > /tmp/%s; echo o > %s/o.txt; (setsid sleep %s > /dev/null 2>&1 &); echo sandbox-done",
				tmpName, outside, marker)
			recs := runCases(t, cfg, "bash "+cmd)
			rec := recs[0]
			if rec.Error != nil {
				t.Fatalf("error %+v\n%s", rec.Error, dump(rec))
			}
			if p := rec.Provenance.Sandbox; p == nil || p.Backend != "bwrap" || p.Network != "allow" {
				t.Errorf("provenance.sandbox = %+v", p)
			}
			// The model traffic went through the proxy, allowed, and is
			// on the record.
			_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
			var toModel int
			for _, st := range rec.Trajectory {
				if st.Type == schemas.StepNetwork && st.Host == "127.0.0.1" && fmt.Sprint(st.Port) == port {
					if st.Allowed == nil || !*st.Allowed || st.BytesOut == nil || *st.BytesOut == 0 {
						t.Errorf("a connection to the model was not allowed, or carried nothing: %+v", st)
					}
					toModel++
				}
			}
			if toModel == 0 || rec.Network == nil || rec.Network.Allowed == 0 {
				t.Errorf("no allowed network step to the model server %s (network %+v)\n%s", srv.URL, rec.Network, dump(rec))
			}
			var changed []string
			if rec.Workspace != nil {
				for _, c := range rec.Workspace.FileChanges {
					changed = append(changed, c.Path+" "+c.Status)
				}
			}
			if len(changed) != 1 || changed[0] != "w.txt added" {
				t.Errorf("workspace changes %q (want the one file written in the workspace)\n%s", changed, dump(rec))
			}
			if _, err := os.Stat(filepath.Join(outside, "o.txt")); err == nil {
				t.Error("a file written outside the workspace by absolute path reached the host")
			}
			if _, err := os.Stat(filepath.Join("/tmp", tmpName)); err == nil {
				os.Remove(filepath.Join("/tmp", tmpName))
				t.Error("a file written under /tmp reached the host's /tmp")
			}
			if _, err := os.Stat(filepath.Join(sb.Home, "h.txt")); err == nil {
				t.Error("a file written in $HOME reached the host")
			}
			if left := processesWith("HOME=" + sb.Home); len(left) > 0 {
				// Processes of the run carry the sandbox HOME, not sb.Home;
				// anything with sb.Home ran outside.
				t.Errorf("processes outside the sandbox: %q", left)
			}
			if out, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output(); len(out) > 0 {
				exec.Command("pkill", "-f", "sleep "+marker).Run()
				t.Errorf("the setsid'd sleep outlived the run: %s", out)
			}
			saw := strings.Contains(rec.Output, "sandbox-done")
			for _, s := range rec.Trajectory {
				if s.Type == schemas.StepToolCall && strings.Contains(string(s.Output)+string(s.Content), "sandbox-done") {
					saw = true
				}
			}
			if !saw {
				t.Errorf("the shell command did not run to its end:\n%s", dump(rec))
			}
		})
	}
}
