package array

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"harness/slurm"
)

// fakeSlurm is a cluster in memory: job ids are handed out from 1, and
// states says what Tasks answers for a job on its call-th poll.
type fakeSlurm struct {
	states    func(job string, call int) map[int]slurm.Task
	nodes     int
	reject    error
	calls     map[string]int
	submitted []string // "ARRAY SCRIPT" of every sbatch
	cancelled []string
	next      int
}

func (f *fakeSlurm) Submit(_ context.Context, script, array string, _ []string) (string, error) {
	if f.reject != nil {
		return "", f.reject
	}
	f.next++
	f.submitted = append(f.submitted, array+" "+filepath.Base(script))
	return strconv.Itoa(f.next), nil
}

func (f *fakeSlurm) Tasks(_ context.Context, job string) (map[int]slurm.Task, error) {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	call := f.calls[job]
	f.calls[job]++
	return f.states(job, call), nil
}

func (f *fakeSlurm) Cancel(_ context.Context, ids ...string) error {
	f.cancelled = append(f.cancelled, ids...)
	return nil
}

func (f *fakeSlurm) Nodes(context.Context) (int, error) { return f.nodes, nil }

func task(state string, exit int) slurm.Task { return slurm.Task{State: state, ExitCode: exit} }

// newRun sets up a trials run of n tasks, k 2, over two cases in a fresh
// directory, logging to the returned buffer.
func newRun(t *testing.T, n, retries int, f *fakeSlurm) (*Run, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	prompts := filepath.Join(dir, "p.jsonl")
	if err := os.WriteFile(prompts, []byte("{\"id\":\"a\",\"input\":\"x\"}\n{\"id\":\"b\",\"input\":\"y\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r, err := New(Config{
		Job:     Job{Command: "trials", Args: []string{prompts, "--k=2"}, Agent: []string{"agent"}, Tasks: n},
		Harness: "/bin/harness", Prompts: prompts, Output: filepath.Join(dir, "out.jsonl"), K: 2,
		Workdir: dir, Retries: retries, Poll: time.Millisecond, Completed: []int{1, 3},
		Client: f, Log: &log, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, &log
}

// submit submits the run, which must take job id 1.
func submit(t *testing.T, r *Run) {
	t.Helper()
	if id, err := r.Submit(context.Background()); err != nil || id != "1" {
		t.Fatalf("submit: %q %v", id, err)
	}
}

// A cancelled task is resubmitted alone, from the same script, as attempt
// 2; the new job is watched and recorded, and the run ends when it
// completes.
func TestWatchResubmitsCancelled(t *testing.T) {
	f := &fakeSlurm{states: func(job string, call int) map[int]slurm.Task {
		switch {
		case job == "1" && call == 0:
			return map[int]slurm.Task{1: task("RUNNING", 0), 2: task("RUNNING", 0)}
		case job == "1":
			return map[int]slurm.Task{1: task("CANCELLED", 0), 2: task("COMPLETED", 0)}
		case job == "2" && call == 0:
			return map[int]slurm.Task{1: task("PENDING", 0)}
		}
		return map[int]slurm.Task{1: task("COMPLETED", 0)}
	}}
	r, log := newRun(t, 2, 1, f)
	submit(t, r)
	if err := r.Watch(context.Background(), "1"); err != nil {
		t.Fatalf("watch: %v\n%s", err, log)
	}
	if !strings.Contains(log.String(), "harness: task 1 CANCELLED; resubmitted as job 2 (attempt 2 of 2), continuing its shard\n") {
		t.Errorf("log:\n%s", log)
	}
	if got := strings.Join(f.submitted, "; "); got != "1-2 job.sh; 1 job.sh" {
		t.Errorf("submitted %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Dir(), "jobs.txt")); string(b) != "2026-01-02T03:04:05Z 1\n2026-01-02T03:04:05Z 2\n" {
		t.Errorf("jobs.txt:\n%s", b)
	}
	if len(f.cancelled) > 0 {
		t.Errorf("cancelled %v", f.cancelled)
	}
}

// A task that fails past the retries is given up, with its log named; a
// task that exited with a status of Completed is done. The error lists
// the tasks given up and how to finish.
func TestWatchGivesUp(t *testing.T) {
	f := &fakeSlurm{states: func(job string, _ int) map[int]slurm.Task {
		if job == "1" {
			return map[int]slurm.Task{1: task("FAILED", 2), 2: task("FAILED", 3), 3: task("COMPLETED", 0)}
		}
		return map[int]slurm.Task{1: task("NODE_FAIL", 0)}
	}}
	r, log := newRun(t, 3, 1, f)
	submit(t, r)
	err := r.Watch(context.Background(), "1")
	if KindOf(err) != GivenUp {
		t.Fatalf("watch: %v (kind %d)", err, KindOf(err))
	}
	want := "1 task of 3 failed 2 time(s) and were given up: 1; every shard is kept in " + r.Dir()
	if err.Error() != want || RemedyOf(err) != ResumeLater {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	for _, line := range []string{
		"harness: task 1 FAILED (exit 2); resubmitted as job 2 (attempt 2 of 2), continuing its shard\n",
		"harness: task 1 NODE_FAIL; given up after 2 attempt(s); its log: " + filepath.Join(r.Dir(), "task-1.job-2.log") + "\n",
		"tasks: 0 pending, 0 running, 2 done, 1 failed\n",
	} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("no %q in the log:\n%s", line, log)
		}
	}
	if len(f.submitted) != 2 {
		t.Errorf("submitted %v", f.submitted)
	}
}

// With no retries the first failure is given up.
func TestWatchNoRetries(t *testing.T) {
	f := &fakeSlurm{states: func(string, int) map[int]slurm.Task {
		return map[int]slurm.Task{1: task("TIMEOUT", 0)}
	}}
	r, _ := newRun(t, 1, 0, f)
	submit(t, r)
	if err := r.Watch(context.Background(), "1"); KindOf(err) != GivenUp || !strings.HasPrefix(err.Error(), "1 task of 1 failed 1 time(s) and were given up: 1;") {
		t.Errorf("watch: %v", err)
	}
	if len(f.submitted) != 1 {
		t.Errorf("submitted %v", f.submitted)
	}
}

// A context that ends cancels every job of the run, the resubmitted ones
// too, and says how to continue.
func TestWatchInterruptCancelsEveryJob(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeSlurm{states: func(job string, _ int) map[int]slurm.Task {
		if job == "1" {
			return map[int]slurm.Task{1: task("FAILED", 2), 2: task("RUNNING", 0)}
		}
		cancel() // the second job is being watched: interrupt
		return map[int]slurm.Task{1: task("RUNNING", 0)}
	}}
	r, _ := newRun(t, 2, 1, f)
	submit(t, r)
	err := r.Watch(ctx, "1")
	if KindOf(err) != Interrupted {
		t.Fatalf("watch: %v", err)
	}
	want := "interrupted: cancelled job 1, 2 (scancel); the shards are kept in " + r.Dir()
	if err.Error() != want || RemedyOf(err) != ResumeToContinue {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	if got := strings.Join(f.cancelled, ","); got != "1,2" {
		t.Errorf("cancelled %s", got)
	}
}

// The progress line counts the units in the shards out of cases × k and
// the tasks by state (one Slurm does not list is pending); it is logged
// only when it changes.
func TestWatchProgress(t *testing.T) {
	var r *Run
	appendShard := func(i int, s string) {
		f, err := os.OpenFile(r.Shards()[i-1], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	f := &fakeSlurm{states: func(_ string, call int) map[int]slurm.Task {
		switch call {
		case 0, 1:
			return map[int]slurm.Task{2: task("RUNNING", 0)}
		case 2:
			appendShard(1, "{}\n")
			return map[int]slurm.Task{1: task("RUNNING", 0), 2: task("COMPLETED", 0)}
		}
		appendShard(1, "{}\n")
		return map[int]slurm.Task{1: task("COMPLETED", 0), 2: task("COMPLETED", 0)}
	}}
	r, log := newRun(t, 2, 1, f)
	submit(t, r)
	appendShard(2, "{}\n{}\n")
	if err := r.Watch(context.Background(), "1"); err != nil {
		t.Fatal(err)
	}
	want := "submitted array job 1: 2 tasks, shards in " + r.Dir() + "\n" +
		"slurm: 2 of 4 units in the shards; tasks: 1 pending, 1 running, 0 done, 0 failed\n" +
		"slurm: 3 of 4 units in the shards; tasks: 0 pending, 1 running, 1 done, 0 failed\n" +
		"slurm: 4 of 4 units in the shards; tasks: 0 pending, 0 running, 2 done, 0 failed\n"
	if log.String() != want {
		t.Errorf("log\n%s\nwant\n%s", log, want)
	}
}

// The job script as the tasks run it: shard i of N, --resume, requeue and
// a stop signal before the time limit, every word quoted for the shell.
func TestScript(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o u.jsonl")
	r, err := New(Config{
		Job:     Job{Command: "trials", Args: []string{"/p/p s.jsonl", "--k=3", "--grader=/g/it's.py"}, Agent: []string{"fakeagent", "--x", "a b"}, Tasks: 3},
		Harness: "/bin/harness", Prompts: "/p/p s.jsonl", Output: out, K: 3, Workdir: "/srv/my runs",
		Client: &fakeSlurm{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.prepareDir(); err != nil {
		t.Fatal(err)
	}
	path, err := r.writeScript()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	d := out + ".shards"
	want := `#!/bin/sh
# harness --slurm: array task i runs shard i of 3, continuing what an
# earlier attempt of it wrote.
#SBATCH --job-name=harness-trials
#SBATCH --output=` + d + `/task-%a.job-%A.log
#SBATCH --open-mode=append
#SBATCH --chdir=/srv/my runs
#SBATCH --requeue
#SBATCH --signal=B:TERM@60
i=${SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}
exec /bin/harness trials '/p/p s.jsonl' --k=3 '--grader=/g/it'\''s.py' --shard "$i/3" --resume --progress -o '` + d + `'/shard-"$i".jsonl -- fakeagent --x 'a b'
`
	if string(b) != want {
		t.Errorf("script\n%s\nwant\n%s", b, want)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("script mode: %v %v", st.Mode(), err)
	}
	meta, _ := os.ReadFile(filepath.Join(d, "job.json"))
	wantMeta := `{
  "command": "trials",
  "args": [
    "/p/p s.jsonl",
    "--k=3",
    "--grader=/g/it's.py"
  ],
  "agent": [
    "fakeagent",
    "--x",
    "a b"
  ],
  "tasks": 3
}
`
	if string(meta) != wantMeta {
		t.Errorf("job.json\n%s\nwant\n%s", meta, wantMeta)
	}
	if got, want := strings.Join(r.Shards(), " "), d+"/shard-1.jsonl "+d+"/shard-2.jsonl "+d+"/shard-3.jsonl"; got != want {
		t.Errorf("shards\n%s\nwant\n%s", got, want)
	}
}

// The script and job.json replace a link planted in their place, never
// writing through it.
func TestScriptReplacesLink(t *testing.T) {
	f := &fakeSlurm{}
	r, _ := newRun(t, 1, 0, f)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("victim\n"), 0o644)
	os.MkdirAll(r.Dir(), 0o777)
	os.Symlink(victim, filepath.Join(r.Dir(), "job.sh"))
	r.cfg.Force = true
	if _, err := r.Submit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("written through the link: %q", b)
	}
	if st, err := os.Lstat(r.scriptPath()); err != nil || !st.Mode().IsRegular() {
		t.Errorf("job.sh: %v %v", st, err)
	}
}

// The shard directory of another run, of an earlier run without --resume,
// or without job.json is refused; --resume continues the same run and
// --force starts over.
func TestPrepareDir(t *testing.T) {
	f := &fakeSlurm{}
	r, _ := newRun(t, 2, 1, f)
	if made, err := r.prepareDir(); err != nil || !made {
		t.Fatalf("a new directory: made %v, %v", made, err)
	}
	os.WriteFile(r.Shards()[0], []byte("{}\n"), 0o644)
	refused := func(_ bool, err error, msg string, remedy Remedy) {
		t.Helper()
		if KindOf(err) != Input || err.Error() != r.Dir()+msg || RemedyOf(err) != remedy {
			t.Errorf("%v (kind %d, remedy %d), want %s (remedy %d)", err, KindOf(err), RemedyOf(err), msg, remedy)
		}
	}
	made, err := r.prepareDir()
	refused(made, err, " holds the shards of an earlier run of this command", ResumeOrForce)
	r.cfg.Resume = true
	if made, err := r.prepareDir(); err != nil || made {
		t.Errorf("--resume: made %v, %v", made, err)
	}
	r.cfg.Job.Args = append(r.cfg.Job.Args, "--j=2")
	made, err = r.prepareDir()
	refused(made, err, " holds the shards of a run with other arguments (see its job.json)", ForceOrOtherOutput)
	r.cfg.Force = true
	if made, err := r.prepareDir(); err != nil || !made {
		t.Errorf("--force: made %v, %v", made, err)
	}
	if _, err := os.Stat(r.Shards()[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--force kept the shard: %v", err)
	}
	os.Remove(filepath.Join(r.Dir(), "job.json"))
	r.cfg.Force = false
	made, err = r.prepareDir()
	refused(made, err, " exists but holds no job.json", RemoveOrForce)
}

// sbatch's own message when it rejects the job. No job exists, so the
// submission leaves no shard directory: the corrected command goes
// through without --resume or --force.
func TestSubmitRejected(t *testing.T) {
	f := &fakeSlurm{reject: errors.New("sbatch: error: invalid partition specified: x")}
	r, _ := newRun(t, 2, 1, f)
	if _, err := r.Submit(context.Background()); KindOf(err) != Input || err.Error() != "sbatch rejected the job: sbatch: error: invalid partition specified: x" {
		t.Errorf("%v", err)
	}
	if _, err := os.Lstat(r.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rejected submission left %s: %v", r.Dir(), err)
	}
	f.reject = nil
	submit(t, r)
	if _, err := os.Stat(filepath.Join(r.Dir(), "job.json")); err != nil {
		t.Error(err)
	}
}

// A rejected resubmission of an earlier run (--resume) keeps that run's
// shards and its record of jobs.
func TestSubmitRejectedKeepsEarlierShards(t *testing.T) {
	f := &fakeSlurm{}
	r, _ := newRun(t, 2, 1, f)
	submit(t, r)
	os.WriteFile(r.Shards()[0], []byte("{}\n"), 0o644)
	r.cfg.Resume = true
	f.reject = errors.New("sbatch: error: Batch job submission failed: Invalid account")
	if _, err := r.Submit(context.Background()); KindOf(err) != Input {
		t.Fatalf("%v", err)
	}
	for _, p := range []string{r.Shards()[0], filepath.Join(r.Dir(), "job.json"), filepath.Join(r.Dir(), "jobs.txt")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a rejected --resume removed %s: %v", p, err)
		}
	}
}

// An output that became a link while the job ran is refused; one that
// was a link before, and still is the same, is not.
func TestCheckOutput(t *testing.T) {
	r, _ := newRun(t, 2, 1, &fakeSlurm{})
	if err := r.CheckOutput(); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim.txt")
	os.Symlink(victim, r.cfg.Output)
	err := r.CheckOutput()
	if KindOf(err) != OutputLinked || err.Error() != r.cfg.Output+" became a link to "+victim+" while the job ran: nothing was merged (the shards are kept in "+r.Dir()+")" || RemedyOf(err) != RemoveAndMerge {
		t.Errorf("%v", err)
	}
	r2, err := New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.CheckOutput(); err != nil {
		t.Errorf("a link from the start: %v", err)
	}
}

// An output on a filesystem that looks local, with a cluster of several
// nodes, is refused with what to do; one node, or Shared, is fine.
func TestOutputNotShared(t *testing.T) {
	f := &fakeSlurm{nodes: 3}
	r, _ := newRun(t, 2, 1, f)
	err := r.checkShared(context.Background())
	if isLocal(t, filepath.Dir(r.cfg.Output)) {
		if KindOf(err) != Input || !strings.Contains(err.Error(), "looks local to this machine, and the cluster has 3 nodes") || RemedyOf(err) != SharedOutput {
			t.Errorf("local filesystem, 3 nodes: %v", err)
		}
	} else if err != nil {
		t.Errorf("a filesystem that is not local: %v", err)
	}
	f.nodes = 1
	if err := r.checkShared(context.Background()); err != nil {
		t.Errorf("one node: %v", err)
	}
	f.nodes = 3
	r.cfg.Shared = true
	if err := r.checkShared(context.Background()); err != nil {
		t.Errorf("shared: %v", err)
	}
}

// isLocal says whether dir's filesystem type is one localFS names.
func isLocal(t *testing.T, dir string) bool {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	_, ok := localFS(int64(st.Type))
	return ok
}

// The progress count reads only what the shards gained since the last poll,
// and starts over for a shard that was emptied.
func TestCounter(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("1\n2\n"), 0o644)
	var c counter
	if n := c.count([]string{a, b}); n != 2 {
		t.Fatalf("first count %d", n)
	}
	f, _ := os.OpenFile(a, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("3\n")
	f.Close()
	os.WriteFile(b, []byte("x\n"), 0o644)
	if n := c.count([]string{a, b}); n != 4 || c.files[a].offset != 6 {
		t.Errorf("after growth %d (offset %d)", n, c.files[a].offset)
	}
	os.WriteFile(a, []byte("9\n"), 0o644)
	if n := c.count([]string{a, b}); n != 2 {
		t.Errorf("after a shard started over: %d", n)
	}
}

// A FIFO planted at the output while the job ran is refused: the merge
// would block on it forever, or write into whatever reads it.
func TestCheckOutputRefusesAFIFO(t *testing.T) {
	r, _ := newRun(t, 2, 1, &fakeSlurm{})
	if err := syscall.Mkfifo(r.cfg.Output, 0o600); err != nil {
		t.Fatal(err)
	}
	err := r.CheckOutput()
	if KindOf(err) != OutputLinked || !strings.HasPrefix(err.Error(), r.cfg.Output+" became a FIFO while the job ran: nothing was merged") {
		t.Errorf("%v", err)
	}
}
