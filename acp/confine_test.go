package acp

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fsCall runs one fs request against the workspace root.
func fsCall(t testing.TB, root, method string, params any) (any, error) {
	t.Helper()
	b, _ := json.Marshal(params)
	res, rpcErr, _ := serveFS(FSOptions{MaxBytes: 1 << 20}, root, &Request{Method: method, Params: b}, nil)
	if rpcErr != nil {
		return nil, rpcErr
	}
	return res, nil
}

func readFile(t testing.TB, root, path string) (string, error) {
	res, err := fsCall(t, root, MethodReadTextFile, map[string]any{"sessionId": "s", "path": path})
	if err != nil {
		return "", err
	}
	return res.(ReadTextFileResponse).Content, nil
}

func writeFile(t testing.TB, root, path, content string) error {
	_, err := fsCall(t, root, MethodWriteTextFile, map[string]any{"sessionId": "s", "path": path, "content": content})
	return err
}

// TestFSConfinement: reads and writes stay inside the workspace, and only
// plain files are touched.
func TestFSConfinement(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("outside secret"), 0o644)
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "f.txt"), []byte("inside"), 0o644)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("sub", filepath.Join(root, "in"))
	os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "abs"))
	os.Symlink(secret, filepath.Join(root, "leak"))
	os.Symlink(filepath.Join(outside, "nothing"), filepath.Join(root, "dangling"))
	if err := os.Link(secret, filepath.Join(root, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string // content, or "" for a denial
	}{
		{filepath.Join(root, "sub", "f.txt"), "inside"},
		{"sub/f.txt", "inside"},
		{filepath.Join(root, "in", "f.txt"), "inside"},
		// Absolute symlinks are not followed, even to inside.
		{filepath.Join(root, "abs", "f.txt"), ""},
		{filepath.Join(root, "sub", "..", "sub", "f.txt"), "inside"},
		{filepath.Join(root, "..", "x"), ""},
		{"../x", ""},
		{"/etc/passwd", ""},
		{secret, ""},
		{filepath.Join(root, "out", "secret.txt"), ""},
		{filepath.Join(root, "leak"), ""},
		{filepath.Join(root, "dangling"), ""},
		{filepath.Join(root, "hard"), ""},
		{filepath.Join(root, "fifo"), ""},
		{filepath.Join(root, "sub"), ""},
		{"sub/f.txt\x00.png", ""},
		{"", ""},
		{strings.Repeat("a/", 3000) + "x", ""},
	} {
		got, err := readFile(t, root, tc.path)
		if tc.want == "" && err == nil {
			t.Errorf("read %q: got %q, want a denial", tc.path, got)
		}
		if tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("read %q = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	for _, p := range []string{"../escape.txt", filepath.Join(root, "out", "w.txt"), filepath.Join(root, "hard"),
		filepath.Join(root, "fifo"), root} {
		if err := writeFile(t, root, p, "pwned"); err == nil {
			t.Errorf("write %q: allowed", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside secret" {
		t.Errorf("the outside file was changed: %q", b)
	}
	// A write to a symlink inside replaces the link, never what it points to.
	if err := writeFile(t, root, filepath.Join(root, "leak"), "mine"); err != nil {
		t.Fatalf("write over an inside symlink: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside secret" {
		t.Errorf("a write through a symlink reached outside: %q", b)
	}
	if st, _ := os.Lstat(filepath.Join(root, "leak")); st.Mode()&os.ModeSymlink != 0 {
		t.Error("the symlink was written through instead of replaced")
	}
	if err := writeFile(t, root, filepath.Join(root, "dangling"), "mine"); err != nil {
		t.Fatalf("write over a dangling symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "nothing")); err == nil {
		t.Error("a write through a dangling symlink created a file outside")
	}
	if err := writeFile(t, root, "new/deep/file.txt", "deep"); err != nil {
		t.Errorf("write a new nested file: %v", err)
	}
	if got, _ := readFile(t, root, "new/deep/file.txt"); got != "deep" {
		t.Errorf("read back %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "new", "deep"))
	if len(entries) != 1 {
		t.Errorf("temporary files left beside the written one: %v", entries)
	}
}

// TestFSSwapRace: an agent that swaps a directory for a symlink to the
// outside while the harness reads and writes under it never gets an outside
// file, and never changes one.
func TestFSSwapRace(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "f.txt"), []byte("outside"), 0o644)
	dir := filepath.Join(root, "d")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.RemoveAll(dir)
			os.Mkdir(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "f.txt"), []byte("inside"), 0o644)
			os.RemoveAll(dir)
			os.Symlink(outside, dir)
		}
	})
	var leaks, overwrites atomic.Int32
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; i < 3000 && time.Now().Before(deadline); i++ {
		if got, err := readFile(t, root, "d/f.txt"); err == nil && got == "outside" {
			leaks.Add(1)
		}
		writeFile(t, root, "d/f.txt", fmt.Sprint("w", i))
		if b, _ := os.ReadFile(filepath.Join(outside, "f.txt")); string(b) != "outside" {
			overwrites.Add(1)
			os.WriteFile(filepath.Join(outside, "f.txt"), []byte("outside"), 0o644)
		}
	}
	close(stop)
	wg.Wait()
	if leaks.Load() > 0 || overwrites.Load() > 0 {
		t.Errorf("%d reads leaked the outside file and %d writes changed it", leaks.Load(), overwrites.Load())
	}
}

// FuzzFSPaths sends hostile paths to the fs handlers: whatever the path,
// nothing outside the workspace is read or written and nothing panics.
func FuzzFSPaths(f *testing.F) {
	for _, seed := range []string{"a.txt", "../a", "/etc/passwd", "sub/../../x", "out/secret.txt", "hard", "fifo",
		"a\x00b", strings.Repeat("x", 300), strings.Repeat("../", 50) + "etc/passwd", ".", "", "sub//f.txt", "leak"} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	root := f.TempDir()
	outside := f.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("outside secret"), 0o644)
	os.Mkdir(filepath.Join(root, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink(secret, filepath.Join(root, "leak"))
	os.Link(secret, filepath.Join(root, "hard"))
	syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644)
	f.Fuzz(func(t *testing.T, p string, write bool) {
		if write {
			writeFile(t, root, p, "pwned")
		} else if got, err := readFile(t, root, p); err == nil && strings.Contains(got, "outside secret") {
			t.Fatalf("read %q leaked the outside file", p)
		}
		if b, _ := os.ReadFile(secret); string(b) != "outside secret" {
			t.Fatalf("write %q changed the outside file", p)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("write %q created a file outside", p)
		}
	})
}

// FuzzTerminalCwd sends hostile cwd paths to terminal/create's check:
// whatever the path, the directory a command would start in is inside the
// workspace.
func FuzzTerminalCwd(f *testing.F) {
	for _, seed := range []string{".", "sub", "../", "/", "/etc", "out", "out/..", "sub/../..", "a\x00b", strings.Repeat("../", 40), "link-up", "fifo"} {
		f.Add(seed)
	}
	root := f.TempDir()
	os.Mkdir(filepath.Join(root, "sub"), 0o755)
	os.Symlink(f.TempDir(), filepath.Join(root, "out"))
	os.Symlink("..", filepath.Join(root, "link-up"))
	syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644)
	realRoot, _ := filepath.EvalSymlinks(root)
	f.Fuzz(func(t *testing.T, p string) {
		dir, closeDir, rpcErr, _ := confinedDir(root, p)
		if rpcErr != nil {
			return
		}
		defer closeDir()
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatalf("cwd %q: %s does not resolve: %v", p, dir, err)
		}
		if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
			t.Fatalf("cwd %q resolves to %s, outside %s", p, real, realRoot)
		}
	})
}
