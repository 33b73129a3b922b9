package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// BridgeMain runs the bridge inside the sandbox; args are what follows
// BridgeArg on the command line. It returns the exit status for os.Exit.
//
// In its first stage the bridge binds its listeners (ports below 1024
// need CAP_NET_BIND_SERVICE), then drops every capability (effective,
// permitted, inheritable, ambient and the bounding set: this needs
// CAP_SETPCAP), takes the identity of --user if given (a bridge started as
// root for a command that runs as another user), sets no-new-privs and
// re-executes itself, handing the listeners on. The second stage, with no capabilities in any of its
// threads, bridges each accepted connection to the proxy's unix socket
// and runs the command as its child with stdin, stdout and stderr
// inherited; it forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to it, and
// exits with its exit status, or dies of the signal that killed it.
func BridgeMain(args []string) int {
	// Credentials are per thread: the drop and the exec happen on this one.
	runtime.LockOSThread()
	cfg, err := parseBridgeArgs(args)
	if err != nil {
		return bridgeFail("%v", err)
	}
	if cfg.probe {
		return probeMain()
	}
	if cfg.fds == nil {
		return bridgeStage1(cfg, args)
	}
	return bridgeStage2(cfg)
}

func bridgeStage1(cfg bridgeConfig, args []string) int {
	addrs := []string{cfg.http}
	for _, f := range cfg.forwards {
		addrs = append(addrs, f.Listen)
	}
	var keep []netip.AddrPort
	for _, a := range addrs {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			keep = append(keep, ap)
		}
	}
	if cfg.redirect {
		addrs = append(addrs, "127.0.0.1:0")
	}
	var fds []string
	// The listeners' files stay reachable until the exec: a garbage
	// collection in between would run their finalizers, closing the
	// descriptors the second stage is told to use.
	var files []*os.File
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			hint := ""
			if errors.Is(err, syscall.EACCES) {
				hint = " (ports below 1024 need bwrap --cap-add CAP_NET_BIND_SERVICE)"
			}
			return bridgeFail("listen: %v%s", err, hint)
		}
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			return bridgeFail("listen %s: %v", a, err)
		}
		// The copy survives the exec below; the listener itself does not.
		if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETFD, 0); e != 0 {
			return bridgeFail("listen %s: %v", a, e)
		}
		files = append(files, f)
		fds = append(fds, strconv.Itoa(int(f.Fd())))
		if cfg.redirect && len(files) == len(addrs) {
			// The last listener takes every other TCP connection.
			to := l.Addr().(*net.TCPAddr).AddrPort()
			if err := installRedirect(to, keep); err != nil {
				return bridgeFail("redirect the connections that ignore the proxy: %v (the sandbox needs bwrap --cap-add CAP_NET_ADMIN for the bridge)", err)
			}
		}
	}
	if err := dropCapabilities(cfg.user); err != nil {
		return bridgeFail("%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return bridgeFail("%v", err)
	}
	argv := append([]string{os.Args[0], BridgeArg, "--fds", strings.Join(fds, ",")}, args...)
	err = syscall.Exec(exe, argv, os.Environ())
	runtime.KeepAlive(files)
	return bridgeFail("exec %s: %v", exe, err)
}

func bridgeStage2(cfg bridgeConfig) int {
	if err := checkNoCapabilities(); err != nil {
		return bridgeFail("%v", err)
	}
	targets := append([]string{""}, make([]string, len(cfg.forwards))...)
	for i, f := range cfg.forwards {
		targets[i+1] = f.Target
	}
	for i, fd := range cfg.fds {
		f := os.NewFile(uintptr(fd), "listener")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return bridgeFail("listener %d: %v", fd, err)
		}
		if i == len(targets) {
			self := l.Addr().(*net.TCPAddr).AddrPort()
			go acceptLoop(l, func(c net.Conn) { redirectedConn(c, cfg.socket, self) })
			continue
		}
		target := targets[i]
		go acceptLoop(l, func(c net.Conn) { bridgeConn(c, cfg.socket, target) })
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	cmd := exec.Command(cfg.agent[0], cfg.agent[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		code := 127
		if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			code = 126
		}
		fmt.Fprintf(os.Stderr, "harness sandbox bridge: %v\n", err)
		return code
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	cmd.Wait()
	close(done)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGKILL:
		// The Go runtime dies of these once nothing handles them; for
		// the others, the exit status says which signal it was.
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
	}
	return 128 + int(sig)
}

// Linux capability interface.
const (
	prCapbsetRead        = 23
	prCapbsetDrop        = 24
	prSetNoNewPrivs      = 38
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	capVersion3          = 0x20080522
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
		return n
	}
	return 63
}

// dropCapabilities empties this thread's bounding set and its other
// capability sets and sets no-new-privs, so that what it executes has no
// capabilities and cannot gain any, even as root. With user, the thread
// takes that user's identity once the bounding set is empty.
func dropCapabilities(user *Credential) error {
	last := lastCap()
	for c := 0; c <= last; c++ {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
			if on, _, _ := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetRead, uintptr(c), 0, 0, 0, 0); on == 1 {
				return fmt.Errorf("drop capability %d from the bounding set: %v (the sandbox needs bwrap --cap-add CAP_SETPCAP for the bridge)", c, e)
			}
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %v", e)
	}
	if user != nil {
		if err := becomeUser(*user); err != nil {
			return err
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("set no-new-privs: %v", e)
	}
	hdr := capHeader{version: capVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("drop capabilities: %v", e)
	}
	return checkNoCapabilities()
}

// checkNoCapabilities fails unless this thread has no capability in any
// set, the bounding set included.
func checkNoCapabilities() error {
	hdr := capHeader{version: capVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("read capabilities: %v", e)
	}
	for _, d := range data {
		if d.effective|d.permitted|d.inheritable != 0 {
			return errors.New("capabilities left after dropping them")
		}
	}
	last := lastCap()
	for c := 0; c <= last; c++ {
		if on, _, _ := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetRead, uintptr(c), 0, 0, 0, 0); on == 1 {
			return fmt.Errorf("capability %d left in the bounding set", c)
		}
	}
	return nil
}

// becomeUser gives this thread u's groups, gid and uid (real, effective
// and saved), while it still has CAP_SETGID and CAP_SETUID; leaving uid 0
// empties its permitted and effective sets.
func becomeUser(u Credential) error {
	groups := make([]uint32, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = uint32(g)
	}
	var ptr unsafe.Pointer
	if len(groups) > 0 {
		ptr = unsafe.Pointer(&groups[0])
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(ptr), 0); e != 0 {
		return fmt.Errorf("run as %s: setgroups: %v (the bridge must start as root to run its command as another user)", u, e)
	}
	runtime.KeepAlive(groups)
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(u.GID), uintptr(u.GID), uintptr(u.GID)); e != 0 {
		return fmt.Errorf("run as %s: setresgid: %v", u, e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(u.UID), uintptr(u.UID), uintptr(u.UID)); e != 0 {
		return fmt.Errorf("run as %s: setresuid: %v", u, e)
	}
	return nil
}
