package imagescmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"harness/cli"
	"harness/testkit/registrytest"
)

// harness images pull shows its pulls as a run does: on a terminal a live
// status line that is erased at the end, with the image's pulled line
// above it; stdout says how each image was had once the pulls are over.
func TestImagesPullShowsTheLivePulls(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	img := registrytest.Synthetic(t, v1.Config{}, map[string]string{"/etc/os-release": "ID=test\n"}, map[string]string{"/app/x": "x\n"})
	ref, _ := reg.Push(t, "tasks/live:v1", img)
	tasks := t.TempDir()
	for name, body := range map[string]string{
		"live/task.toml":      "schema_version = \"1.2\"\n\n[environment]\ndocker_image = \"" + ref + "\"\n",
		"live/instruction.md": "do it\n",
		"live/tests/test.sh":  "echo 1 > /logs/verifier/reward.txt\n",
	} {
		p := filepath.Join(tasks, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	pullOnce := func(tty bool) (stdout, stderr string) {
		t.Helper()
		var out, errb bytes.Buffer
		e := &cli.Env{Stdout: &out, Stderr: &errb, StderrTTY: tty, StderrWidth: 120, Getenv: func(string) string { return "" }}
		c := NewCmd()
		if err := c.Flags.Parse([]string{"--cache-dir", cache}); err != nil {
			t.Fatal(err)
		}
		if err := c.Run(context.Background(), e, []string{"pull", tasks}, nil); err != nil {
			t.Fatalf("images pull: %v\nstderr: %q", err, errb.String())
		}
		return out.String(), errb.String()
	}

	stdout, term := pullOnce(true)
	if !strings.Contains(term, "\r\033[Kpulling images: 0 done, 1 in flight | live:v1 ") || !strings.Contains(term, ", layers 2/2") {
		t.Errorf("stderr on a terminal: %q, want the live status line", term)
	}
	if strings.Contains(term, "layer 2/2,") {
		t.Errorf("stderr on a terminal: %q, want no line per layer", term)
	}
	if !strings.Contains(term, "pulled "+ref+": 2 layers, ") {
		t.Errorf("stderr on a terminal: %q, want the image's pulled line", term)
	}
	if strings.LastIndex(term, "\r\033[K") < strings.LastIndex(term, "pulling images:") {
		t.Errorf("the status line is left on the terminal: %q", term)
	}
	if !strings.HasPrefix(stdout, "pulled "+ref+": 2 layers, ") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("stdout %q, want the one pulled line", stdout)
	}

	stdout, log := pullOnce(false)
	if stdout != "have "+ref+"\n" {
		t.Errorf("stdout of a second pull %q, want have %s", stdout, ref)
	}
	if log != "" {
		t.Errorf("stderr of a second pull %q, want nothing (nothing was fetched)", log)
	}
}
