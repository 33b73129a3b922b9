package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// fuseArg marks the stage of the init that becomes the fuse-overlayfs
// server of a layer (see startFuse).
const fuseArg = "fuse"

// OverlayRefused is the kernel's refusal of its overlayfs, as CheckOverlay
// found it: commands then run on fuse-overlayfs.
type OverlayRefused struct {
	// Reason is what the mount and the kernel's log said.
	Reason string
}

func (e *OverlayRefused) Error() string { return e.Reason }

// CheckOverlay says whether commands in layers over img get the kernel's
// overlayfs: it mounts a throwaway layer under parent ("" = the system temp
// dir) twice, as two commands of one layer would, and returns nil, or the
// kernel's refusal as an *OverlayRefused (commands then run on
// fuse-overlayfs, which is slower), or why it could not check. self is
// the command that runs Main (default: this executable).
func CheckOverlay(ctx context.Context, img *Image, parent string, self []string) error {
	l, err := NewLayer(img, parent)
	if err != nil {
		return err
	}
	defer l.Remove()
	if len(self) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("overlay check: find the harness binary: %w", err)
		}
		self = []string{exe, InitArg}
	}
	spec := l.baseSpec()
	spec.Overlay, spec.Probe = "kernel", true
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self[0], append(append([]string{}, self[1:]...), string(js))...)
	cmd.Env = []string{}
	cmd.SysProcAttr = namespaceAttr(false)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	klog := openKernelLog()
	defer klog.close()
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == probeRefused:
		msg := strings.TrimSpace(out.String())
		if said := klog.overlayLines(); said != "" {
			msg += "; the kernel's log says: " + said
		} else if klog.fd < 0 {
			msg += " (the kernel's log may say why: dmesg)"
		}
		return &OverlayRefused{Reason: msg}
	default:
		return fmt.Errorf("overlay check: %w: %s", err, strings.TrimSpace(out.String()))
	}
}

// kernelLog reads what the kernel logs from the moment it is opened
// (overlayfs says why it refuses a mount there, not to the mounter).
type kernelLog struct{ fd int }

// openKernelLog opens /dev/kmsg at its end; fd is -1 where it cannot be
// read (without privileges, with kernel.dmesg_restrict).
func openKernelLog() kernelLog {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return kernelLog{fd: -1}
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return kernelLog{fd: -1}
	}
	return kernelLog{fd: fd}
}

// overlayLines are overlayfs's messages logged since the log was opened.
func (k kernelLog) overlayLines() string {
	if k.fd < 0 {
		return ""
	}
	var said []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(k.fd, buf)
		if err == unix.EPIPE {
			continue // records overwritten before they were read
		}
		if err != nil || n <= 0 {
			break
		}
		// A record is "prio,seq,usec,flags;text\n" and continuation lines.
		_, text, ok := strings.Cut(string(buf[:n]), ";")
		text, _, _ = strings.Cut(text, "\n")
		if m, isOverlay := strings.CutPrefix(text, "overlayfs: "); ok && isOverlay && !slices.Contains(said, m) {
			said = append(said, m)
		}
	}
	return strings.Join(said, "; ")
}

func (k kernelLog) close() {
	if k.fd >= 0 {
		unix.Close(k.fd)
	}
}

// probeRefused is the exit status of a probe whose overlay the kernel
// refused (its reason on stderr).
const probeRefused = 3

// probe mounts the overlay, unmounts it and mounts it again (the second
// mount of a layer is where a leftover of the first would be refused).
func probe(s *execSpec, stderr io.Writer) int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintf(stderr, "make mounts private: %v\n", err)
		return 125
	}
	for i := 0; i < 2; i++ {
		if err := mountKernel(s); err != nil {
			fmt.Fprintln(stderr, err)
			return probeRefused
		}
		if err := unix.Unmount(s.Merged, 0); err != nil {
			fmt.Fprintf(stderr, "unmount the overlay: %v\n", err)
			return 125
		}
	}
	return 0
}

// mountKernel mounts the kernel's overlayfs at s.Merged. It is volatile:
// a trial's layer is thrown away or read once the command is over, so the
// unmount need not sync the disk (which costs tens of milliseconds). A
// volatile mount leaves work/work/incompat/volatile behind (the kernel's
// own work directory is work/work), which must go before the next command
// mounts the layer; the page cache still holds what the last one wrote.
func mountKernel(s *execSpec) error {
	incompat := filepath.Join(s.Work, "work", "incompat")
	_ = os.RemoveAll(incompat)
	err := kernelOverlay(s.Lower, s.Upper, s.Work, s.Merged, "userxattr", "volatile")
	if err != nil {
		// A kernel without volatile (before 5.10) mounts without it; a
		// refused volatile mount may have left its mark too.
		_ = os.RemoveAll(incompat)
		if err2 := kernelOverlay(s.Lower, s.Upper, s.Work, s.Merged, "userxattr"); err2 == nil {
			return nil
		}
		return fmt.Errorf("the kernel refuses its overlayfs here: %w", err)
	}
	return nil
}

// kernelOverlay mounts overlayfs with the mount API that says why the
// kernel refuses (its message, as dmesg would have it); a kernel without
// that API gets mount(2).
func kernelOverlay(lower []string, upper, work, merged string, flags ...string) error {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(escapeAll(lower), ":"), escape(upper), escape(work))
		for _, f := range flags {
			opts += "," + f
		}
		if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
			return fmt.Errorf("mount: %w", err)
		}
		return nil
	}
	defer unix.Close(fd)
	fail := func(what string, err error) error {
		if msg := fsLog(fd); msg != "" {
			return fmt.Errorf("%s (%s: %w)", msg, what, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	colons := strings.NewReplacer(`\`, `\\`, `:`, `\:`)
	parts := make([]string, len(lower))
	for i, p := range lower {
		parts[i] = colons.Replace(p)
	}
	for _, kv := range [][2]string{{"source", "overlay"}, {"lowerdir", strings.Join(parts, ":")}, {"upperdir", upper}, {"workdir", work}} {
		if err := unix.FsconfigSetString(fd, kv[0], kv[1]); err != nil {
			return fail(kv[0], err)
		}
	}
	for _, f := range flags {
		if err := unix.FsconfigSetFlag(fd, f); err != nil {
			return fail(f, err)
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return fail("create", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fail("fsmount", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, merged, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// fsLog reads the error messages the kernel left on a filesystem context.
func fsLog(fd int) string {
	var msgs []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		if m, ok := strings.CutPrefix(string(buf[:n]), "e "); ok {
			msgs = append(msgs, strings.TrimSpace(m))
		}
	}
	return strings.Join(msgs, "; ")
}

// fuseSpec is what the fuse-overlayfs stage of the init is told.
type fuseSpec struct {
	// Bin is the fuse-overlayfs program.
	Bin   string   `json:"bin"`
	Lower []string `json:"lower"`
	Upper string   `json:"upper"`
	Work  string   `json:"work"`
	// Root is an empty directory on which its own root is made.
	Root string `json:"root"`
}

// startFuse serves the overlay at s.Merged with fuse-overlayfs. The init
// mounts the FUSE filesystem itself and hands the device to the server,
// which runs in a mount namespace of its own, rooted in a directory that
// holds only what it needs (its program and libraries, the layer's
// directories and /proc). So the init's pivot_root leaves the server's root
// alone: were its root the mount it serves, the paths it resolves
// (/proc/self/fd/N/..., which it uses for an unlinked file's attributes)
// would go through that mount and wait on the server itself, forever. And
// the command, which sees the server's process, sees the host through it no
// more than through its own root.
func startFuse(s *execSpec, bin string) error {
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open /dev/fuse: %w", err)
	}
	defer dev.Close()
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions", dev.Fd())
	if err := unix.Mount("fuse-overlayfs", s.Merged, "fuse.fuse-overlayfs", unix.MS_NODEV|unix.MS_NOATIME, opts); err != nil {
		return fmt.Errorf("mount fuse: %w", err)
	}
	fs := fuseSpec{Bin: bin, Lower: s.Lower, Upper: s.Upper, Work: s.Work, Root: filepath.Join(filepath.Dir(s.Merged), "fuse-root")}
	if err := os.MkdirAll(fs.Root, 0o700); err != nil {
		return err
	}
	js, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	// The init's own command line, the spec replaced.
	args := append(append([]string{}, os.Args[1:len(os.Args)-1]...), fuseArg, string(js))
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{dev}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start fuse-overlayfs: %w", err)
	}
	// The server holds the only copy of the device now: should it end,
	// the mount answers ENOTCONN instead of waiting.
	dev.Close()
	if _, err := os.Stat(s.Merged); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("fuse-overlayfs: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// fuseMain is the fuse-overlayfs stage: in a mount namespace of its own,
// it makes a root of a tmpfs with its program and the layer's directories
// bound in and a /proc, pivots into it and becomes fuse-overlayfs, serving
// the device the init passed as file descriptor 3.
func fuseMain(specJSON string, stderr io.Writer) int {
	var fs fuseSpec
	if err := json.Unmarshal([]byte(specJSON), &fs); err != nil {
		fmt.Fprintf(stderr, "harness image: bad spec: %v\n", err)
		return 125
	}
	if err := fuseRoot(&fs); err != nil {
		fmt.Fprintf(stderr, "harness image: fuse-overlayfs: %v\n", err)
		return 125
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(fs.Lower, ":"), fs.Upper, fs.Work)
	err := unix.Exec(fs.Bin, []string{"fuse-overlayfs", "-f", "-o", opts, "/dev/fd/3"}, []string{})
	fmt.Fprintf(stderr, "harness image: exec %s: %v\n", fs.Bin, err)
	return 127
}

// fuseRoot makes the fuse-overlayfs stage's root and pivots into it.
func fuseRoot(fs *fuseSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// The program and its libraries, as an agent's are bound into an
	// image (an image with nothing in it: everything is bound).
	_, binds, err := HostAgent([]string{fs.Bin}, nil, &Image{Rootfs: fs.Root})
	if err != nil {
		return err
	}
	for _, l := range fs.Lower {
		binds = append(binds, Bind{Src: l})
	}
	// The directories that hold upper/ and work/, whole: fuse-overlayfs
	// renames from one to the other, which fails across two binds.
	binds = append(binds, Bind{Src: filepath.Dir(fs.Upper), RW: true})
	if filepath.Dir(fs.Work) != filepath.Dir(fs.Upper) {
		binds = append(binds, Bind{Src: filepath.Dir(fs.Work), RW: true})
	}
	sort.Slice(binds, func(i, j int) bool { return bindDst(binds[i]) < bindDst(binds[j]) })
	if err := unix.Mount("tmpfs", fs.Root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount its root: %w", err)
	}
	for _, b := range binds {
		target := filepath.Join(fs.Root, bindDst(b))
		fi, err := os.Stat(b.Src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if fi.IsDir() {
			err = os.MkdirAll(target, 0o755)
		} else if _, serr := os.Lstat(target); serr != nil {
			err = os.WriteFile(target, nil, 0o644)
		}
		if err != nil {
			return err
		}
		// Not recursive: what is mounted below (the layer's merged/) is
		// none of the server's business.
		if err := unix.Mount(b.Src, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.Src, err)
		}
		if !b.RW {
			if err := remountReadOnly(target); err != nil {
				return fmt.Errorf("bind %s read-only: %w", b.Src, err)
			}
		}
	}
	proc := filepath.Join(fs.Root, "proc")
	if err := os.Mkdir(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := os.Chdir(fs.Root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	return os.Chdir("/")
}

func bindDst(b Bind) string {
	if b.Dst != "" {
		return b.Dst
	}
	return b.Src
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
