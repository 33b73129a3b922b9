package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"harness/image"
	"harness/image/pull"
	"harness/testkit/registrytest"
)

// The images a run fetches are shown as a live status line when stderr
// is a terminal (and nothing of it is left), as a line per layer when it
// is not; both end with the image's pulled line.
func TestFetchImagesProgressByStderr(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	img := registrytest.Synthetic(t, v1.Config{}, map[string]string{"/etc/os-release": "ID=test\n"}, map[string]string{"/app/x": "x\n"})
	ref, _ := reg.Push(t, "tasks/progress:v1", img)
	fetch := func(tty bool) string {
		var stderr bytes.Buffer
		e := &Env{Stderr: &stderr, StderrTTY: tty, StderrWidth: 120}
		store := &image.Store{Dir: t.TempDir(), Podman: "/nonexistent/podman", Registry: &pull.Client{Transport: reg.Transport, Keychain: authn.NewMultiKeychain()}}
		if err := FetchImages(context.Background(), e, store, []string{ref}, nil, false); err != nil {
			t.Fatal(err)
		}
		return stderr.String()
	}
	log := fetch(false)
	if !strings.Contains(log, "pull "+ref+": layer 2/2, ") || strings.ContainsAny(log, "\r\033") {
		t.Errorf("not a terminal: %q, want a line per layer and no terminal controls", log)
	}
	term := fetch(true)
	if strings.Contains(term, "layer 2/2,") || !strings.Contains(term, "\r\033[Kpulling images: 0 done, 1 in flight | progress:v1 ") || !strings.Contains(term, ", layers 2/2") {
		t.Errorf("a terminal: %q, want the status line and no line per layer", term)
	}
	if strings.LastIndex(term, "\r\033[K") < strings.LastIndex(term, "pulling images:") {
		t.Errorf("the status line is left on the terminal: %q", term)
	}
	for name, out := range map[string]string{"log": log, "terminal": term} {
		if !strings.Contains(out, "pulled "+ref+": 2 layers, ") {
			t.Errorf("%s: %q has no pulled line", name, out)
		}
	}
}
