package array

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"harness/results"
	"harness/schemas"
	"harness/slurm"
)

// taskState is what the watcher knows of one task.
type taskState struct {
	job      string // the job id of its latest attempt (the array job, or its own)
	attempts int
	done     bool
	failed   bool
	last     string
}

// Watch says which job it watches, then follows the tasks of the array job
// id until each is done or given up, resubmitting a task that failed, was cancelled or lost its node up
// to Retries times, and logging a progress line whenever it changes. Tasks
// given up are an error of Kind GivenUp; a context that ends cancels every
// job of the run (scancel) and is an error of Kind Interrupted.
func (r *Run) Watch(ctx context.Context, id string) error {
	n, retries := r.cfg.Job.Tasks, r.cfg.Retries
	r.logf("submitted array job %s: %d tasks, shards in %s\n", id, n, r.dir)
	tasks := map[int]*taskState{}
	jobs := []string{id}
	for i := 1; i <= n; i++ {
		tasks[i] = &taskState{job: id, attempts: 1}
	}
	units := r.units()
	var count counter
	lastLine := ""
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for {
		states := map[string]map[int]slurm.Task{}
		for _, j := range jobs {
			ts, err := r.cfg.Client.Tasks(context.Background(), j)
			if err != nil {
				r.logf("harness: asking Slurm about job %s: %v\n", j, err)
				ts = nil
			}
			states[j] = ts
		}
		var pending, running, done, failed int
		var given []int
		for i := 1; i <= n; i++ {
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
			if st.State == "COMPLETED" || (st.State == "FAILED" && slices.Contains(r.cfg.Completed, st.ExitCode)) {
				t.done = true
				done++
				continue
			}
			t.last = st.State
			if st.ExitCode > 0 {
				t.last += fmt.Sprintf(" (exit %d)", st.ExitCode)
			}
			if t.attempts > retries {
				t.failed = true
				failed++
				given = append(given, i)
				r.logf("harness: task %d %s; given up after %d attempt(s); its log: %s\n", i, t.last, t.attempts, r.TaskLog(i, t.job))
				continue
			}
			again, err := r.cfg.Client.Submit(context.Background(), r.scriptPath(), strconv.Itoa(i), r.cfg.Opts)
			if err != nil {
				return kindError(Input, fmt.Errorf("resubmitting task %d: sbatch: %w", i, err))
			}
			r.recordJob(again)
			jobs = append(jobs, again)
			t.job, t.attempts = again, t.attempts+1
			pending++
			r.logf("harness: task %d %s; resubmitted as job %s (attempt %d of %d), continuing its shard\n", i, t.last, again, t.attempts, retries+1)
		}
		line := fmt.Sprintf("slurm: %d of %d units in the shards; tasks: %d pending, %d running, %d done, %d failed", count.count(r.Shards()), units, pending, running, done, failed)
		if line != lastLine {
			r.logf("%s\n", line)
			lastLine = line
		}
		if done+failed == n {
			if len(given) > 0 {
				return remedyError(GivenUp, ResumeLater, fmt.Errorf("%s of %d failed %d time(s) and were given up: %s; every shard is kept in %s",
					plural(len(given), "task"), n, retries+1, joinInts(given), r.dir))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			r.cfg.Client.Cancel(context.Background(), jobs...)
			return remedyError(Interrupted, ResumeToContinue, fmt.Errorf("interrupted: cancelled job %s (scancel); the shards are kept in %s",
				strings.Join(jobs, ", "), r.dir))
		case <-tick.C:
		}
	}
}

func (r *Run) logf(format string, a ...any) {
	fmt.Fprintf(r.cfg.Log, format, a...)
}

// units is how many units the run has: cases times K; 0 when the prompts
// cannot be read.
func (r *Run) units() int {
	in, err := results.Open(r.cfg.Prompts, nil)
	if err != nil {
		return 0
	}
	defer in.Close()
	cases, err := schemas.ReadPrompts(r.cfg.Prompts, in)
	if err != nil {
		return 0
	}
	return len(cases) * max(r.cfg.K, 1)
}

// counter counts the records in the shard files as they grow, reading
// each file only past where it read last time.
type counter struct {
	files map[string]*fileCount
}

type fileCount struct {
	offset int64
	lines  int
}

func (c *counter) count(files []string) int {
	if c.files == nil {
		c.files = map[string]*fileCount{}
	}
	buf := make([]byte, 64<<10)
	total := 0
	for _, name := range files {
		fc := c.files[name]
		if fc == nil {
			fc = &fileCount{}
			c.files[name] = fc
		}
		if f, err := os.Open(name); err == nil {
			if st, err := f.Stat(); err == nil && st.Size() < fc.offset {
				*fc = fileCount{} // started over: count it again
			}
			if _, err := f.Seek(fc.offset, io.SeekStart); err == nil {
				for {
					n, err := f.Read(buf)
					fc.lines += bytes.Count(buf[:n], []byte("\n"))
					fc.offset += int64(n)
					if err != nil {
						break
					}
				}
			}
			f.Close()
		}
		total += fc.lines
	}
	return total
}

// plural writes a count and a noun, with an s when the count is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func joinInts(xs []int) string {
	sort.Ints(xs)
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}
