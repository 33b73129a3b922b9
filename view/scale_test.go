package view

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// The scale of harness view: a run of 10,000 trials (2,000 cases × 5) whose
// trajectories weigh 1 GB in all, and one trajectory of 100,000 steps.
//
//	go test -run XXX -bench ViewScale -benchtime 1x ./view/
//
// prints the time to index the run and serve the grid's first page, to
// sort and filter its 10,000 rows, to serve the first screen of the long
// trajectory, and the server's heap after indexing. TestViewScale runs the
// same on a smaller run (100 MB) and checks the results and the memory.

// scaleRun describes a generated run.
type scaleRun struct {
	cases, k      int
	stepsPerTrial int
	stepBytes     int
}

// trajectoryJSON is the JSON of a trajectory of n steps of about size
// bytes each: thoughts, messages, tool calls with input and output.
func trajectoryJSON(id string, trial, n, size int) []byte {
	rec := synthRecord(id, trial, true, n, size)
	b, err := results.Marshal(rec.Trajectory)
	if err != nil {
		panic(err)
	}
	return b
}

// writeScaleRun writes a trials file of the run into dir and returns its
// path and size.
func writeScaleRun(t testing.TB, dir string, s scaleRun) (string, int64) {
	t.Helper()
	p := filepath.Join(dir, "trials.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	// One trajectory's bytes, spliced into every trial: what is indexed
	// is the same as with distinct ones, and it writes fast.
	traj := trajectoryJSON("case", 1, s.stepsPerTrial, s.stepBytes)
	placeholder := []byte(`"trajectory":[]`)
	withTraj := append([]byte(`"trajectory":`), traj...)
	for i := range s.cases {
		id := fmt.Sprintf("case-%05d", i)
		recs := make([]schemas.CaptureRecord, s.k)
		for tr := 1; tr <= s.k; tr++ {
			pass := true
			switch i % 10 {
			case 3:
				pass = tr%2 == 1
			case 9:
				pass = false
			}
			recs[tr-1] = synthRecord(id, tr, pass, 0, 0)
			recs[tr-1].Trajectory = []schemas.Step{}
			if i%10 == 4 {
				recs[tr-1].Score = nil
				recs[tr-1].Error = &schemas.ErrorInfo{Class: schemas.ErrAgentCrash, Message: "the agent exited"}
			}
		}
		tr := trials.BuildRecord(schemas.PromptCase{ID: id, Input: recs[0].Input, Expected: "tests pass", Metadata: recs[0].Metadata}, s.k, recs)
		b, err := results.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, placeholder, withTraj)
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()
	return p, st.Size()
}

// writeLongTrajectory writes one capture record of n steps.
func writeLongTrajectory(t testing.TB, dir string, n int) string {
	t.Helper()
	p := filepath.Join(dir, "long.jsonl")
	writeRecords(t, p, synthRecord("long", 1, false, n, 200))
	return p
}

// scaleFigures are what one measurement found.
type scaleFigures struct {
	bytes int64
	// the CPU time (user and system) the same steps took: on a machine
	// shared with other work, wall times measure the others too.
	cpuIndex, cpuGrid, cpuSort, cpuFirstSteps time.Duration
	bytesLong                                 int64
	index, firstPage, openGrid                time.Duration
	sort, filter, text                        time.Duration
	trialHead, firstSteps                     time.Duration
	heapInuse, sys                            uint64
	rows                                      int
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measureScale(t testing.TB, s scaleRun) scaleFigures {
	dir := t.TempDir()
	_, size := writeScaleRun(t, dir, s)
	long := writeLongTrajectory(t, dir, 100_000)
	runtime.GC()
	var f scaleFigures
	f.bytes = size
	if st, err := os.Stat(long); err == nil {
		f.bytesLong = st.Size()
	}

	start, cpu0 := time.Now(), cpuTime()
	ix, err := New(Options{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ix.Scan()
	f.index, f.cpuIndex = time.Since(start), cpuTime()-cpu0
	ts := serve(t, ix, ServerOptions{})
	mid := time.Now()
	var page Page
	if code := getJSON(t, ts, "/api/source?src=trials.jsonl", nil); code != http.StatusOK {
		t.Fatalf("source: %d", code)
	}
	if code := getJSON(t, ts, "/api/rows?src=trials.jsonl&limit=200", &page); code != http.StatusOK {
		t.Fatalf("rows: %d", code)
	}
	f.firstPage = time.Since(mid)
	f.openGrid, f.cpuGrid = time.Since(start), cpuTime()-cpu0
	f.rows = page.Total
	if page.Total != s.cases*s.k || len(page.Rows) != 200 {
		t.Fatalf("grid: %d rows of %d, want 200 of %d", len(page.Rows), page.Total, s.cases*s.k)
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f.heapInuse, f.sys = ms.HeapInuse, ms.Sys

	ix.mu.RLock()
	src := ix.sources["trials.jsonl"]
	timeQuery := func(q Query) time.Duration {
		start := time.Now()
		p := src.query(q, nil)
		d := time.Since(start)
		if p.Matched == 0 {
			t.Fatalf("query %+v matched nothing", q)
		}
		return d
	}
	cpu1 := cpuTime()
	f.sort = timeQuery(Query{Sort: "duration", Desc: true, Limit: 200})
	f.cpuSort = cpuTime() - cpu1
	f.filter = timeQuery(Query{Status: []string{"fail", "flaky"}, Sort: "cost", Limit: 200})
	f.text = timeQuery(Query{Text: "case-01", Limit: 200})
	ix.mu.RUnlock()

	start, cpu0 = time.Now(), cpuTime()
	var d trialDetail
	if code := getJSON(t, ts, "/api/trial?src=long.jsonl&id=long&trial=1", &d); code != http.StatusOK {
		t.Fatalf("trial: %d", code)
	}
	f.trialHead = time.Since(start)
	var steps struct {
		Total int       `json:"total"`
		Steps []rawStep `json:"steps"`
	}
	if code := getJSON(t, ts, "/api/steps?src=long.jsonl&id=long&trial=1&from=0&limit=100", &steps); code != http.StatusOK {
		t.Fatalf("steps: %d", code)
	}
	f.firstSteps, f.cpuFirstSteps = time.Since(start), cpuTime()-cpu0
	if d.Steps != 100_000 || steps.Total != 100_000 || len(steps.Steps) != 100 {
		t.Fatalf("long trajectory: %d steps, page of %d", steps.Total, len(steps.Steps))
	}
	return f
}

// rawStep is a step as the API serves it.
type rawStep = map[string]any

func (f scaleFigures) log(t testing.TB) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	t.Logf("%d trials, %.0f MB of records (and a %.0f MB trajectory): indexed in %s (CPU %s); first page of the grid %s; grid usable %s after start (CPU %s)",
		f.rows, float64(f.bytes)/1e6, float64(f.bytesLong)/1e6, ms(f.index), ms(f.cpuIndex), ms(f.firstPage), ms(f.openGrid), ms(f.cpuGrid))
	t.Logf("sort 10,000 rows by duration %v (CPU %v); filter failed/flaky sorted by cost %v; text filter %v",
		f.sort.Round(time.Microsecond), f.cpuSort.Round(time.Microsecond), f.filter.Round(time.Microsecond), f.text.Round(time.Microsecond))
	t.Logf("100,000-step trajectory: record %s, first 100 steps %s after the click (CPU %s)", ms(f.trialHead), ms(f.firstSteps), ms(f.cpuFirstSteps))
	t.Logf("heap in use after indexing %.1f MB (runtime Sys %.1f MB)", float64(f.heapInuse)/(1<<20), float64(f.sys)/(1<<20))
}

// TestViewScale: 10,000 trials with 100 MB of trajectories index whole,
// serve their grid and a 100,000-step trajectory, and the heap stays under
// 150 MB. (Times are logged, not checked: they are the benchmark's.)
func TestViewScale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 10,000-trial run")
	}
	f := measureScale(t, scaleRun{cases: 2000, k: 5, stepsPerTrial: 10, stepBytes: 1000})
	f.log(t)
	if f.heapInuse > 150<<20 {
		t.Errorf("heap in use after indexing 10,000 trials: %.1f MB, want < 150 MB", float64(f.heapInuse)/(1<<20))
	}
}

// BenchmarkViewScale measures the scale targets on 10,000 trials with 1 GB
// of trajectories.
func BenchmarkViewScale(b *testing.B) {
	size := scaleRun{cases: 2000, k: 5, stepsPerTrial: 100, stepBytes: 1000}
	if s := os.Getenv("HARNESS_VIEW_BENCH_STEPS"); s != "" {
		size.stepsPerTrial, _ = strconv.Atoi(s)
	}
	for range b.N {
		f := measureScale(b, size)
		f.log(b)
		b.ReportMetric(float64(f.openGrid.Milliseconds()), "ms-grid-usable")
		b.ReportMetric(float64(f.cpuGrid.Milliseconds()), "cpu-ms-grid-usable")
		b.ReportMetric(float64(f.cpuFirstSteps.Milliseconds()), "cpu-ms-first-steps")
		b.ReportMetric(float64(f.sort.Microseconds())/1000, "ms-sort")
		b.ReportMetric(float64(f.filter.Microseconds())/1000, "ms-filter")
		b.ReportMetric(float64(f.firstSteps.Milliseconds()), "ms-first-steps")
		b.ReportMetric(float64(f.heapInuse)/(1<<20), "MB-heap")
	}
}
