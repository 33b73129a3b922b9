package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A volatile overlay leaves a mark in its work directory: every command
// of a layer after the first must still get the kernel's overlay, not
// fuse-overlayfs.
func TestEveryCommandInALayerMountsTheKernelOverlay(t *testing.T) {
	img := tarImage(t, newStore(t))
	if err := CheckOverlay(context.Background(), img, t.TempDir(), nil); err != nil {
		t.Fatalf("the kernel refuses its overlay: %v", err)
	}
	l := newLayer(t, img)
	for i := 1; i <= 3; i++ {
		out, code := sh(t, l, "grep ' / ' /proc/mounts; echo $$ >> /app/runs", nil)
		if code != 0 {
			t.Fatalf("command %d: exit %d: %s", i, code, out)
		}
		if !strings.HasPrefix(out, "overlay / overlay ") {
			t.Fatalf("command %d runs on %q, want the kernel's overlay", i, strings.TrimSpace(out))
		}
	}
	b, err := l.ReadFile("/app/runs")
	if err != nil || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("/app/runs = %q, %v: want a line from each command", b, err)
	}
}

// CheckOverlay names the kernel's reason when it refuses: here, an upper
// directory inside a lower one.
func TestCheckOverlaySaysWhyTheKernelRefuses(t *testing.T) {
	img := tarImage(t, newStore(t))
	parent := t.TempDir()
	if err := CheckOverlay(context.Background(), img, parent, nil); err != nil {
		t.Fatalf("the kernel refuses its overlay: %v", err)
	}
	// A layer inside the image's own root filesystem overlaps it.
	err := CheckOverlay(context.Background(), img, img.Rootfs, nil)
	var refused *OverlayRefused
	if !errors.As(err, &refused) {
		t.Fatalf("a layer inside its image: %v, want the kernel's refusal", err)
	}
	if !strings.Contains(err.Error(), "the kernel refuses its overlayfs here") || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Fatalf("the refusal does not say why: %v", err)
	}
	// Where the kernel's log can be read, its own reason is named.
	if f, ferr := os.Open("/dev/kmsg"); ferr == nil {
		f.Close()
		if !strings.Contains(err.Error(), "the kernel's log says: overlapping") {
			t.Fatalf("the refusal does not give the kernel's reason: %v", err)
		}
	}
}

// hostPython is a python3 of the host's (not a shim) to run in an image.
func hostPython(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
		t.Fatal("python3 is not installed in /usr/bin")
	}
	t.Skip("python3 is not installed in /usr/bin")
	return ""
}

// pytest truncates an unlinked file after every test it captures the
// output of: on fuse-overlayfs that must not hang, in the first command
// of a layer or a later one.
func TestFuseOverlayfsTruncatesAnUnlinkedFile(t *testing.T) {
	if _, err := exec.LookPath("fuse-overlayfs"); err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("fuse-overlayfs is not installed")
		}
		t.Skip("fuse-overlayfs is not installed")
	}
	img := tarImage(t, newStore(t))
	l := newLayer(t, img)
	l.Overlay = "fuse"
	argv, binds, err := HostAgent([]string{hostPython(t), "-c", "import tempfile; f=tempfile.TemporaryFile(); f.write(b'x'); f.flush(); f.truncate(0); print('truncated')"}, os.Environ(), img)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd, err := l.Command(ctx, Run{Argv: argv, Env: img.Env(), Binds: binds})
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Fatalf("command %d: truncating an unlinked file on fuse-overlayfs hung: %s", i, out)
		}
		if err != nil || string(out) != "truncated\n" {
			t.Fatalf("command %d: %v: %s", i, err, out)
		}
	}
}
