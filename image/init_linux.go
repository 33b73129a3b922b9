package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitArg is the hidden subcommand that runs Main: the harness binary
// re-executes itself as "harness __image-exec SPEC" to set up a command's
// root inside namespaces of its own.
const InitArg = "__image-exec"

// execSpec is what Main is told (as JSON in its one argument).
type execSpec struct {
	// Lower are the read-only layers, top first (stubs, then the image).
	Lower []string `json:"lower"`
	Upper string   `json:"upper"`
	Work  string   `json:"work"`
	// Merged is the mount point of the overlay.
	Merged string `json:"merged"`
	// Overlay is "kernel", "fuse" or "" (kernel, then fuse).
	Overlay string `json:"overlay,omitempty"`
	// FuseOverlayfs is the fuse-overlayfs binary for the fallback.
	FuseOverlayfs string   `json:"fuseOverlayfs,omitempty"`
	Binds         []Bind   `json:"binds,omitempty"`
	Argv          []string `json:"argv"`
	Env           []string `json:"env"`
	Dir           string   `json:"dir"`
	UID           int      `json:"uid"`
	GID           int      `json:"gid"`
	// Groups are the supplementary groups of a command run as another
	// user than root (none besides GID when empty).
	Groups []int `json:"groups,omitempty"`
	// NoNetwork: the command gets a network namespace with loopback only.
	NoNetwork bool `json:"noNetwork,omitempty"`
	// Probe: only mount the kernel's overlay twice (CheckOverlay).
	Probe bool `json:"probe,omitempty"`
}

// Bind is a host path made visible inside the image.
type Bind struct {
	// Src is the host path; Dst the path inside the image ("" = Src).
	Src string `json:"src"`
	Dst string `json:"dst,omitempty"`
	// RW makes the bind writable (default read-only).
	RW bool `json:"rw,omitempty"`
}

// Main is the init of one command in an image: run by the harness binary
// when its first argument is InitArg, already in new user, mount and PID
// namespaces (Layer.Command sets them up). It mounts the overlay, /dev,
// /proc and the binds, pivots into the overlay, runs the command, reaps
// every process, and exits with the command's status; when it exits, the
// kernel kills whatever the command left behind and drops the mounts.
func Main(args []string, stderr io.Writer) int {
	if len(args) == 2 && args[0] == outerArg {
		return outer(args[1], stderr)
	}
	if len(args) == 2 && args[0] == fuseArg {
		return fuseMain(args[1], stderr)
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "harness image: internal command, not for direct use")
		return 125
	}
	var spec execSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		fmt.Fprintf(stderr, "harness image: bad spec: %v\n", err)
		return 125
	}
	if spec.Probe {
		return probe(&spec, stderr)
	}
	onFuse, err := setupRoot(&spec)
	if err != nil {
		fmt.Fprintf(stderr, "harness image: %v\n", err)
		return 125
	}
	code, err := runReaping(&spec)
	if onFuse {
		// What the command wrote reaches the layer before the server
		// ends with the namespace.
		if f, ferr := os.Open("/"); ferr == nil {
			_ = unix.Syncfs(int(f.Fd()))
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "harness image: %v\n", err)
		return 127
	}
	return code
}

// outer is the plain first stage of the init: it starts the namespaced
// stage with the same spec, passes signals on and exits as it does.
func outer(specJSON string, stderr io.Writer) int {
	var spec execSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(stderr, "harness image: bad spec: %v\n", err)
		return 125
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "harness image: %v\n", err)
		return 125
	}
	cmd := exec.Command(self, InitArg, specJSON)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = []string{}
	cmd.SysProcAttr = namespaceAttr(spec.NoNetwork)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "harness image: start the image's init: %v\n", err)
		return 125
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(stderr, "harness image: %v\n", err)
		return 125
	}
	return 0
}

// setupRoot mounts the command's root and pivots into it.
func setupRoot(s *execSpec) (onFuse bool, err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return false, fmt.Errorf("make mounts private: %w", err)
	}
	if onFuse, err = mountOverlay(s); err != nil {
		return false, err
	}
	m := s.Merged
	// /dev: a tmpfs with the host's harmless devices bound in.
	dev := filepath.Join(m, "dev")
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=65536k"); err != nil {
		return false, fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		p := filepath.Join(dev, d)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return false, err
		}
		if err := unix.Mount("/dev/"+d, p, "", unix.MS_BIND, ""); err != nil {
			return false, fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return false, err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return false, err
		}
	}
	// Pseudo-terminals and shared memory are nice to have; a kernel that
	// refuses them here leaves the command without.
	_ = unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
	_ = unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	if err := unix.Mount("proc", filepath.Join(m, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return false, fmt.Errorf("mount /proc: %w", err)
	}
	for _, b := range s.Binds {
		dst := b.Dst
		if dst == "" {
			dst = b.Src
		}
		target := filepath.Join(m, dst)
		if err := unix.Mount(b.Src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return false, fmt.Errorf("bind %s at %s: %w", b.Src, dst, err)
		}
		if !b.RW {
			if err := remountReadOnly(target); err != nil {
				return false, fmt.Errorf("bind %s read-only: %w", b.Src, err)
			}
		}
	}
	if s.NoNetwork {
		if err := loopbackUp(); err != nil {
			return false, fmt.Errorf("loopback: %w", err)
		}
	}
	if err := os.Chdir(m); err != nil {
		return false, err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return false, fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return false, fmt.Errorf("detach the host's root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return false, err
	}
	dir := s.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("working directory %s: %w", dir, err)
	}
	if s.UID != 0 || s.GID != 0 {
		_ = os.Chown(dir, s.UID, s.GID)
	}
	return onFuse, nil
}

// mountOverlay mounts the image and the layer at s.Merged: kernel
// overlayfs, or fuse-overlayfs where the kernel refuses (or when asked).
func mountOverlay(s *execSpec) (onFuse bool, err error) {
	var kernelErr error
	if s.Overlay != "fuse" {
		if kernelErr = mountKernel(s); kernelErr == nil {
			return false, nil
		}
		if s.Overlay == "kernel" {
			return false, kernelErr
		}
	}
	bin := s.FuseOverlayfs
	if bin == "" {
		bin = "fuse-overlayfs"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		if kernelErr != nil {
			return false, fmt.Errorf("%w; and fuse-overlayfs, the fallback, is not installed (apt-get install fuse-overlayfs)", kernelErr)
		}
		return false, errors.New("fuse-overlayfs is not installed (apt-get install fuse-overlayfs)")
	}
	if err := startFuse(s, p); err != nil {
		if kernelErr != nil {
			return false, fmt.Errorf("%w (%v)", err, kernelErr)
		}
		return false, err
	}
	return true, nil
}

func escape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)
	return r.Replace(p)
}

func escapeAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = escape(p)
	}
	return out
}

// remountReadOnly makes a bind mount read-only, keeping the flags the
// kernel locks in a user namespace (nosuid, nodev, noexec, atime).
func remountReadOnly(target string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", target, "", flags, "")
}

// loopbackUp brings up lo in a fresh network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// runReaping starts the command and, as the namespace's PID 1, reaps every
// process until the command itself has ended; signals that stop the
// harness are passed on to it.
func runReaping(s *execSpec) (int, error) {
	argv0, err := lookPathIn(s.Argv[0], s.Env)
	if err != nil {
		return 0, err
	}
	attr := &syscall.SysProcAttr{Setsid: false}
	if s.UID != 0 || s.GID != 0 {
		// Only as root are other users mapped, and then setgroups is
		// allowed: the command gets its own groups, none of the init's.
		groups := make([]uint32, 0, len(s.Groups))
		for _, g := range s.Groups {
			groups = append(groups, uint32(g))
		}
		attr.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: groups}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)
	proc, err := os.StartProcess(argv0, s.Argv, &os.ProcAttr{
		Dir:   s.Dir,
		Env:   s.Env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   attr,
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", s.Argv[0], err)
	}
	go func() {
		for sig := range sigs {
			_ = proc.Signal(sig)
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("wait: %w", err)
		}
		if pid != proc.Pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ws.ExitStatus(), nil
	}
}

// lookPathIn finds argv0 on the PATH of env, inside the new root.
func lookPathIn(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	pathVar := DefaultPath
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = p
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		cand := path.Join(dir, argv0)
		if fi, err := os.Stat(cand); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%s: not found on the image's PATH (%s)", argv0, pathVar)
}
