package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"harness/internal/orphans"
	"harness/sandbox"
	"harness/sandbox/egress"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sourcegraph/jsonrpc2"
)

// TerminalOptions configure the terminal/* service.
type TerminalOptions struct {
	// Timeout kills a command that runs longer; 0 means 5 minutes.
	Timeout time.Duration
	// MaxOutput caps the output kept per terminal; 0 means 1 MiB. The
	// agent's outputByteLimit can only lower it.
	MaxOutput int64
	// Env is the base environment of commands; nil means the harness's own.
	Env []string
	// Sandbox, when set, runs each command in it, with the session's
	// workspace writable and, unless it is one of UserDirs, under the disk
	// cap.
	Sandbox sandbox.Runner
	// UserDirs are directories of the user's (the run's working
	// directory): a session working in one of them has its commands' disk
	// cap cover their private /tmp and HOME only, never the directory.
	UserDirs []string
}

// NetworkObserver is an Observer that takes the network connections a
// session's terminal commands made through the sandbox's allowlist proxy
// (allowed or denied), each command's as it ends.
type NetworkObserver interface {
	Network(conns []egress.Connection)
}

// terminals are the commands one session started.
type terminals struct {
	opts   TerminalOptions
	root   string
	onNet  func([]egress.Connection) // the session's NetworkObserver, if any
	mu     sync.Mutex
	next   int
	all    map[string]*terminal
	closed bool // the session is over: new commands are killed at once
}

type terminal struct {
	token    string // marks the command's process tree (see internal/orphans)
	cmd      *exec.Cmd
	mu       sync.Mutex
	out      []byte
	limit    int64
	cut      bool
	done     chan struct{}
	exit     *ExitStatus
	timedOut bool
}

func newTerminals(o TerminalOptions, root string) *terminals {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 1 << 20
	}
	return &terminals{opts: o, root: root, all: map[string]*terminal{}}
}

func (ts *terminals) serve(ctx context.Context, r *Request) (any, *jsonrpc2.Error, string) {
	if r.Method == MethodTerminalCreate {
		var p CreateTerminalRequest
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, invalidParams(err), "invalid params"
		}
		return ts.create(p)
	}
	var p TerminalRequest
	if err := json.Unmarshal(r.Params, &p); err != nil {
		return nil, invalidParams(err), "invalid params"
	}
	ts.mu.Lock()
	t := ts.all[p.TerminalID]
	ts.mu.Unlock()
	if t == nil {
		return nil, &jsonrpc2.Error{Code: CodeResourceNotFound, Message: fmt.Sprintf("unknown terminal %q", p.TerminalID)}, "unknown terminal"
	}
	switch r.Method {
	case MethodTerminalOutput:
		return t.output(), nil, "output"
	case MethodTerminalWaitForExit:
		select {
		case <-t.done:
			return *t.exit, nil, "exited"
		case <-ctx.Done():
			return nil, &jsonrpc2.Error{Code: CodeRequestCancelled, Message: "request cancelled"}, "cancelled"
		}
	case MethodTerminalKill:
		t.kill()
		return empty{}, nil, "killed"
	case MethodTerminalRelease:
		t.kill()
		ts.mu.Lock()
		delete(ts.all, p.TerminalID)
		ts.mu.Unlock()
		return empty{}, nil, "released"
	}
	return nil, methodNotFound(r.Method), "method not supported"
}

// confinedDir opens the directory p names inside root and returns a path
// to it that cannot be swapped: the open descriptor, as /proc/self/fd/N,
// which the child resolves (before it runs the command) to the directory
// that was checked. Call closeDir once the command has started.
func confinedDir(root, p string) (dir string, closeDir func(), rpcErr *jsonrpc2.Error, note string) {
	rel, err := workspaceRel(root, p)
	if err != nil {
		return "", nil, denied(err), "denied: " + err.Error()
	}
	ws, err := openWorkspace(root)
	if err != nil {
		return "", nil, fsError(err), err.Error()
	}
	defer ws.Close()
	// O_DIRECTORY: a FIFO or anything else is refused without blocking.
	d, err := ws.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		e, note := confineErr(err)
		return "", nil, e, note
	}
	if info, err := d.Stat(); err != nil || !info.IsDir() {
		d.Close()
		return "", nil, denied(errors.New("cwd is not a directory")), "denied: cwd is not a directory"
	}
	return fmt.Sprintf("/proc/self/fd/%d", d.Fd()), func() { d.Close() }, nil, ""
}

func (ts *terminals) create(p CreateTerminalRequest) (any, *jsonrpc2.Error, string) {
	dir := ts.root
	if p.Cwd != nil && *p.Cwd != "" {
		d, closeDir, rpcErr, note := confinedDir(ts.root, *p.Cwd)
		if rpcErr != nil {
			return nil, rpcErr, note
		}
		defer closeDir()
		dir = d
	}
	argv := append([]string{p.Command}, p.Args...)
	if len(p.Args) == 0 {
		// Claude Code sends a whole shell line in command, without args.
		argv = []string{"/bin/sh", "-c", p.Command}
	}
	env := ts.opts.Env
	if env == nil {
		env = os.Environ()
	}
	for _, e := range p.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	limit := ts.opts.MaxOutput
	if p.OutputByteLimit != nil && *p.OutputByteLimit >= 0 && *p.OutputByteLimit < limit {
		limit = *p.OutputByteLimit
	}
	asked := argv
	t := &terminal{limit: limit, done: make(chan struct{}), token: orphans.Token()}
	env = orphans.Env(env, t.token)
	cleanup := func() {}
	var started func(int)
	var limitHit func() string
	var conns func() []egress.Connection
	if ts.opts.Sandbox != nil {
		// The sandbox starts in the directory by its path (the open
		// descriptor does not cross into it); inside, nothing outside
		// the workspace is writable, whatever was swapped in.
		real := dir
		if r, err := os.Readlink(dir); err == nil && strings.HasPrefix(dir, "/proc/self/fd/") {
			real = r
		}
		var disk []string
		if !slices.Contains(ts.opts.UserDirs, ts.root) {
			disk = []string{ts.root} // a workspace copy, not the user's
		}
		w, err := ts.opts.Sandbox.Wrap(sandbox.Command{Argv: argv, Dir: real, Env: env, RW: []string{ts.root}, Disk: disk})
		if err != nil {
			return nil, &jsonrpc2.Error{Code: CodeInternalError, Message: "cannot start command: " + err.Error()}, err.Error()
		}
		argv, dir, env, cleanup = w.Argv, w.Dir, w.Env, w.Cleanup
		started, limitHit, conns = w.Started, w.LimitHit, w.Connections
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = t
	cmd.Stderr = t
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	t.cmd = cmd
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, &jsonrpc2.Error{Code: CodeInternalError, Message: "cannot start command: " + err.Error()}, err.Error()
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		t.kill()
		cmd.Wait()
		cleanup()
		return nil, &jsonrpc2.Error{Code: CodeResourceNotFound, Message: "the session is over"}, "session over"
	}
	ts.next++
	id := fmt.Sprintf("term-%d", ts.next)
	ts.all[id] = t
	ts.mu.Unlock()
	timer := time.AfterFunc(ts.opts.Timeout, func() {
		t.mu.Lock()
		t.timedOut = true
		t.mu.Unlock()
		t.kill()
	})
	onNet := ts.onNet
	go func() {
		err := cmd.Wait()
		timer.Stop()
		if limitHit != nil {
			if hit := limitHit(); hit != "" {
				// The sandbox killed the command at a cap: say so where
				// the agent and the record see it.
				fmt.Fprintf(t, "\nharness: %s: the sandbox ended the command\n", hit)
			}
		}
		// Ending the sandbox waits for its connections to close: each is
		// then complete.
		cleanup()
		if conns != nil && onNet != nil {
			if c := conns(); len(c) > 0 {
				onNet(c)
			}
		}
		t.mu.Lock()
		t.exit = exitStatusOf(cmd, err)
		t.mu.Unlock()
		close(t.done)
	}()
	return CreateTerminalResponse{TerminalID: id}, nil, fmt.Sprintf("started %q", asked)
}

func exitStatusOf(cmd *exec.Cmd, err error) *ExitStatus {
	st := cmd.ProcessState
	if st == nil {
		msg := "not started"
		if err != nil {
			msg = err.Error()
		}
		return &ExitStatus{Signal: &msg}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal().String()
		return &ExitStatus{Signal: &sig}
	}
	code := st.ExitCode()
	return &ExitStatus{ExitCode: &code}
}

// Write keeps the output, dropping the start when over the limit and
// cutting on a character boundary.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out = append(t.out, p...)
	if over := int64(len(t.out)) - t.limit; over > 0 {
		i := int(over)
		for i < len(t.out) && !utf8.RuneStart(t.out[i]) {
			i++
		}
		t.out = append(t.out[:0], t.out[i:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *terminal) output() TerminalOutputResponse {
	t.mu.Lock()
	defer t.mu.Unlock()
	res := TerminalOutputResponse{Output: string(t.out), Truncated: t.cut}
	select {
	case <-t.done:
		res.ExitStatus = t.exit
	default:
	}
	return res
}

// kill kills the command's whole process group, including any background
// children it left running after it exited.
func (t *terminal) kill() {
	if t.cmd.Process != nil {
		syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		orphans.Kill(t.token, t.cmd.Process.Pid)
	}
}

func (ts *terminals) releaseAll() {
	ts.mu.Lock()
	all := ts.all
	ts.all = map[string]*terminal{}
	ts.closed = true
	ts.mu.Unlock()
	for _, t := range all {
		t.kill()
		select {
		case <-t.done:
		case <-time.After(2 * time.Second):
		}
	}
}
