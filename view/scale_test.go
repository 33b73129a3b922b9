package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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

// scaleFigures are what one measurement found. Times are wall times; the
// CPU times (user and system, both processors) of the same steps say what
// they cost on a machine shared with other work.
type scaleFigures struct {
	Bytes, BytesLong int64
	Rows             int
	// FirstPage: from the start until the grid's first page of 200 rows
	// is served (the index fills as it reads); Index: until the whole run
	// is indexed; Page: the first page's query once indexed.
	FirstPage, Index, Page         time.Duration
	CPUFirstPage, CPUIndex         time.Duration
	Sort, Filter, Text, CPUSort    time.Duration
	TrialHead, FirstSteps, CPUStep time.Duration
	HeapInuse, Sys                 uint64
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scaleDirEnv names the directory of a generated run that
// TestViewScaleChild measures: in a process of its own, so the memory of
// generating it is not counted.
const scaleDirEnv = "HARNESS_VIEW_SCALE_DIR"

// measureScale generates the run and measures it in a child process.
func measureScale(t testing.TB, s scaleRun) scaleFigures {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "run"), 0o755)
	os.Mkdir(filepath.Join(dir, "long"), 0o755)
	writeScaleRun(t, filepath.Join(dir, "run"), s)
	writeLongTrajectory(t, filepath.Join(dir, "long"), 100_000)
	cmd := exec.Command(os.Args[0], "-test.run=^TestViewScaleChild$", "-test.v")
	cmd.Env = append(os.Environ(), scaleDirEnv+"="+dir, "HARNESS_VIEW_SCALE_TRIALS="+strconv.Itoa(s.cases*s.k))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("measuring: %v\n%s", err, out)
	}
	i := bytes.Index(out, []byte("SCALE "))
	if i < 0 {
		t.Fatalf("measuring: no figures:\n%s", out)
	}
	line, _, _ := bytes.Cut(out[i+6:], []byte("\n"))
	var f scaleFigures
	if err := json.Unmarshal(line, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestViewScaleChild measures the run in $HARNESS_VIEW_SCALE_DIR and
// prints the figures (run by measureScale).
func TestViewScaleChild(t *testing.T) {
	dir := os.Getenv(scaleDirEnv)
	if dir == "" {
		t.Skip("run by TestViewScale and BenchmarkViewScale")
	}
	want, _ := strconv.Atoi(os.Getenv("HARNESS_VIEW_SCALE_TRIALS"))
	var f scaleFigures
	for _, name := range []string{"run/trials.jsonl", "long/long.jsonl"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "long/long.jsonl" {
			f.BytesLong = st.Size()
		} else {
			f.Bytes = st.Size()
		}
	}
	start, cpu0 := time.Now(), cpuTime()
	ix, err := New(Options{Roots: []string{filepath.Join(dir, "run")}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	scanned := make(chan struct{})
	go func() { ix.Scan(); close(scanned) }()
	ts := serve(t, ix, ServerOptions{})
	// The grid's first page, polled as a page opened at once would.
	for {
		var page Page
		if getJSON(t, ts, "/api/rows?src=trials.jsonl&limit=200", &page) == http.StatusOK && len(page.Rows) == 200 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.FirstPage, f.CPUFirstPage = time.Since(start), cpuTime()-cpu0
	<-scanned
	f.Index, f.CPUIndex = time.Since(start), cpuTime()-cpu0
	mid := time.Now()
	var page Page
	getJSON(t, ts, "/api/source?src=trials.jsonl", nil)
	getJSON(t, ts, "/api/rows?src=trials.jsonl&limit=200", &page)
	f.Page = time.Since(mid)
	f.Rows = page.Total
	if page.Total != want || len(page.Rows) != 200 {
		t.Fatalf("grid: %d rows of %d, want 200 of %d", len(page.Rows), page.Total, want)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f.HeapInuse, f.Sys = ms.HeapInuse, ms.Sys

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
	f.Sort = timeQuery(Query{Sort: "duration", Desc: true, Limit: 200})
	f.CPUSort = cpuTime() - cpu1
	f.Filter = timeQuery(Query{Status: []string{"fail", "flaky"}, Sort: "cost", Limit: 200})
	f.Text = timeQuery(Query{Text: "case-01", Limit: 200})
	ix.mu.RUnlock()

	// The long trajectory, in a viewer of its own.
	lx := newIndex(t, filepath.Join(dir, "long"))
	ts = serve(t, lx, ServerOptions{})
	start, cpu0 = time.Now(), cpuTime()
	var d trialDetail
	if code := getJSON(t, ts, "/api/trial?src=long.jsonl&id=long&trial=1", &d); code != http.StatusOK {
		t.Fatalf("trial: %d", code)
	}
	f.TrialHead = time.Since(start)
	var steps struct {
		Total int       `json:"total"`
		Steps []rawStep `json:"steps"`
	}
	if code := getJSON(t, ts, "/api/steps?src=long.jsonl&id=long&trial=1&from=0&limit=100", &steps); code != http.StatusOK {
		t.Fatalf("steps: %d", code)
	}
	f.FirstSteps, f.CPUStep = time.Since(start), cpuTime()-cpu0
	if d.Steps != 100_000 || steps.Total != 100_000 || len(steps.Steps) != 100 {
		t.Fatalf("long trajectory: %d steps, page of %d", steps.Total, len(steps.Steps))
	}
	b, _ := json.Marshal(f)
	fmt.Printf("SCALE %s\n", b)
}

// rawStep is a step as the API serves it.
type rawStep = map[string]any

func (f scaleFigures) log(t testing.TB) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	t.Logf("%d trials, %.0f MB of records: grid's first page served %s after start (CPU %s); whole run indexed in %s (CPU %s); first page then %s",
		f.Rows, float64(f.Bytes)/1e6, ms(f.FirstPage), ms(f.CPUFirstPage), ms(f.Index), ms(f.CPUIndex), ms(f.Page))
	t.Logf("sort 10,000 rows by duration %v (CPU %v); filter failed/flaky sorted by cost %v; text filter %v",
		f.Sort.Round(time.Microsecond), f.CPUSort.Round(time.Microsecond), f.Filter.Round(time.Microsecond), f.Text.Round(time.Microsecond))
	t.Logf("100,000-step trajectory (%.0f MB): record %s, first 100 steps %s after the click (CPU %s)", float64(f.BytesLong)/1e6, ms(f.TrialHead), ms(f.FirstSteps), ms(f.CPUStep))
	t.Logf("after indexing: heap in use %.1f MB, runtime Sys %.1f MB", float64(f.HeapInuse)/(1<<20), float64(f.Sys)/(1<<20))
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
	if f.HeapInuse > 150<<20 || f.Sys > 150<<20 {
		t.Errorf("after indexing 10,000 trials: heap in use %.1f MB, Sys %.1f MB, want < 150 MB", float64(f.HeapInuse)/(1<<20), float64(f.Sys)/(1<<20))
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
		b.ReportMetric(float64(f.FirstPage.Milliseconds()), "ms-first-page")
		b.ReportMetric(float64(f.Index.Milliseconds()), "ms-index")
		b.ReportMetric(float64(f.CPUIndex.Milliseconds()), "cpu-ms-index")
		b.ReportMetric(float64(f.Sort.Microseconds())/1000, "ms-sort")
		b.ReportMetric(float64(f.Filter.Microseconds())/1000, "ms-filter")
		b.ReportMetric(float64(f.FirstSteps.Milliseconds()), "ms-first-steps")
		b.ReportMetric(float64(f.HeapInuse)/(1<<20), "MB-heap")
		b.ReportMetric(float64(f.Sys)/(1<<20), "MB-sys")
	}
}
