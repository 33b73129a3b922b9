package acp

import (
	"errors"
	"fmt"
	"harness/internal/orphans"
	"harness/sandbox"
	"harness/sandbox/egress"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions says how to start an agent.
type ProcessOptions struct {
	// Dir is the working directory of the agent process ("" = inherit).
	Dir string
	// Env is the whole environment of the agent process.
	Env []string
	// StderrTail is how many bytes of the agent's stderr to keep (the last
	// ones); 0 means 64 KiB.
	StderrTail int
	// StderrCopy, if set, also receives everything the agent writes to stderr.
	StderrCopy io.Writer
	// Sandbox, when set, runs the agent in it, with RW writable and Disk
	// under the disk cap.
	Sandbox sandbox.Runner
	RW      []string
	Disk    []string
}

// Process is a running agent: its own process group, pipes to its stdin and
// stdout, and its stderr drained into a bounded tail so it can never block.
type Process struct {
	limitHit func() string // the sandbox's cap that ended it, if any
	conns    func() []egress.Connection
	token    string // marks the process tree (see internal/orphans)
	cmd      *exec.Cmd
	stdin    *os.File
	stdout   *os.File
	tail     *Tail

	done      chan struct{}
	drained   chan struct{}
	waitErr   error
	closeOnce sync.Once
}

// StartError is an agent that could not be started at all (no such file,
// not executable).
type StartError struct {
	Argv []string
	Err  error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("start agent %q: %v", e.Argv[0], e.Err)
}
func (e *StartError) Unwrap() error { return e.Err }

// StartProcess starts argv in a new process group.
func StartProcess(argv []string, opts ProcessOptions) (*Process, error) {
	if len(argv) == 0 {
		return nil, &StartError{Argv: []string{""}, Err: errors.New("empty command")}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil && !resolvesInside(opts.Sandbox) {
		return nil, &StartError{Argv: argv, Err: err}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	token := orphans.Token()
	env = orphans.Env(env, token)
	cleanup := func() {}
	var started func(int)
	var limitHit func() string
	var conns func() []egress.Connection
	if opts.Sandbox != nil {
		w, err := opts.Sandbox.Wrap(sandbox.Command{Argv: argv, Dir: opts.Dir, Env: env, RW: opts.RW, Disk: opts.Disk})
		if err != nil {
			return nil, &StartError{Argv: argv, Err: err}
		}
		path, argv, env, cleanup = w.Argv[0], w.Argv, w.Env, w.Cleanup
		started, limitHit, conns = w.Started, w.LimitHit, w.Connections
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Dir:         opts.Dir,
		Env:         env,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	size := opts.StderrTail
	if size <= 0 {
		size = 64 << 10
	}
	p := &Process{
		limitHit: limitHit,
		conns:    conns,
		token:    token,
		cmd:      cmd,
		stdin:    inW,
		stdout:   outR,
		tail:     NewTail(size),
		done:     make(chan struct{}),
		drained:  make(chan struct{}),
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		cleanup()
		return nil, &StartError{Argv: argv, Err: err}
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	go func() {
		defer close(p.drained)
		defer errR.Close()
		var w io.Writer = p.tail
		if opts.StderrCopy != nil {
			w = io.MultiWriter(p.tail, opts.StderrCopy)
		}
		io.Copy(w, errR)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		orphans.Kill(token, cmd.Process.Pid)
		cleanup()
		close(p.done)
	}()
	return p, nil
}

// Stdin is the agent's standard input.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the agent's standard output.
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// LimitHit names the sandbox's resource cap the agent hit, with its flag
// ("" for none): the sandbox ended it when it did.
func (p *Process) LimitHit() string {
	if p.limitHit == nil {
		return ""
	}
	return p.limitHit()
}

// Connections returns the network connections the agent made through the
// sandbox's allowlist proxy since the last call (nil without one).
func (p *Process) Connections() []egress.Connection {
	if p.conns == nil {
		return nil
	}
	return p.conns()
}

// Pid is the process id of the agent (and the id of its process group).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the agent process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitStatus says how the process ended: its exit code, or the signal that
// killed it. It is only meaningful after Exited is closed.
func (p *Process) ExitStatus() (code int, signal string) {
	st := p.cmd.ProcessState
	if st == nil {
		return -1, ""
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return st.ExitCode(), ""
}

// StderrTail returns the last bytes the agent wrote to stderr. Once the
// agent has exited it first lets the drain catch up (briefly: a child that
// inherited stderr may keep it open).
func (p *Process) StderrTail() string {
	select {
	case <-p.done:
		select {
		case <-p.drained:
		case <-time.After(2 * time.Second):
		}
	default:
	}
	return p.tail.String()
}

// Signal sends sig to the agent's whole process group.
func (p *Process) Signal(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil {
		// The group may be gone; try the process itself.
		p.cmd.Process.Signal(sig)
	}
}

// Kill kills the agent's process group at once and waits for the agent to
// be reaped.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	orphans.Kill(p.token, p.cmd.Process.Pid)
	<-p.done
	p.closePipes()
}

// Shutdown ends the agent politely: it closes stdin, waits up to grace for
// the agent to exit, then sends SIGTERM to the group, waits up to grace
// again, and finally SIGKILLs the group. Members of the group still alive
// after the agent exits are killed too.
func (p *Process) Shutdown(grace time.Duration) {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	// Take any children the agent left behind, in its group or not.
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	orphans.Kill(p.token, p.cmd.Process.Pid)
	p.closePipes()
}

// closePipes releases our ends of the pipes once the process is gone; the
// stderr drain ends by itself when the last writer exits.
func (p *Process) closePipes() {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		p.stdout.Close()
		select {
		case <-p.drained:
		case <-time.After(time.Second):
		}
	})
}

// Tail is a bounded buffer that keeps the last bytes written to it.
type Tail struct {
	mu      sync.Mutex
	buf     []byte
	size    int
	dropped int64
}

// NewTail returns a Tail that keeps the last size bytes.
func NewTail(size int) *Tail { return &Tail{size: size} }

// Write keeps the last bytes of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.size {
		t.dropped += int64(len(t.buf) + len(p) - t.size)
		t.buf = append(t.buf[:0], p[len(p)-t.size:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.size; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the kept bytes, prefixed with a note when earlier bytes
// were dropped.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped > 0 {
		return fmt.Sprintf("[%d earlier bytes dropped]\n%s", t.dropped, t.buf)
	}
	return string(t.buf)
}

// resolvesInside says whether a sandbox looks the agent's program up
// itself, inside (an image that has the agent), so that the host need not
// have it.
func resolvesInside(sb sandbox.Runner) bool {
	r, ok := sb.(interface{ ResolvesInside() bool })
	return ok && r.ResolvesInside()
}
