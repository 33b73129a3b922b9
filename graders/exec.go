package graders

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"harness/internal/orphans"
	"harness/sandbox"
	"harness/schemas"
)

const (
	maxStdout  = 16 << 20 // bytes of grader stdout kept
	stderrTail = 4 << 10  // bytes of grader stderr kept (the tail)
)

// procResult is what one grader process did.
type procResult struct {
	stdout   []byte
	stderr   string // tail
	exitCode int
	signal   string
	timedOut bool
	err      error // could not start, or was cancelled
	// limit names the sandbox cap the grader hit, with its flag ("" for
	// none): the sandbox ended it.
	limit string
}

// tailBuffer keeps the last n bytes written to it.
type tailBuffer struct {
	n int
	b []byte
}

// Write keeps the tail of what is written.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.n {
		t.b = append(t.b[:0], t.b[len(t.b)-t.n:]...)
	}
	return len(p), nil
}

// String returns the kept tail.
func (t *tailBuffer) String() string {
	if len(t.b) > t.n {
		return string(t.b[len(t.b)-t.n:])
	}
	return string(t.b)
}

// limitBuffer keeps the first n bytes written to it.
type limitBuffer struct {
	n int
	bytes.Buffer
}

// Write keeps up to the limit and drops the rest.
func (l *limitBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.Len(); room > 0 {
		if len(p) > room {
			l.Buffer.Write(p[:room])
		} else {
			l.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// runProcess runs argv in its own process group with stdin, bounded by
// timeout; on timeout or cancellation the whole group is killed.
func runProcess(ctx context.Context, argv []string, dir string, env []string, stdin []byte, timeout time.Duration, sb sandbox.Runner, in *Input) procResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if env == nil {
		env = os.Environ()
	}
	token := orphans.Token()
	env = orphans.Env(env, token)
	var started func(int)
	var limitHit func() string
	if sb != nil {
		// A sandboxed run's graders run in the sandbox too, with the
		// workspace (code the agent wrote) writable.
		var rw []string
		if r := in.Record; r != nil && r.Workspace != nil && isWorkspaceCopy(r.Workspace.Path) {
			rw = append(rw, r.Workspace.Path)
		}
		// The grader's directory is readable, not writable: what a
		// grader runs of the agent's may write only the workspace.
		var ro []string
		if dir != "" {
			ro = append(ro, dir)
		}
		// The disk cap covers the workspace copy it may write (never a
		// directory of the user's: a record's workspace is a copy).
		w, err := sb.Wrap(sandbox.Command{Argv: argv, Dir: dir, Env: env, RW: rw, RO: ro, Disk: rw})
		if err != nil {
			return procResult{err: err, exitCode: -1}
		}
		defer w.Cleanup()
		argv, env = w.Argv, w.Env
		started, limitHit = w.Started, w.LimitHit
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	out := &limitBuffer{n: maxStdout}
	errb := &tailBuffer{n: stderrTail}
	cmd.Stdout = out
	cmd.Stderr = errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Children that keep the pipes open must not hold us past the kill.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Start()
	if err == nil {
		if started != nil {
			started(cmd.Process.Pid)
		}
		err = cmd.Wait()
	}
	if cmd.Process != nil {
		// Reap anything the grader left running, in its group or not.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		orphans.Kill(token, cmd.Process.Pid)
	}
	res := procResult{stdout: out.Bytes(), stderr: errb.String(), exitCode: -1}
	if limitHit != nil {
		res.limit = limitHit()
	}
	if cmd.ProcessState != nil {
		res.exitCode = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.signal = ws.Signal().String()
		}
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.timedOut = true
	case ctx.Err() != nil:
		res.err = ctx.Err()
	case err != nil && cmd.ProcessState == nil:
		res.err = err
	}
	return res
}

// procError builds an ErrorInfo carrying the process's exit facts.
func procError(class, msg string, p procResult) *schemas.ErrorInfo {
	e := &schemas.ErrorInfo{Class: class, Message: msg, Signal: p.signal, Stderr: tail(p.stderr, 2000)}
	if p.exitCode >= 0 {
		code := p.exitCode
		e.ExitCode = &code
	}
	return e
}

// commonProcErrors handles the outcomes every process grader treats alike:
// not started, cancelled, timed out.
func commonProcErrors(p procResult, timeout time.Duration) *schemas.ErrorInfo {
	switch {
	case p.limit != "":
		return procError(schemas.ErrGraderError, "the sandbox ended the grader: "+p.limit, p)
	case p.timedOut:
		return procError(schemas.ErrGraderTimeout, fmt.Sprintf("grader did not finish within %v; its process group was killed", timeout), p)
	case p.err != nil:
		return procError(schemas.ErrGraderError, "grader did not run: "+p.err.Error(), p)
	}
	return nil
}

// jsonResultBytes picks the JSON result out of stdout: the whole of it, or
// else its last non-empty line (so debug prints before it are tolerated).
func jsonResultBytes(out []byte) []byte {
	out = bytes.TrimSpace(out)
	if json.Valid(out) {
		return out
	}
	lines := bytes.Split(out, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 {
			return l
		}
	}
	return out
}

// executable is an acp-harness protocol grader: stdin one JSON object,
// stdout one JSON result, exit 0.
type executable struct {
	name      string
	path      string
	dir       string
	timeout   time.Duration
	threshold float64
	sandbox   sandbox.Runner
}

func newExecutable(spec, path string, opts Options) (*executable, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("grader %s: %w", spec, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("grader %s: is a directory, not an executable", spec)
	}
	if st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("grader %s: not executable (run chmod +x %s, or use a .js/.ts/.json/.yaml grader)", spec, spec)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("grader %s: %w", spec, err)
	}
	return &executable{name: "exec:" + spec, path: abs, dir: opts.Dir, timeout: opts.timeout(DefaultTimeout), threshold: opts.threshold(), sandbox: opts.Sandbox}, nil
}

// Name implements Grader.
func (e *executable) Name() string { return e.name }

// Grade implements Grader.
func (e *executable) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	stdin, err := json.Marshal(harnessPayload(in))
	if err != nil {
		return finish(failure(schemas.ErrGraderError, "encoding grader input: %v", err), e.name, start)
	}
	p := runProcess(ctx, []string{e.path}, e.dir, os.Environ(), stdin, e.timeout, e.sandbox, in)
	return finish(e.interpret(p), e.name, start)
}

func (e *executable) interpret(p procResult) schemas.GraderResult {
	if ei := commonProcErrors(p, e.timeout); ei != nil {
		return schemas.GraderResult{Error: ei}
	}
	if p.exitCode != 0 {
		msg := fmt.Sprintf("grader exited with status %d", p.exitCode)
		if p.signal != "" {
			msg = "grader was killed by " + p.signal
		}
		if s := tail(p.stderr, 300); s != "" {
			msg += ": " + s
		}
		msg += stdoutNote(p.stdout)
		return schemas.GraderResult{Error: procError(schemas.ErrGraderError, msg, p)}
	}
	if len(bytes.TrimSpace(p.stdout)) == 0 {
		return schemas.GraderResult{Error: procError(schemas.ErrGraderInvalid, "grader wrote no output (want one JSON result on stdout, such as {\"pass\": true}; "+
			"for a script whose exit status is its verdict, give it in a config as {type: script, command: [./"+filepath.Base(e.path)+"]}: exit 0 passes)", p)}
	}
	r, ei := parseResult(jsonResultBytes(p.stdout), e.threshold)
	if ei != nil {
		ei.Message += fmt.Sprintf(" (stdout: %q)", truncate(string(bytes.TrimSpace(p.stdout)), 200))
		full := procError(ei.Class, ei.Message, p)
		return schemas.GraderResult{Error: full}
	}
	return r
}

// script is an agentv script-protocol grader: snake_case stdin, a JSON
// result on stdout or the exit code alone.
type script struct {
	name      string
	argv      []string
	dir       string
	timeout   time.Duration
	threshold float64
	config    any
	target    *targetConfig
	opts      Options
	stripEnv  []string // judge key variables kept from the grader
}

// Name implements Grader.
func (s *script) Name() string { return s.name }

// Grade implements Grader.
func (s *script) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	stdin, err := json.Marshal(agentvPayload(in, s.config))
	if err != nil {
		return finish(failure(schemas.ErrGraderError, "encoding grader input: %v", err), s.name, start)
	}
	env := filterEnv(os.Environ(), s.stripEnv)
	if r := in.Record; r.Workspace != nil && r.Workspace.Path != "" {
		env = append(env, "AGENTV_WORKSPACE_PATH="+r.Workspace.Path)
	}
	var proxy *targetProxy
	if s.target != nil {
		proxy, err = startTargetProxy(s.target, s.opts)
		if err != nil {
			return finish(failure(schemas.ErrGraderError, "starting target proxy: %v", err), s.name, start)
		}
		defer proxy.Close()
		env = append(env, "AGENTV_TARGET_PROXY_URL="+proxy.URL(), "AGENTV_TARGET_PROXY_TOKEN="+proxy.token)
	}
	p := runProcess(ctx, s.argv, s.dir, env, stdin, s.timeout, s.opts.Sandbox, in)
	r := s.interpret(p)
	if proxy != nil {
		if r.Outcome == nil {
			r.Outcome = map[string]any{}
		}
		r.Outcome["targetProxy"] = proxy.usage()
		r.Usage = proxy.tokenUsage()
	}
	return finish(r, s.name, start)
}

func (s *script) interpret(p procResult) schemas.GraderResult {
	if ei := commonProcErrors(p, s.timeout); ei != nil {
		return schemas.GraderResult{Error: ei}
	}
	out := bytes.TrimSpace(p.stdout)
	stderr := strings.TrimSpace(p.stderr)
	if p.exitCode != 0 {
		if stderr != "" || p.signal != "" {
			msg := fmt.Sprintf("grader exited with status %d", p.exitCode)
			if p.signal != "" {
				msg = "grader was killed by " + p.signal
			}
			if s := tail(stderr, 300); s != "" {
				msg += ": " + s
			}
			msg += stdoutNote(p.stdout)
			return schemas.GraderResult{Error: procError(schemas.ErrGraderError, msg, p)}
		}
		// Exit-code mode: a quality failure, stdout is the check text.
		r := schemas.GraderResult{Pass: false, Score: 0, Reasoning: string(out)}
		if len(out) > 0 {
			r.Checks = []schemas.Check{{Text: string(out), Pass: false}}
		}
		return r
	}
	if len(out) > 0 && out[0] == '{' {
		if b := jsonResultBytes(out); json.Valid(b) {
			r, ei := parseResult(b, s.threshold)
			if ei != nil {
				ei.Message += fmt.Sprintf(" (stdout: %q)", truncate(string(out), 200))
				return schemas.GraderResult{Error: procError(ei.Class, ei.Message, p)}
			}
			return r
		}
	}
	// Exit-code mode: exit 0 is a pass, stdout is the check text.
	r := schemas.GraderResult{Pass: true, Score: 1, Reasoning: string(out)}
	if len(out) > 0 {
		r.Checks = []schemas.Check{{Text: string(out), Pass: true}}
	}
	return r
}

func filterEnv(env []string, drop []string) []string {
	if len(drop) == 0 {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			if k == d {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// resolveCommand resolves argv[0] of a config's command: a name with a
// slash is relative to the config's directory, a bare name is looked up in
// PATH.
func resolveCommand(argv []string, dir string) ([]string, error) {
	out := append([]string(nil), argv...)
	if strings.Contains(out[0], "/") {
		if !filepath.IsAbs(out[0]) {
			out[0] = filepath.Join(dir, out[0])
		}
		if _, err := os.Stat(out[0]); err != nil {
			return nil, err
		}
		return out, nil
	}
	p, err := exec.LookPath(out[0])
	if err != nil {
		return nil, err
	}
	out[0] = p
	return out, nil
}

// isWorkspaceCopy says whether path is a directory harness made for a
// case (a workspace copy, a rebuilt workspace, an image layer), the only
// kind a sandboxed grader may write: a record being regraded is input,
// and one that names another directory (a home, the user's own) gets no
// writable bind.
func isWorkspaceCopy(path string) bool {
	if path == "" {
		return false
	}
	st, err := os.Lstat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	base := filepath.Base(path)
	for _, prefix := range []string{"harness-ws-", "harness-rebuilt-", "harness-layer-"} {
		if strings.HasPrefix(base, prefix) {
			return true
		}
	}
	return false
}

// stdoutNote is what a failed grader printed on stdout (a verdict printed
// before it failed, say), for its error message; "" when nothing.
func stdoutNote(stdout []byte) string {
	out := strings.TrimSpace(string(stdout))
	if out == "" {
		return ""
	}
	return fmt.Sprintf("; it printed on stdout: %s", tail(out, 200))
}
