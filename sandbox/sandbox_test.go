package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBwrapMissingNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := NewBwrap(Options{})
	if err == nil || !strings.Contains(err.Error(), "install the package bubblewrap") {
		t.Errorf("err = %v", err)
	}
}

func TestBwrapChecksItsOptions(t *testing.T) {
	for _, o := range []Options{{Network: "wifi"}, {Path: "/bin/true", RO: []string{"/no/such/path"}}, {Path: "/bin/true", HomeTemplate: "/no/such/dir"}} {
		if _, err := NewBwrap(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestBwrapArgs(t *testing.T) {
	root := t.TempDir()
	p := func(name string) string { return filepath.Join(root, name) }
	b := &Bwrap{opts: Options{Network: "none", RO: []string{p("tools")}, RW: []string{p("data")}}, path: "bwrap"}
	got := strings.Join(b.Args(Command{Dir: p("ws"), RW: []string{p("ws"), p("extra")}}, p("home")), " ")
	want := "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-pid --unshare-ipc --unshare-uts --die-with-parent --new-session --cap-drop ALL --unshare-net " +
		"--ro-bind R/tools R/tools --bind R/data R/data --bind R/ws R/ws --bind R/extra R/extra --bind R/home R/home --chdir R/ws --"
	want = strings.ReplaceAll(want, "R/", root+"/")
	if got != want {
		t.Errorf("args:\n got %s\nwant %s", got, want)
	}
}

func TestBwrapEnvKeepsOnlyWhatIsNeeded(t *testing.T) {
	b := &Bwrap{opts: Options{KeepEnv: []string{"MY_FLAG"}}}
	got := strings.Join(b.env([]string{"PATH=/bin", "HOME=/home/user", "SSH_AUTH_SOCK=/run/agent", "ANTHROPIC_API_KEY=k", "MY_FLAG=1", "LC_ALL=C", "HARNESS_PROC=t", "OTHER=x", "GITHUB_TOKEN=g", "AWS_SECRET_ACCESS_KEY=a", "OPENAI_BASE_URL=u"}, "/tmp/h"), " ")
	want := "PATH=/bin ANTHROPIC_API_KEY=k MY_FLAG=1 LC_ALL=C HARNESS_PROC=t OPENAI_BASE_URL=u HOME=/tmp/h TMPDIR=/tmp"
	if got != want {
		t.Errorf("env:\n got %s\nwant %s", got, want)
	}
}

// TestBwrapRuns runs a command in the sandbox: it cannot write outside
// its workspace, and its HOME is fresh and removed after.
func TestBwrapRuns(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		t.Skip("bwrap not installed")
	}
	tmpl := t.TempDir()
	os.WriteFile(filepath.Join(tmpl, ".agentrc"), []byte("config"), 0o644)
	b, err := NewBwrap(Options{HomeTemplate: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	outside := t.TempDir()
	w, err := b.Wrap(Command{Argv: []string{"/bin/sh", "-c", "echo in > in.txt; cat $HOME/.agentrc; echo out > " + outside + "/out.txt; echo $HOME"}, Dir: ws, RW: []string{ws}, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(w.Argv[0], w.Argv[1:]...)
	cmd.Dir, cmd.Env = w.Dir, w.Env
	out, _ := cmd.CombinedOutput()
	w.Cleanup()
	if _, err := os.Stat(filepath.Join(ws, "in.txt")); err != nil {
		t.Errorf("the workspace was not writable: %s", out)
	}
	if _, err := os.Stat(filepath.Join(outside, "out.txt")); err == nil {
		t.Errorf("a write outside the workspace reached the host: %s", out)
	}
	if !strings.Contains(string(out), "config") || !strings.Contains(string(out), "harness-home-") {
		t.Errorf("HOME not made from the template: %s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if home := lines[len(lines)-1]; home != "" {
		if _, err := os.Stat(home); err == nil {
			t.Errorf("HOME %s left behind", home)
		}
	}
	if b.Info().Backend != "bwrap" || b.Info().Network != "host" {
		t.Errorf("info %+v", b.Info())
	}
}
