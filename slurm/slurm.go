// Package slurm talks to a Slurm cluster through its commands (sbatch,
// scontrol, scancel, sinfo): submitting an array job, reading the state of
// its tasks, cancelling it.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Runner runs one Slurm command and returns its standard output; a failure
// carries the command's standard error.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Exec runs the real commands from PATH.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return out, &CommandError{Command: name, Message: msg, Err: err}
	}
	return out, nil
}

// CommandError is a Slurm command that failed; Message is what it said.
type CommandError struct {
	Command string
	Message string
	Err     error
}

func (e *CommandError) Error() string {
	if strings.HasPrefix(e.Message, e.Command+":") {
		return e.Message
	}
	return e.Command + ": " + e.Message
}
func (e *CommandError) Unwrap() error { return e.Err }

// Client submits and watches array jobs.
type Client struct {
	Run Runner
}

// Available says whether the Slurm client commands are on PATH; the error
// names the package that has them.
func Available() error {
	for _, c := range []string{"sbatch", "scontrol", "scancel"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s not found on PATH: a Slurm run needs the Slurm client commands (Debian and Ubuntu package slurm-client; scripts/slurm-local starts a one-node cluster)", c)
		}
	}
	return nil
}

// Submit submits script as an array job of the given task indexes
// ("1-8", "3", "2,5") with extra sbatch options, and returns the job id.
func (c *Client) Submit(ctx context.Context, script, array string, opts []string) (string, error) {
	args := append([]string{"--parsable", "--array=" + array}, opts...)
	args = append(args, script)
	out, err := c.Run(ctx, "sbatch", args...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if id == "" {
		return "", fmt.Errorf("sbatch printed no job id")
	}
	return id, nil
}

// Cancel cancels jobs (whole array jobs, or "JOB_TASK" ids).
func (c *Client) Cancel(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := c.Run(ctx, "scancel", ids...)
	return err
}

// Nodes counts the cluster's nodes.
func (c *Client) Nodes(ctx context.Context) (int, error) {
	out, err := c.Run(ctx, "sinfo", "-h", "-o", "%D")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range strings.Fields(string(out)) {
		v, err := strconv.Atoi(f)
		if err == nil {
			n += v
		}
	}
	return n, nil
}

// Task is the state of one array task.
type Task struct {
	// JobID is the task's own job id.
	JobID string
	// State is Slurm's job state: PENDING, RUNNING, COMPLETED, FAILED,
	// CANCELLED, NODE_FAIL, TIMEOUT...
	State string
	// ExitCode is the task's exit status (-1 when unknown); Signal the
	// signal that ended it.
	ExitCode, Signal int
}

// Terminal reports whether the task has ended.
func (t Task) Terminal() bool {
	switch t.State {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "":
		return false
	}
	return true
}

// Tasks reads the state of the tasks of an array job, by task index. Tasks
// Slurm no longer remembers are absent.
func (c *Client) Tasks(ctx context.Context, arrayJob string) (map[int]Task, error) {
	out, err := c.Run(ctx, "scontrol", "show", "job", "-o", arrayJob)
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && strings.Contains(ce.Message, "Invalid job id") {
			return map[int]Task{}, nil
		}
		return nil, err
	}
	return ParseTasks(out), nil
}

// ParseTasks reads the one-line records of scontrol show job -o. A record
// of several pending tasks (ArrayTaskId=2-5,7) stands for each of them.
func ParseTasks(out []byte) map[int]Task {
	tasks := map[int]Task{}
	for _, line := range strings.Split(string(out), "\n") {
		f := fields(line)
		ids, ok := f["ArrayTaskId"]
		if !ok {
			continue
		}
		t := Task{JobID: f["JobId"], State: f["JobState"], ExitCode: -1}
		if code, sig, ok := strings.Cut(f["ExitCode"], ":"); ok {
			t.ExitCode, _ = strconv.Atoi(code)
			t.Signal, _ = strconv.Atoi(sig)
		}
		for _, i := range Indexes(ids) {
			tasks[i] = t
		}
	}
	return tasks
}

// fields splits a line of Key=Value pairs.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Indexes expands an array index list: "1-3,7", "2-8%4", "5".
func Indexes(s string) []int {
	s, _, _ = strings.Cut(s, "%")
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out
}

// Quote quotes a word for a POSIX shell.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
