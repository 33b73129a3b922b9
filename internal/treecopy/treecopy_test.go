package treecopy

import (
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// write makes the files of a tree: name to content.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// withUmask runs the test under umask 022, whatever the caller's.
func withUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}

// A link is copied as a link with its target unchanged, wherever it
// points (inside, outside, nowhere), and nothing is read through it.
func TestSymlinksKeptAsLinks(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, src, map[string]string{"file.txt": "inside\n", "sub/x": "x"})
	write(t, outside, map[string]string{"secret": "HOST-SECRET", "dir/deep": "HOST-SECRET"})
	links := map[string]string{
		"in":       "file.txt",
		"sub/up":   "../file.txt",
		"abs":      filepath.Join(outside, "secret"),
		"escape":   "../../../../../../.." + filepath.Join(outside, "secret"),
		"dirlink":  filepath.Join(outside, "dir"),
		"dangling": "no-such-file",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Copy(src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		p := filepath.Join(dst, name)
		if m := mode(t, p); m&fs.ModeSymlink == 0 {
			t.Errorf("%s: copied as %v, want a link", name, m)
			continue
		}
		if got, _ := os.Readlink(p); got != target {
			t.Errorf("%s -> %q, want -> %q", name, got, target)
		}
	}
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.Contains(read(t, p), "HOST-SECRET") {
			t.Errorf("%s: a file outside the tree was copied in", p)
		}
		return nil
	})
	if got := read(t, filepath.Join(dst, "sub/x")); got != "x" {
		t.Errorf("sub/x = %q", got)
	}
}

func TestSkipSymlinks(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, src, map[string]string{"file.txt": "a"})
	if err := os.Symlink("file.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, dst, Options{SkipSymlinks: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "link")); !os.IsNotExist(err) {
		t.Errorf("link: %v, want it left out", err)
	}
	if got := read(t, filepath.Join(dst, "file.txt")); got != "a" {
		t.Errorf("file.txt = %q", got)
	}
}

// Without ExactModes a copy has its source's permission bits under the
// umask, directories writable by their owner, files plus FilePerm; the
// top directory takes the source's mode only with RootMode.
func TestModesUnderTheUmask(t *testing.T) {
	withUmask(t)
	src := t.TempDir()
	write(t, src, map[string]string{"run.sh": "#!/bin/sh\n", "private": "p", "open": "o", "ro": "r", "dir/f": "f"})
	for name, m := range map[string]fs.FileMode{"run.sh": 0o755, "private": 0o640, "open": 0o777, "ro": 0o444, "dir": 0o500} {
		if err := os.Chmod(filepath.Join(src, name), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(src, 0o751); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "dir"), 0o755) })

	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{"run.sh": 0o755, "private": 0o640, "open": 0o755, "ro": 0o444, "dir": fs.ModeDir | 0o700, ".": fs.ModeDir | 0o700} {
		if got := mode(t, filepath.Join(dst, name)); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}

	withRoot := t.TempDir()
	if err := Copy(src, withRoot, Options{RootMode: true, FilePerm: 0o600}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{".": fs.ModeDir | 0o751, "ro": 0o644, "private": 0o640, "run.sh": 0o755} {
		if got := mode(t, filepath.Join(withRoot, name)); got != want {
			t.Errorf("RootMode, FilePerm 0600: %s: mode %v, want %v", name, got, want)
		}
	}
}

// ExactModes keeps setuid, setgid and sticky bits and ignores the umask;
// a read-only directory is filled before it gets its mode.
func TestExactModes(t *testing.T) {
	withUmask(t)
	src := t.TempDir()
	write(t, src, map[string]string{"suid": "s", "open": "o", "ro/inner": "i", "tmp/x": "x"})
	want := map[string]fs.FileMode{
		"suid": 0o755 | fs.ModeSetuid,
		"open": 0o777,
		"ro":   fs.ModeDir | 0o555,
		"tmp":  fs.ModeDir | 0o777 | fs.ModeSticky,
	}
	for name, m := range want {
		if err := os.Chmod(filepath.Join(src, name), m&(fs.ModePerm|fs.ModeSetuid|fs.ModeSticky)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(src, 0o750); err != nil {
		t.Fatal(err)
	}
	want["."] = fs.ModeDir | 0o750
	dst := filepath.Join(t.TempDir(), "rootfs")
	t.Cleanup(func() { os.Chmod(filepath.Join(dst, "ro"), 0o755); os.Chmod(filepath.Join(src, "ro"), 0o755) })
	if err := Copy(src, dst, Options{ExactModes: true, RootMode: true}); err != nil {
		t.Fatal(err)
	}
	for name, m := range want {
		if got := mode(t, filepath.Join(dst, name)); got != m {
			t.Errorf("%s: mode %v, want %v", name, got, m)
		}
	}
	if got := read(t, filepath.Join(dst, "ro/inner")); got != "i" {
		t.Errorf("ro/inner = %q", got)
	}
}

// FIFOs, sockets and devices are left out, and never opened (a FIFO
// opened for reading would block the copy).
func TestSpecialFilesLeftOut(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, src, map[string]string{"file": "f"})
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(src, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	special := []string{"fifo", "sock"}
	// A device, where this process may make one (root, outside a
	// container that forbids it).
	if err := syscall.Mknod(filepath.Join(src, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		special = append(special, "null")
	} else {
		t.Logf("no device node: %v", err)
	}
	if err := Copy(src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range special {
		if _, err := os.Lstat(filepath.Join(dst, name)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it left out", name, err)
		}
	}
	if got := read(t, filepath.Join(dst, "file")); got != "f" {
		t.Errorf("file = %q", got)
	}
}

// Two hard links to one file become two files: a change to one copy
// leaves the other as it was.
func TestHardLinksBecomeFilesOfTheirOwn(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write(t, src, map[string]string{"a": "same"})
	if err := os.Link(filepath.Join(src, "a"), filepath.Join(src, "b")); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(filepath.Join(dst, "a"))
	b, _ := os.Stat(filepath.Join(dst, "b"))
	if a == nil || b == nil || os.SameFile(a, b) {
		t.Fatalf("copies a=%v b=%v: want two files", a, b)
	}
	if err := os.WriteFile(filepath.Join(dst, "a"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dst, "b")); got != "same" {
		t.Errorf("b = %q after a write to a", got)
	}
	if got := read(t, filepath.Join(src, "b")); got != "same" {
		t.Errorf("source b = %q after a write to the copy", got)
	}
}

// Merge keeps the destination's directories and other files, replaces
// files of the same name, and never writes through a link it finds there.
func TestMerge(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	write(t, outside, map[string]string{"victim": "keep"})
	write(t, src, map[string]string{"tests/test_a.py": "new", "conftest.py": "new", "planted": "new"})
	write(t, dst, map[string]string{"tests/mine.py": "agent's", "tests/test_a.py": "agent's", "main.py": "agent's"})
	if err := os.Symlink(victim, filepath.Join(dst, "planted")); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, dst, Options{Merge: true}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"tests/test_a.py": "new", "conftest.py": "new", "tests/mine.py": "agent's", "main.py": "agent's", "planted": "new"} {
		if got := read(t, filepath.Join(dst, name)); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if m := mode(t, filepath.Join(dst, "planted")); !m.IsRegular() {
		t.Errorf("planted: %v, want the link replaced by a file", m)
	}
	if got := read(t, victim); got != "keep" {
		t.Errorf("the file outside was written through a link: %q", got)
	}

	// A link to a directory outside, where the source has a directory:
	// refused, nothing written there.
	dst2 := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst2, "tests")); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, dst2, Options{Merge: true}); err == nil {
		t.Error("merged through a link to a directory outside")
	}
	if _, err := os.Lstat(filepath.Join(outside, "test_a.py")); err == nil {
		t.Error("a file was written outside through a link")
	}

	// Without Merge, a name that exists fails the copy.
	dst3 := t.TempDir()
	write(t, dst3, map[string]string{"conftest.py": "there"})
	if err := Copy(src, dst3, Options{}); err == nil || !strings.Contains(err.Error(), "conftest.py") {
		t.Errorf("copy over an existing file: %v, want an error naming it", err)
	}
	if got := read(t, filepath.Join(dst3, "conftest.py")); got != "there" {
		t.Errorf("conftest.py = %q, overwritten without Merge", got)
	}
}

// An unreadable file fails the copy with an error that names it. Root
// reads every file, so as root the test runs itself again as nobody.
func TestUnreadableFileNamed(t *testing.T) {
	if os.Geteuid() == 0 {
		if os.Getenv("TREECOPY_TEST_AS_NOBODY") != "" {
			t.Fatal("still root after dropping to nobody")
		}
		asNobody(t, "TestUnreadableFileNamed")
		return
	}
	src, dst := t.TempDir(), t.TempDir()
	write(t, src, map[string]string{"ok": "fine", "locked/secret.txt": "no"})
	secret := filepath.Join(src, "locked", "secret.txt")
	if err := os.Chmod(secret, 0); err != nil {
		t.Fatal(err)
	}
	err := Copy(src, dst, Options{})
	if err == nil || !strings.Contains(err.Error(), secret) {
		t.Fatalf("copy of an unreadable file: %v, want an error naming %s", err, secret)
	}
}

// asNobody runs the test named test in a copy of this test binary as the
// user nobody, and fails when it fails.
func asNobody(t *testing.T, test string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	tmp := filepath.Join(t.TempDir(), "tmp")
	for _, d := range []string{bin, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	// The directories above t.TempDir's are private: a copy of the
	// binary and a temp dir under a directory nobody can enter.
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin)), filepath.Dir(tmp), filepath.Dir(filepath.Dir(tmp))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "treecopy.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TREECOPY_TEST_AS_NOBODY=1", "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
	}
}

// Owners keeps each file's owner and group when running as root; as
// anyone else it is ignored and the copy is the copier's.
func TestOwners(t *testing.T) {
	src, dst, plain := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, src, map[string]string{"owned": "o", "dir/f": "f"})
	if err := os.Symlink("owned", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	want := os.Geteuid()
	if want == 0 {
		want = 1234
		for _, name := range []string{"owned", "dir", "link"} {
			if err := os.Lchown(filepath.Join(src, name), 1234, 5678); err != nil {
				t.Fatalf("chown as root: %v", err)
			}
		}
	}
	if err := Copy(src, dst, Options{Owners: true}); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, plain, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"owned", "dir", "link"} {
		fi, err := os.Lstat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != want || (want == 1234 && st.Gid != 5678) {
			t.Errorf("Owners: %s owned by %d:%d, want %d", name, st.Uid, st.Gid, want)
		}
		fi, err = os.Lstat(filepath.Join(plain, name))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
			t.Errorf("without Owners: %s owned by %d, want the copier's %d", name, st.Uid, os.Geteuid())
		}
	}
}

// A source named through a link is the directory it names.
func TestSourceThroughALink(t *testing.T) {
	real, dst := t.TempDir(), t.TempDir()
	write(t, real, map[string]string{"a": "a"})
	link := filepath.Join(t.TempDir(), "template")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := Copy(link, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dst, "a")); got != "a" {
		t.Errorf("a = %q", got)
	}
}
