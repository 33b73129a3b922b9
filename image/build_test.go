package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireBaseImage skips (or, in CI, fails) a test that needs podman and
// the base image scripts/build-base-image makes.
func requireBaseImage(t *testing.T) {
	t.Helper()
	msg := ""
	if _, err := exec.LookPath("podman"); err != nil {
		msg = "podman is not installed"
	} else if err := exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run(); err != nil {
		msg = "the base image is missing: run scripts/build-base-image"
	}
	if msg == "" {
		return
	}
	if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func TestBuildContextIsBuiltOnceAndRunsItsOwnPrograms(t *testing.T) {
	requireBaseImage(t)
	ctxDir := t.TempDir()
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM localhost/harness-base:bookworm\nWORKDIR /app\nENV GREETING=built\nRUN echo built > /app/b.txt\nCOPY data.txt /app/\n"), 0o644)
	os.WriteFile(filepath.Join(ctxDir, "data.txt"), []byte("data "+t.Name()+"\n"), 0o644)
	s := newStore(t)
	img, err := s.Resolve(context.Background(), ctxDir)
	if err != nil {
		t.Fatal(err)
	}
	if img.Kind != "build" || img.Workdir() != "/app" {
		t.Fatalf("image = %+v", img)
	}
	// The built image is in harness's cache only, not in podman's storage.
	sum, err := ContextHash(ctxDir)
	if err != nil {
		t.Fatal(err)
	}
	if tags := buildTags(t, sum[:16]); len(tags) > 0 {
		t.Fatalf("the built image is left in podman's storage as %v", tags)
	}
	// The image's own bash and datamash run; the host's are not bound.
	l := newLayer(t, img)
	cmd, err := l.Command(context.Background(), Run{Argv: []string{"bash", "-c", `cat b.txt data.txt; echo "$GREETING"; printf '1\n2\n3\n' | datamash sum 1; echo x >> /usr/bin/datamash`}, Env: img.Env()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "built\ndata "+t.Name()+"\nbuilt\n6\n" {
		t.Fatalf("%v: %q", err, out)
	}
	before := treeHash(t, img.Rootfs)
	changes, _ := l.Changes()
	if len(changes) != 1 || changes[0].Path != "/usr/bin/datamash" {
		t.Fatalf("changes %v", changes)
	}
	if treeHash(t, img.Rootfs) != before {
		t.Fatal("the cached image changed")
	}
	// An unchanged context is not built again: no builder is needed.
	s.Podman = "/nonexistent/podman"
	again, err := s.Resolve(context.Background(), ctxDir)
	if err != nil || again.Rootfs != img.Rootfs {
		t.Fatalf("second resolve: %v, %+v", err, again)
	}
	// A changed context is.
	os.WriteFile(filepath.Join(ctxDir, "data.txt"), []byte("other\n"), 0o644)
	if _, err := s.Resolve(context.Background(), ctxDir); err == nil || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("changed context: %v", err)
	}
}

func TestLocalImageAndBuildFailure(t *testing.T) {
	requireBaseImage(t)
	s := newStore(t)
	img, err := s.Resolve(context.Background(), "localhost/harness-base:bookworm")
	if err != nil {
		t.Fatal(err)
	}
	if img.Kind != "local" || !img.Exists("/usr/bin/datamash") {
		t.Fatalf("image = %+v", img)
	}
	// A machine without podman (a cluster node sharing the cache) finds
	// the image by the same reference in the cache.
	noPodman := &Store{Dir: s.Dir, Podman: "/nonexistent/podman"}
	again, err := noPodman.Resolve(context.Background(), "localhost/harness-base:bookworm")
	if err != nil || again.Rootfs != img.Rootfs || again.ID != img.ID || again.Ref != "localhost/harness-base:bookworm" || again.Kind != "local" {
		t.Fatalf("resolve without podman: %v, %+v", err, again)
	}
	hostPath := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	if again, err := (&Store{Dir: s.Dir}).Resolve(context.Background(), "localhost/harness-base:bookworm"); err != nil || again.Rootfs != img.Rootfs {
		t.Fatalf("resolve with no podman on PATH: %v, %+v", err, again)
	}
	os.Setenv("PATH", hostPath)
	// A reference never resolved into this cache still needs podman.
	if _, err := noPodman.Resolve(context.Background(), "localhost/harness-other:1"); err == nil || !strings.Contains(err.Error(), "nor an image in podman's local storage") {
		t.Fatalf("unknown reference without podman: %v", err)
	}
	// CacheFirst does not ask podman about a reference the cache holds.
	asked := filepath.Join(t.TempDir(), "asked")
	spy := filepath.Join(t.TempDir(), "podman")
	os.WriteFile(spy, []byte("#!/bin/sh\ntouch "+asked+"\nexit 1\n"), 0o755)
	if again, err := (&Store{Dir: s.Dir, Podman: spy, CacheFirst: true}).Resolve(context.Background(), "localhost/harness-base:bookworm"); err != nil || again.Rootfs != img.Rootfs {
		t.Fatalf("cache first: %v, %+v", err, again)
	}
	if _, err := os.Stat(asked); err == nil {
		t.Fatal("CacheFirst asked podman")
	}
	// Without it podman is asked first (a tag can move); one that does
	// not know the image leaves the cache's record to serve.
	if again, err := (&Store{Dir: s.Dir, Podman: spy}).Resolve(context.Background(), "localhost/harness-base:bookworm"); err != nil || again.Rootfs != img.Rootfs {
		t.Fatalf("podman without the image: %v, %+v", err, again)
	}
	if _, err := os.Stat(asked); err != nil {
		t.Fatal("podman was not asked first")
	}
	if _, err := s.Resolve(context.Background(), "localhost/no-such-image:1"); err == nil || !strings.Contains(err.Error(), "nor an image in podman's local storage") {
		t.Fatalf("missing image: %v", err)
	}
	ctxDir := t.TempDir()
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM localhost/harness-base:bookworm\nRUN exit 3\n"), 0o644)
	if _, err := s.Resolve(context.Background(), ctxDir); err == nil || !strings.Contains(err.Error(), "Dockerfile") {
		t.Fatalf("failing build: %v", err)
	}
}

// buildTags lists the harness-build tags in podman's storage that start
// with prefix.
func buildTags(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("podman", "images", "--filter", "reference=localhost/harness-build", "--format", "{{.Tag}}").Output()
	if err != nil {
		t.Fatalf("podman images: %v", err)
	}
	var tags []string
	for _, tag := range strings.Fields(string(out)) {
		if strings.HasPrefix(tag, prefix) {
			tags = append(tags, tag)
		}
	}
	return tags
}

// Two runs with caches of their own may build the same context, or
// contexts that share their first steps, at once: neither's clean-up may
// take an image the other is still saving. Here one run's podman waits
// before its save until another run has built the same context and
// cleaned up after itself.
func TestConcurrentBuildsInSeparateCaches(t *testing.T) {
	requireBaseImage(t)
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal(err)
	}
	ctxDir := t.TempDir()
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM localhost/harness-base:bookworm\nWORKDIR /app\nRUN echo shared > /app/shared.txt\nCOPY own.txt /app/\n"), 0o644)
	os.WriteFile(filepath.Join(ctxDir, "own.txt"), []byte(t.Name()+"\n"), 0o644)
	gate := t.TempDir()
	waiting, proceed := filepath.Join(gate, "waiting"), filepath.Join(gate, "proceed")
	slow := filepath.Join(t.TempDir(), "podman")
	os.WriteFile(slow, []byte(fmt.Sprintf(`#!/bin/sh
if [ "$1" = save ]; then
	touch %[1]s
	while [ ! -e %[2]s ]; do sleep 0.05; done
fi
exec %[3]s "$@"
`, waiting, proceed, podman)), 0o755)
	first := make(chan error, 1)
	go func() {
		img, err := (&Store{Dir: filepath.Join(t.TempDir(), "cache"), Podman: slow}).Resolve(context.Background(), ctxDir)
		if err == nil && !img.Exists("/app/own.txt") {
			err = fmt.Errorf("image %s lacks /app/own.txt", img.Rootfs)
		}
		first <- err
	}()
	for {
		if _, err := os.Stat(waiting); err == nil {
			break
		}
		select {
		case err := <-first:
			t.Fatalf("the first build ended before its save: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := newStore(t).Resolve(context.Background(), ctxDir); err != nil {
		t.Fatalf("second build: %v", err)
	}
	os.WriteFile(proceed, nil, 0o644)
	if err := <-first; err != nil {
		t.Fatalf("first build, saved after the second cleaned up: %v", err)
	}
}
