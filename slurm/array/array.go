// Package array runs a harness command on Slurm as an array job, one task a
// shard: it prepares the shard directory beside the output, writes the job
// script, submits it, watches the tasks (resubmitting the failed ones), and
// checks that the output was not replaced by a link while they ran. Merging
// the shards is the caller's.
package array

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"harness/slurm"
)

// Client is what a run asks of Slurm; *slurm.Client is one.
type Client interface {
	// Submit submits script as an array job of the given task indexes
	// with extra sbatch options and returns the job id.
	Submit(ctx context.Context, script, array string, opts []string) (string, error)
	// Tasks reads the states of a job's tasks by task index.
	Tasks(ctx context.Context, job string) (map[int]slurm.Task, error)
	// Cancel cancels jobs.
	Cancel(ctx context.Context, ids ...string) error
	// Nodes counts the cluster's nodes.
	Nodes(ctx context.Context) (int, error)
}

// Job is the identity of a run, kept as job.json in the shard directory so
// a later run can tell whether it may continue it: the command line every
// task runs, less its per-task part.
type Job struct {
	// Command is the harness command: capture or trials.
	Command string `json:"command"`
	// Args are its arguments, the prompts file first, paths absolute.
	Args []string `json:"args"`
	// Agent is the agent command after --.
	Agent []string `json:"agent"`
	// Tasks is how many array tasks (and shards) the run has.
	Tasks int `json:"tasks"`
}

// Config is a run on Slurm.
type Config struct {
	// Job is what the tasks run; task i runs it with --shard i/N --resume.
	Job Job
	// Harness is the harness binary the tasks run, as an absolute path.
	Harness string
	// Prompts is the prompts file and Output the merged output, both
	// absolute; the shards are written in Output + ".shards".
	Prompts, Output string
	// K is the number of trials per case (1 for capture): the run has
	// cases × K units.
	K int
	// Workdir is the directory the tasks start in; "" is the current one.
	Workdir string
	// Opts are extra sbatch options.
	Opts []string
	// Retries is how many times a task that failed, was cancelled or lost
	// its node is resubmitted.
	Retries int
	// Poll is how often the tasks' states are read.
	Poll time.Duration
	// Shared says the output's filesystem is shared by the nodes, whatever
	// its type.
	Shared bool
	// Resume lets a run continue the shards of an earlier run with the
	// same Job; Force starts over, removing them.
	Resume, Force bool
	// Completed are the exit statuses of a task that ran to its end though
	// it did not succeed (a failed gate, records with infrastructure
	// errors): such a task is done, not resubmitted.
	Completed []int
	// Client talks to Slurm.
	Client Client
	// Log receives the progress and what happens to the tasks; nil
	// discards it.
	Log io.Writer
	// Now is the clock of the job ids' record (jobs.txt); nil is
	// time.Now.
	Now func() time.Time
}

// Kind sorts the errors of a run by what the caller makes of them.
type Kind int

const (
	// Input is refused arguments, a shard directory that may not be used,
	// or a job sbatch rejected.
	Input Kind = iota + 1
	// GivenUp is tasks that failed every attempt; the shards are kept.
	GivenUp
	// Interrupted is a watch the context ended; the jobs were cancelled.
	Interrupted
	// OutputLinked is an output that became a link while the job ran.
	OutputLinked
)

// Remedy is what a user can do about an Error, for the caller to word
// in the terms of its own command line.
type Remedy int

const (
	// NoRemedy: the message says all there is.
	NoRemedy Remedy = iota
	// SharedOutput: put the output, prompts, graders and harness binary
	// on a filesystem every node mounts, or say that it is shared
	// (Config.Shared).
	SharedOutput
	// RemoveOrForce: remove the shard directory, or start over
	// (Config.Force).
	RemoveOrForce
	// ForceOrOtherOutput: start over (Config.Force), or write another
	// output.
	ForceOrOtherOutput
	// ResumeOrForce: continue the earlier run (Config.Resume), or start
	// over (Config.Force).
	ResumeOrForce
	// ResumeLater: the same run, resumed, finishes the shards; or they
	// can be merged by hand as they are.
	ResumeLater
	// ResumeToContinue: the same run, resumed, continues where the tasks
	// stopped.
	ResumeToContinue
	// RemoveAndMerge: remove what took the output's place and merge the
	// shards by hand.
	RemoveAndMerge
)

// Error is an error of a run with its Kind and what can be done about it;
// its message is Err's, which states what happened and no remedy.
type Error struct {
	Kind   Kind
	Remedy Remedy
	Err    error
}

// Error returns Err's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func kindError(k Kind, err error) error { return &Error{Kind: k, Err: err} }

func remedyError(k Kind, r Remedy, err error) error { return &Error{Kind: k, Remedy: r, Err: err} }

// RemedyOf is the Remedy of err, or NoRemedy when it has none.
func RemedyOf(err error) Remedy {
	var e *Error
	if errors.As(err, &e) {
		return e.Remedy
	}
	return NoRemedy
}

// KindOf is the Kind of err, or 0 when it has none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// Run is one array job: its configuration, its shard directory and the
// output's state when it was set up.
type Run struct {
	cfg Config
	dir string
	// outLink is what the output linked to when the run was set up ("" for
	// no link): a link that appeared since is refused.
	outLink string
	// outType is the output's file type then (0 for a regular file or
	// none): a FIFO or device that appeared since is refused too.
	outType os.FileMode
}

// New sets up a run, noting what the output is now (see CheckOutput).
func New(cfg Config) (*Run, error) {
	switch {
	case cfg.Job.Tasks < 1:
		return nil, fmt.Errorf("slurm array: %d tasks", cfg.Job.Tasks)
	case !filepath.IsAbs(cfg.Output) || !filepath.IsAbs(cfg.Prompts):
		return nil, fmt.Errorf("slurm array: the output %q and the prompts %q must be absolute", cfg.Output, cfg.Prompts)
	case cfg.Client == nil:
		return nil, errors.New("slurm array: no client")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Run{cfg: cfg, dir: cfg.Output + ".shards", outLink: linkTarget(cfg.Output), outType: fileType(cfg.Output)}, nil
}

// Dir is the shard directory: job.json, job.sh, jobs.txt, the shards and
// the tasks' logs.
func (r *Run) Dir() string { return r.dir }

// Shards lists the shard files in task order.
func (r *Run) Shards() []string {
	var files []string
	for i := 1; i <= r.cfg.Job.Tasks; i++ {
		files = append(files, filepath.Join(r.dir, fmt.Sprintf("shard-%d.jsonl", i)))
	}
	return files
}

// Submit checks that the nodes can write beside the output, prepares the
// shard directory, writes the job script and submits it as an array job
// of Job.Tasks tasks; it returns the job id.
func (r *Run) Submit(ctx context.Context) (string, error) {
	if err := r.checkShared(ctx); err != nil {
		return "", err
	}
	made, err := r.prepareDir()
	if err != nil {
		return "", err
	}
	// A job that was never submitted leaves no shard directory behind:
	// the same command, corrected, starts afresh instead of finding the
	// "shards of an earlier run". A directory that held an earlier run's
	// shards (--resume) is left as it was.
	undo := func() {
		if made {
			os.RemoveAll(r.dir)
		}
	}
	script, err := r.writeScript()
	if err != nil {
		undo()
		return "", err
	}
	id, err := r.cfg.Client.Submit(ctx, script, fmt.Sprintf("1-%d", r.cfg.Job.Tasks), r.cfg.Opts)
	if err != nil {
		undo()
		return "", kindError(Input, fmt.Errorf("sbatch rejected the job: %w", err))
	}
	r.recordJob(id)
	return id, nil
}

// recordJob appends a job id to jobs.txt, the record of every submission.
func (r *Run) recordJob(id string) {
	f, err := os.OpenFile(filepath.Join(r.dir, "jobs.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err == nil {
		fmt.Fprintf(f, "%s %s\n", r.cfg.Now().UTC().Format(time.RFC3339), id)
		f.Close()
	}
}

// CheckOutput refuses an output that became a link (or another link)
// since the run was set up: an agent in a task could reach the output's
// directory, and the merge must never write through a link it planted.
func (r *Run) CheckOutput() error {
	if l := linkTarget(r.cfg.Output); l != r.outLink {
		return remedyError(OutputLinked, RemoveAndMerge, fmt.Errorf("%s became a link to %s while the job ran: nothing was merged (the shards are kept in %s)",
			r.cfg.Output, l, r.dir))
	}
	if t := fileType(r.cfg.Output); t != r.outType && t&os.ModeSymlink == 0 {
		return remedyError(OutputLinked, RemoveAndMerge, fmt.Errorf("%s became a %s while the job ran: nothing was merged (the shards are kept in %s)",
			r.cfg.Output, typeName(t), r.dir))
	}
	return nil
}

// fileType is the type bits of what is at path (0 for a regular file or
// nothing).
func fileType(path string) os.FileMode {
	st, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return st.Mode().Type()
}

// typeName names a file type for people.
func typeName(t os.FileMode) string {
	switch {
	case t&os.ModeNamedPipe != 0:
		return "FIFO"
	case t&os.ModeDir != 0:
		return "directory"
	case t&os.ModeSocket != 0:
		return "socket"
	case t&os.ModeDevice != 0:
		return "device"
	}
	return "file that is not a regular file"
}

// linkTarget is what path links to, or "" when it is not a link.
func linkTarget(path string) string {
	l, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return l
}
