package simuser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Exec is a user that is an executable: it is run once per turn with the
// conversation as JSON on stdin and prints its reply on stdout.
type Exec struct {
	// Command is the executable and its arguments.
	Command []string
	// Dir is its working directory ("" is the caller's).
	Dir string
	// Env is its environment (nil is the caller's).
	Env []string
	// Timeout bounds one reply (0: none beyond the context's).
	Timeout time.Duration
}

// Next runs the executable once and reads its reply.
func (e *Exec) Next(ctx context.Context, c Conversation) (Reply, error) {
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	in, err := json.Marshal(c)
	if err != nil {
		return Reply{}, fmt.Errorf("encode the conversation: %w", err)
	}
	cmd := exec.CommandContext(ctx, e.Command[0], e.Command[1:]...)
	cmd.Dir, cmd.Env = e.Dir, e.Env
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Reply{}, fmt.Errorf("%s: no reply within %s", e.Command[0], e.Timeout)
		}
		tail := strings.TrimSpace(stderr.String())
		if len(tail) > 500 {
			tail = tail[len(tail)-500:]
		}
		if tail != "" {
			return Reply{}, fmt.Errorf("%s: %w: %s", e.Command[0], err, tail)
		}
		return Reply{}, fmt.Errorf("%s: %w", e.Command[0], err)
	}
	r, err := ParseReply(out.Bytes())
	if err != nil {
		return Reply{}, fmt.Errorf("%s: %w", e.Command[0], err)
	}
	return r, nil
}
