package array

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"harness/results"
	"harness/slurm"
)

// localFS names the filesystem types that one machine has to itself.
func localFS(fsType int64) (string, bool) {
	switch fsType {
	case 0x01021994:
		return "tmpfs", true
	case 0xef53:
		return "ext2/3/4", true
	case 0x58465342:
		return "xfs", true
	case 0x9123683e:
		return "btrfs", true
	case 0x794c7630:
		return "overlay", true
	case 0x2fc12fc1:
		return "zfs", true
	}
	return "", false
}

// checkShared refuses an output on a filesystem that looks local to this
// machine when the cluster has more than one node.
func (r *Run) checkShared(ctx context.Context) error {
	if r.cfg.Shared {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(r.cfg.Output), &st); err != nil {
		return kindError(Input, fmt.Errorf("output %s: %w", r.cfg.Output, err))
	}
	kind, local := localFS(int64(st.Type))
	if !local {
		return nil
	}
	nodes, err := r.cfg.Client.Nodes(ctx)
	if err != nil || nodes <= 1 {
		return nil
	}
	return remedyError(Input, SharedOutput, fmt.Errorf("the output %s is on a %s filesystem, which looks local to this machine, and the cluster has %d nodes: the tasks could not write their shards there",
		r.cfg.Output, kind, nodes))
}

// prepareDir makes the shard directory, or checks that the one there was
// left by a run with the same Job, and writes job.json. made says the
// directory is this run's own: there was none, or Config.Force emptied it.
func (r *Run) prepareDir() (made bool, err error) {
	want, _ := json.MarshalIndent(r.cfg.Job, "", "  ")
	meta := filepath.Join(r.dir, "job.json")
	have, err := os.ReadFile(meta)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(r.dir); err == nil && !r.cfg.Force {
			return false, remedyError(Input, RemoveOrForce, fmt.Errorf("%s exists but holds no job.json", r.dir))
		} else if err != nil {
			made = true
		}
	case err != nil:
		return false, kindError(Input, err)
	case r.cfg.Force:
		if err := os.RemoveAll(r.dir); err != nil {
			return false, err
		}
		made = true
	case !bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(want)):
		return false, remedyError(Input, ForceOrOtherOutput, fmt.Errorf("%s holds the shards of a run with other arguments (see its job.json)", r.dir))
	case !r.cfg.Resume:
		return false, remedyError(Input, ResumeOrForce, fmt.Errorf("%s holds the shards of an earlier run of this command", r.dir))
	}
	if err := os.MkdirAll(r.dir, 0o777); err != nil {
		return false, kindError(Input, err)
	}
	if err := results.ReplaceFile(meta, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(want, '\n'))
		return err
	}); err != nil {
		if made {
			os.RemoveAll(r.dir)
		}
		return false, err
	}
	return made, nil
}

// TaskLog is the log of task i's attempt in array job job: each attempt
// keeps its own.
func (r *Run) TaskLog(i int, job string) string {
	return filepath.Join(r.dir, fmt.Sprintf("task-%d.job-%s.log", i, job))
}

// scriptPath is the job script's file, which a resubmission submits again.
func (r *Run) scriptPath() string { return filepath.Join(r.dir, "job.sh") }

// writeScript writes the job script: task i runs shard i/N with --resume.
func (r *Run) writeScript() (string, error) {
	cwd := r.cfg.Workdir
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	job := r.cfg.Job
	n := job.Tasks
	words := []string{slurm.Quote(r.cfg.Harness), slurm.Quote(job.Command)}
	for _, a := range job.Args {
		words = append(words, slurm.Quote(a))
	}
	words = append(words, `--shard "$i/`+strconv.Itoa(n)+`"`, "--resume", "--progress", "-o", slurm.Quote(r.dir)+`/shard-"$i".jsonl`, "--")
	for _, a := range job.Agent {
		words = append(words, slurm.Quote(a))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# harness --slurm: array task i runs shard i of %d, continuing what an\n# earlier attempt of it wrote.\n", n)
	// Each attempt of a task (a resubmission is an array job of its own)
	// keeps its log; a requeue of the same job appends to it.
	fmt.Fprintf(&b, "#SBATCH --job-name=harness-%s\n#SBATCH --output=%s/task-%%a.job-%%A.log\n#SBATCH --open-mode=append\n#SBATCH --chdir=%s\n", job.Command, r.dir, cwd)
	// A task Slurm requeues itself (preemption) starts the script again
	// and continues its shard; a minute before a time limit harness is
	// told to stop, so the units in flight end as interrupted, not killed.
	b.WriteString("#SBATCH --requeue\n#SBATCH --signal=B:TERM@60\n")
	b.WriteString("i=${SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}\n")
	b.WriteString("exec " + strings.Join(words, " ") + "\n")
	path := r.scriptPath()
	if err := results.ReplaceFile(path, 0o755, func(w io.Writer) error { _, err := io.WriteString(w, b.String()); return err }); err != nil {
		return "", err
	}
	return path, nil
}
