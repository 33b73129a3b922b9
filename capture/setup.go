package capture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"harness/internal/orphans"
	"harness/workspace"
)

// setupError is a workspace copy or setup command that failed: the case
// gets a workspace_setup error with the command's output tail.
type setupError struct {
	msg    string
	output string
	// signal and exitCode say how the command ended ("" and -1 when it
	// did not run or was stopped by its timeout).
	signal   string
	exitCode int
	// evidence, when set, says whose failure it is better than the
	// class's own words.
	evidence string
}

func (e *setupError) Error() string { return e.msg }

// preparedTemplate is a template prepared once (WorkspacePrepare).
type preparedTemplate struct {
	once sync.Once
	dir  string
	err  error
}

// template returns what a case's copy is made from: the template itself,
// or, with WorkspacePrepare, a copy of it prepared once for the run.
func (r *Runner) template(t string) (string, error) {
	if r.cfg.WorkspacePrepare == "" {
		return t, nil
	}
	r.prepMu.Lock()
	if r.prepared == nil {
		r.prepared = map[string]*preparedTemplate{}
	}
	p := r.prepared[t]
	if p == nil {
		p = &preparedTemplate{}
		r.prepared[t] = p
	}
	r.prepMu.Unlock()
	p.once.Do(func() {
		ws, err := workspace.New(t, r.cfg.WorkspaceTmp, "prepared")
		if err != nil {
			p.err = err
			return
		}
		if err := r.runSetup(ws.Path, r.cfg.WorkspacePrepare, "workspace prepare"); err != nil {
			ws.Remove()
			p.err = err
			return
		}
		p.dir = ws.Path
	})
	return p.dir, p.err
}

// sourceTree lists a workspace source once per run: the baseline of every
// copy made from it with no setup command.
func (r *Runner) sourceTree(dir string) (*workspace.Listing, error) {
	r.prepMu.Lock()
	if r.trees == nil {
		r.trees = map[string]*sourceListing{}
	}
	l := r.trees[dir]
	if l == nil {
		l = &sourceListing{}
		r.trees[dir] = l
	}
	r.prepMu.Unlock()
	l.once.Do(func() {
		l.tree, l.err = workspace.List(dir)
	})
	return l.tree, l.err
}

// sourceListing is a workspace source listed once.
type sourceListing struct {
	once sync.Once
	tree *workspace.Listing
	err  error
}

// removePrepared removes the prepared templates at the end of a run.
func (r *Runner) removePrepared() {
	r.prepMu.Lock()
	defer r.prepMu.Unlock()
	for _, p := range r.prepared {
		if p.dir != "" {
			os.RemoveAll(p.dir)
		}
	}
}

// runSetup runs a shell command in dir, bounded by the setup timeout, and
// kills whatever it left running.
func (r *Runner) runSetup(dir, command, what string) error {
	timeout := r.cfg.SetupTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	token := orphans.Token()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = orphans.Env(append(os.Environ(), "AGENTV_WORKSPACE_PATH="+dir), token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		orphans.Kill(token, cmd.Process.Pid)
	}
	if err == nil {
		return nil
	}
	tail := out.String()
	if len(tail) > 4000 {
		tail = tail[len(tail)-4000:]
	}
	msg := fmt.Sprintf("%s %q failed: %v", what, command, err)
	if ctx.Err() != nil {
		msg = fmt.Sprintf("%s %q did not finish within %s", what, command, timeout)
	}
	if last := lastLine(tail); last != "" {
		msg += ": " + last
	}
	se := &setupError{msg: msg, output: tail, exitCode: -1}
	if st := cmd.ProcessState; st != nil && ctx.Err() == nil {
		se.exitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			se.signal = ws.Signal().String()
		}
	}
	return se
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
