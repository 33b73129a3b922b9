package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"harness/results"
	"harness/schemas"
	"harness/slurm"
	"harness/trials"
)

// slurmFlags are the flags that run capture and trials on Slurm.
type slurmFlags struct {
	tasks   int
	opts    []string
	retries int
	detach  bool
	harness string
	shared  bool
	poll    time.Duration
}

func (s *slurmFlags) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&s.tasks, "slurm", 0, "run on Slurm as an array job of `n` tasks, each a shard; then merge into -o")
	fs.StringArrayVar(&s.opts, "slurm-opt", nil, "pass `option` to sbatch (--partition=gpu, --time=2:00:00, --mem=8G...); repeatable")
	fs.IntVar(&s.retries, "slurm-retries", 1, "resubmit a task that failed, was cancelled or lost its node up to `n` times")
	fs.BoolVar(&s.detach, "slurm-detach", false, "submit, print the job id and the merge command, and exit")
	fs.StringVar(&s.harness, "slurm-harness", "", "the harness `binary` the tasks run (default: this one; it must be on a filesystem the nodes share)")
	fs.BoolVar(&s.shared, "slurm-shared", false, "the output's filesystem is shared by the nodes, whatever it looks like")
	fs.DurationVar(&s.poll, "slurm-poll", 2*time.Second, "how often to ask Slurm how the tasks are doing")
}

// slurmOnly are the flags the tasks do not get: harness decides them per
// task, or applies them once to the merged output.
var slurmOnly = []string{"slurm", "slurm-opt", "slurm-retries", "slurm-detach", "slurm-harness", "slurm-shared", "slurm-poll",
	"output", "resume", "force", "shard", "summary", "junit", "markdown", "quiet", "progress", "retry-errors"}

// pathFlags name files or directories, made absolute for the tasks.
var pathFlags = []string{"workspace", "cwd", "prices", "grader", "sandbox-home", "sandbox-ro", "sandbox-rw", "tasks", "cache-dir", "image"}

// slurmJob is the identity of a Slurm run, kept in the shard directory so a
// later run can tell whether it may continue it.
type slurmJob struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Agent   []string `json:"agent"`
	Tasks   int      `json:"tasks"`
}

// slurmRun runs capture or trials on Slurm: one array task per shard, each
// running this harness with the same arguments and --shard i/N --resume;
// it watches them, resubmits the failed ones, and merges the shards into
// the output, ending as a local run would.
type slurmRun struct {
	e       *env
	c       *command
	f       *runFlags
	cmdName string
	k       int
	prompts string // absolute
	agent   []string
	dir     string // <output>.shards
	// outLink is where the output linked to when the run was submitted
	// ("" for no link): the merge refuses a link that appeared since.
	outLink string
	client  *slurm.Client
	// finish applies a trials run's gates to the merged summary.
	finish func(sum schemas.TrialsSummary) error
}

// checkSlurm checks the flags of a --slurm run before anything else is
// read.
func (f *runFlags) checkSlurm(args []string) error {
	s := &f.slurm
	switch {
	case s.tasks == 0:
		return nil
	case s.tasks < 0:
		return usageErrorf("--slurm wants at least 1 task")
	case f.shard != "":
		return usageErrorf("--slurm makes the shards itself: drop --shard")
	case f.output == "" || f.output == "-":
		return usageErrorf("--slurm needs -o FILE: the tasks write shards beside it and the merged output goes there")
	case (len(args) != 1 || args[0] == "-") && !(len(args) == 0 && f.image.tasks != ""):
		return usageErrorf("--slurm needs the prompts as a file the nodes can read, not standard input")
	case s.retries < 0:
		return usageErrorf("--slurm-retries must not be negative")
	}
	if err := slurm.Available(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

func runSlurm(ctx context.Context, r *slurmRun, args []string) error {
	f, s := r.f, &r.f.slurm
	if r.client == nil {
		r.client = &slurm.Client{Run: slurm.Exec}
	}
	out, err := filepath.Abs(f.output)
	if err != nil {
		return err
	}
	f.output = out
	r.outLink = linkTarget(out)
	if len(args) == 0 && f.image.tasks != "" {
		// --tasks without a prompts file: the tasks' cases, beside the
		// output, where every node reads them.
		args = []string{out + ".tasks.jsonl"}
		if err := f.image.writeCases(args[0]); err != nil {
			return err
		}
	}
	if r.prompts, err = filepath.Abs(args[0]); err != nil {
		return err
	}
	r.dir = out + ".shards"
	job, err := r.job()
	if err != nil {
		return err
	}
	harness, err := harnessBinary(s.harness)
	if err != nil {
		return err
	}
	if err := r.checkShared(ctx); err != nil {
		return err
	}
	if err := r.prepareDir(job); err != nil {
		return err
	}
	script, err := r.writeScript(harness, job)
	if err != nil {
		return err
	}
	id, err := r.client.Submit(ctx, script, fmt.Sprintf("1-%d", s.tasks), s.opts)
	if err != nil {
		return inputError(fmt.Errorf("sbatch rejected the job: %w", err))
	}
	r.recordJob(id)
	merge := r.mergeCommand()
	if s.detach {
		fmt.Fprintf(r.e.stdout, "%s\n", id)
		fmt.Fprintf(r.e.stderr, "submitted array job %s: %d tasks writing %s\nwhen it is done: %s\n", id, s.tasks, r.dir, merge)
		return nil
	}
	r.logf("submitted array job %s: %d tasks, shards in %s\n", id, s.tasks, r.dir)
	failed, err := r.watch(ctx, id)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return withCode(exitInfraErrors, fmt.Errorf("%s of %d failed %d time(s) and were given up: %s; every shard is kept in %s; finish later with the same command and --resume (or: %s)",
			plural(len(failed), "task"), s.tasks, s.retries+1, joinInts(failed), r.dir, merge))
	}
	return r.mergeAndFinish(ctx)
}

func (r *slurmRun) logf(format string, a ...any) {
	if !r.f.quiet {
		fmt.Fprintf(r.e.stderr, format, a...)
	}
}

// job is the task command line without its per-task part: the same
// arguments, paths made absolute.
func (r *slurmRun) job() (slurmJob, error) {
	j := slurmJob{Command: r.cmdName, Agent: r.agent, Tasks: r.f.slurm.tasks}
	var err error
	r.c.flags.Visit(func(fl *pflag.Flag) {
		if slices.Contains(slurmOnly, fl.Name) || err != nil {
			return
		}
		vals := []string{fl.Value.String()}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			vals = sv.GetSlice()
		}
		for _, v := range vals {
			if slices.Contains(pathFlags, fl.Name) && v != "" && !((fl.Name == "grader" || fl.Name == "image") && !fileExistsAny(v)) {
				var abs string
				if abs, err = filepath.Abs(v); err != nil {
					return
				}
				v = abs
			}
			j.Args = append(j.Args, "--"+fl.Name+"="+v)
		}
	})
	j.Args = append([]string{r.prompts}, j.Args...)
	return j, err
}

func fileExistsAny(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// harnessBinary is the binary the tasks run: the one named, else the one
// running (by the name it was started with, so a link keeps its name).
func harnessBinary(named string) (string, error) {
	if named != "" {
		abs, err := filepath.Abs(named)
		if err != nil {
			return "", err
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			return "", usageErrorf("--slurm-harness %s: not a file", named)
		}
		return abs, nil
	}
	if p, err := lookArgv0(); err == nil {
		return p, nil
	}
	return os.Executable()
}

func lookArgv0() (string, error) {
	name := os.Args[0]
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", err
		}
		name = p
	}
	return filepath.Abs(name)
}

// localFS are filesystem types that one machine has to itself.
var localFS = map[int64]string{0x01021994: "tmpfs", 0xef53: "ext2/3/4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x794c7630: "overlay", 0x2fc12fc1: "zfs"}

// checkShared refuses an output on a filesystem that looks local to this
// machine when the cluster has more than one node.
func (r *slurmRun) checkShared(ctx context.Context) error {
	if r.f.slurm.shared {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(r.f.output), &st); err != nil {
		return inputError(fmt.Errorf("-o %s: %w", r.f.output, err))
	}
	kind, local := localFS[int64(st.Type)]
	if !local {
		return nil
	}
	nodes, err := r.client.Nodes(ctx)
	if err != nil || nodes <= 1 {
		return nil
	}
	return usageErrorf("-o %s is on a %s filesystem, which looks local to this machine, and the cluster has %d nodes: the tasks could not write their shards there; put -o (and the prompts, graders and harness binary) on a filesystem every node mounts, or say it is shared with --slurm-shared",
		r.f.output, kind, nodes)
}

// prepareDir makes the shard directory, or checks that the one there was
// left by a run with the same arguments.
func (r *slurmRun) prepareDir(job slurmJob) error {
	want, _ := json.MarshalIndent(job, "", "  ")
	meta := filepath.Join(r.dir, "job.json")
	have, err := os.ReadFile(meta)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(r.dir); err == nil && !r.f.force {
			return usageErrorf("%s exists but holds no job.json: remove it, or start over with --force", r.dir)
		}
	case err != nil:
		return inputError(err)
	case r.f.force:
		if err := os.RemoveAll(r.dir); err != nil {
			return err
		}
	case !bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(want)):
		return usageErrorf("%s holds the shards of a run with other arguments (see its job.json): start over with --force, or use another -o", r.dir)
	case !r.f.resume:
		return usageErrorf("%s holds the shards of an earlier run of this command: continue it with --resume, or start over with --force", r.dir)
	}
	if err := os.MkdirAll(r.dir, 0o777); err != nil {
		return inputError(err)
	}
	return results.ReplaceFile(meta, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(want, '\n'))
		return err
	})
}

// writeScript writes the job script: task i runs shard i/N with --resume.
func (r *slurmRun) writeScript(harness string, job slurmJob) (string, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	n := r.f.slurm.tasks
	words := []string{slurm.Quote(harness), slurm.Quote(job.Command)}
	for _, a := range job.Args {
		words = append(words, slurm.Quote(a))
	}
	words = append(words, `--shard "$i/`+strconv.Itoa(n)+`"`, "--resume", "--progress", "-o", slurm.Quote(r.dir)+`/shard-"$i".jsonl`, "--")
	for _, a := range job.Agent {
		words = append(words, slurm.Quote(a))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# harness --slurm: array task i runs shard i of %d, continuing what an\n# earlier attempt of it wrote.\n", n)
	fmt.Fprintf(&b, "#SBATCH --job-name=harness-%s\n#SBATCH --output=%s/task-%%a.log\n#SBATCH --chdir=%s\n", job.Command, r.dir, cwd)
	// A task Slurm requeues itself (preemption) starts the script again
	// and continues its shard; a minute before a time limit harness is
	// told to stop, so the units in flight end as interrupted, not killed.
	b.WriteString("#SBATCH --requeue\n#SBATCH --signal=B:TERM@60\n")
	b.WriteString("i=${SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}\n")
	b.WriteString("exec " + strings.Join(words, " ") + "\n")
	path := filepath.Join(r.dir, "job.sh")
	if err := results.ReplaceFile(path, 0o755, func(w io.Writer) error { _, err := io.WriteString(w, b.String()); return err }); err != nil {
		return "", err
	}
	return path, nil
}

func (r *slurmRun) recordJob(id string) {
	f, err := os.OpenFile(filepath.Join(r.dir, "jobs.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err == nil {
		fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), id)
		f.Close()
	}
}

// shardFiles lists the shard outputs in task order.
func (r *slurmRun) shardFiles() []string {
	var files []string
	for i := 1; i <= r.f.slurm.tasks; i++ {
		files = append(files, filepath.Join(r.dir, fmt.Sprintf("shard-%d.jsonl", i)))
	}
	return files
}

// mergeCommand is the command that merges the shards by hand.
func (r *slurmRun) mergeCommand() string {
	words := []string{"harness", "merge"}
	for _, f := range r.shardFiles() {
		words = append(words, slurm.Quote(f))
	}
	words = append(words, "--prompts", slurm.Quote(r.prompts), "-o", slurm.Quote(r.f.output))
	if r.cmdName == "trials" {
		words = append(words, "-k", strconv.Itoa(r.k))
	}
	return strings.Join(words, " ")
}

// taskState is what the watcher knows of one task.
type taskState struct {
	job      string // the job id of its latest attempt ("ARRAY_i" or own id)
	attempts int
	done     bool
	failed   bool
	last     string
}

// watch follows the tasks until each is done or given up, resubmitting
// failed ones; it returns the indexes given up. An interrupt cancels the
// job.
func (r *slurmRun) watch(ctx context.Context, arrayJob string) ([]int, error) {
	s := &r.f.slurm
	tasks := map[int]*taskState{}
	jobs := []string{arrayJob}
	for i := 1; i <= s.tasks; i++ {
		tasks[i] = &taskState{job: arrayJob, attempts: 1}
	}
	units := r.units()
	var counter shardCounter
	lastLine := ""
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		states := map[string]map[int]slurm.Task{}
		for _, j := range jobs {
			ts, err := r.client.Tasks(context.Background(), j)
			if err != nil {
				r.logf("harness: asking Slurm about job %s: %v\n", j, err)
				ts = nil
			}
			states[j] = ts
		}
		var pending, running, done, failed int
		var given []int
		for i := 1; i <= s.tasks; i++ {
			t := tasks[i]
			if t.done || t.failed {
				if t.done {
					done++
				} else {
					failed++
					given = append(given, i)
				}
				continue
			}
			st, known := states[t.job][i]
			switch {
			case !known:
				// Slurm forgot it (or has not listed it yet): its shard
				// decides, once the attempt is old enough to have run.
				pending++
				continue
			case !st.Terminal():
				if st.State == "PENDING" {
					pending++
				} else {
					running++
				}
				continue
			}
			// Exit 1 (a gate) and 3 (records with infrastructure errors)
			// are runs that completed.
			if st.State == "COMPLETED" || (st.State == "FAILED" && (st.ExitCode == exitInfraErrors || st.ExitCode == exitGateFailed)) {
				t.done = true
				done++
				continue
			}
			t.last = st.State
			if st.ExitCode > 0 {
				t.last += fmt.Sprintf(" (exit %d)", st.ExitCode)
			}
			if t.attempts > s.retries {
				t.failed = true
				failed++
				given = append(given, i)
				r.logf("harness: task %d %s; given up after %d attempt(s); its log: %s\n", i, t.last, t.attempts, filepath.Join(r.dir, fmt.Sprintf("task-%d.log", i)))
				continue
			}
			id, err := r.client.Submit(context.Background(), filepath.Join(r.dir, "job.sh"), strconv.Itoa(i), s.opts)
			if err != nil {
				return nil, inputError(fmt.Errorf("resubmitting task %d: sbatch: %w", i, err))
			}
			r.recordJob(id)
			jobs = append(jobs, id)
			t.job, t.attempts = id, t.attempts+1
			pending++
			r.logf("harness: task %d %s; resubmitted as job %s (attempt %d of %d), continuing its shard\n", i, t.last, id, t.attempts, s.retries+1)
		}
		line := fmt.Sprintf("slurm: %d of %d units in the shards; tasks: %d pending, %d running, %d done, %d failed", counter.count(r.shardFiles()), units, pending, running, done, failed)
		if line != lastLine {
			r.logf("%s\n", line)
			lastLine = line
		}
		if done+failed == s.tasks {
			return given, nil
		}
		select {
		case <-ctx.Done():
			r.client.Cancel(context.Background(), jobs...)
			return nil, withCode(exitInterrupted, fmt.Errorf("interrupted: cancelled job %s (scancel); the shards are kept in %s; the same command with --resume continues where the tasks stopped",
				strings.Join(jobs, ", "), r.dir))
		case <-tick.C:
		}
	}
}

// units is how many units the run has: cases times k.
func (r *slurmRun) units() int {
	in, err := results.Open(r.prompts, nil)
	if err != nil {
		return 0
	}
	defer in.Close()
	cases, err := schemas.ReadPrompts(r.prompts, in)
	if err != nil {
		return 0
	}
	return len(cases) * max(r.k, 1)
}

// shardCounter counts the records in the shard files as they grow, reading
// each file only past where it read last time.
type shardCounter struct {
	files map[string]*shardCount
}

type shardCount struct {
	offset int64
	lines  int
}

func (c *shardCounter) count(files []string) int {
	if c.files == nil {
		c.files = map[string]*shardCount{}
	}
	buf := make([]byte, 64<<10)
	total := 0
	for _, name := range files {
		sc := c.files[name]
		if sc == nil {
			sc = &shardCount{}
			c.files[name] = sc
		}
		if f, err := os.Open(name); err == nil {
			if st, err := f.Stat(); err == nil && st.Size() < sc.offset {
				*sc = shardCount{} // started over: count it again
			}
			if _, err := f.Seek(sc.offset, io.SeekStart); err == nil {
				for {
					n, err := f.Read(buf)
					sc.lines += bytes.Count(buf[:n], []byte("\n"))
					sc.offset += int64(n)
					if err != nil {
						break
					}
				}
			}
			f.Close()
		}
		total += sc.lines
	}
	return total
}

// mergeAndFinish merges the shards into the output and ends as the local
// run would: the summary table, the gates, the exit status.
func (r *slurmRun) mergeAndFinish(ctx context.Context) error {
	if l := linkTarget(r.f.output); l != r.outLink {
		// An agent in a task could reach the output's directory: the
		// merge never writes through a link it planted.
		return withCode(exitForeign, fmt.Errorf("%s became a link to %s while the job ran: nothing was merged (the shards are kept in %s); remove it and merge with: %s", r.f.output, l, r.dir, r.mergeCommand()))
	}
	var files []string
	for _, f := range r.shardFiles() {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return withCode(exitInfraErrors, fmt.Errorf("the tasks wrote no records; their logs are in %s", r.dir))
	}
	argv := append(files, "--prompts", r.prompts, "-o", r.f.output, "--force", "-q")
	if r.cmdName == "trials" {
		argv = append(argv, "-k", strconv.Itoa(r.k))
		if r.f.summaryPath != "" {
			argv = append(argv, "--summary", r.f.summaryPath)
		}
		for _, class := range r.f.failOn {
			argv = append(argv, "--fail-on", class)
		}
	}
	if err := invokeCmd(ctx, r.e, newMergeCmd(), argv); err != nil {
		return fmt.Errorf("merging %s: %w (the shards are kept in %s)", plural(len(files), "shard"), err, r.dir)
	}
	r.logf("merged %s into %s\n", plural(len(files), "shard"), r.f.output)
	var gateErr error
	infra := 0
	if r.cmdName == "trials" {
		summary := r.f.summaryPath
		if summary == "" {
			summary = summaryBeside(r.f.output)
		}
		sum, err := readSummary(summary)
		if err != nil {
			return fmt.Errorf("the merged summary: %w", err)
		}
		if !r.f.quiet {
			trials.WriteSummaryTable(r.e.stderr, *sum)
		}
		for _, v := range sum.Errors {
			infra += v
		}
		if r.finish != nil {
			gateErr = r.finish(*sum)
		}
	} else {
		infra = countErrored(r.f.output)
	}
	if r.f.junit != "" || r.f.markdown != "" {
		if err := writeCIReports(r.f); err != nil {
			return err
		}
	}
	switch {
	case gateErr != nil:
		return gateErr
	case infra > 0:
		return withCode(exitInfraErrors, fmt.Errorf("%d records have infrastructure errors", infra))
	}
	return nil
}

// countErrored counts the records of a capture file with an error.
func countErrored(name string) int {
	in, err := results.Open(name, nil)
	if err != nil {
		return 0
	}
	defer in.Close()
	n := 0
	_, _ = schemas.ReadResults(name, in, func(l schemas.ResultLine) error {
		if l.Capture != nil && l.Capture.Error != nil {
			n++
		}
		return nil
	})
	return n
}

func joinInts(xs []int) string {
	sort.Ints(xs)
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}

// linkTarget is what path links to, or "" when it is not a link.
func linkTarget(path string) string {
	l, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return l
}
