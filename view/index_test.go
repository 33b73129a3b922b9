package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"harness/results"
	"harness/rundir"
	"harness/schemas"
)

// sourceRows returns a source's live rows as "id/trial:status".
func sourceRows(t *testing.T, ix *Index, id string) []string {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s, err := ix.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range s.rows {
		if r != nil {
			out = append(out, fmt.Sprintf("%s/%d:%s", r.ID, r.Trial, r.Status))
		}
	}
	return out
}

func rowOf(t *testing.T, ix *Index, src, id string, trial int) *Row {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s, err := ix.lookup(src)
	if err != nil {
		t.Fatal(err)
	}
	i, ok := s.byKey[unitKey{id, trial}]
	if !ok || s.rows[i] == nil {
		t.Fatalf("%s: no row %s/%d", src, id, trial)
	}
	return s.rows[i]
}

// TestIndexIncremental: a file that grows is read from where the last read
// stopped; a torn last line waits until it is whole; each row's offset
// finds its record again.
func TestIndexIncremental(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.jsonl")
	recs := []schemas.CaptureRecord{synthRecord("a", 1, true, 5, 200), synthRecord("b", 1, false, 7, 300), synthRecord("c", 1, true, 3, 100)}
	writeRecords(t, p, recs[0])
	ix := newIndex(t, dir)
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[a/1:pass]" {
		t.Fatalf("rows after the first line: %v", got)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var line bytes.Buffer
	appendRecords(t, &line, recs[1])
	b := line.Bytes()
	// Half a line: nothing new.
	f.Write(b[:len(b)/2])
	ix.Poll()
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[a/1:pass]" {
		t.Fatalf("a torn line made rows: %v", got)
	}
	ix.mu.RLock()
	fl := ix.files[p]
	ix.mu.RUnlock()
	first := fl.off
	// The rest of the line, and one more.
	f.Write(b[len(b)/2:])
	appendRecords(t, f, recs[2])
	ix.Poll()
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[a/1:pass b/1:fail c/1:pass]" {
		t.Fatalf("rows after the line was completed: %v", got)
	}
	// The read went on from the first line's end.
	if r := rowOf(t, ix, "out.jsonl", "b", 1); r.loc.off != first {
		t.Errorf("b's record is at byte %d, want %d (where the first read stopped)", r.loc.off, first)
	}
	for _, rec := range recs {
		r := rowOf(t, ix, "out.jsonl", rec.ID, 1)
		got, err := readRecord(r, true)
		if err != nil {
			t.Fatal(err)
		}
		if got.Record.ID != rec.ID || got.Record.Output != rec.Output || len(got.steps) != len(rec.Trajectory) || r.Steps != len(rec.Trajectory) {
			t.Errorf("%s: read back %q, %q, %d steps (row: %d), want %q, %q, %d", rec.ID, got.Record.ID, got.Record.Output, len(got.steps), r.Steps, rec.ID, rec.Output, len(rec.Trajectory))
		}
		steps, err := readSteps(r.loc.file, got.steps)
		if err != nil {
			t.Fatal(err)
		}
		for i, raw := range steps {
			var st schemas.Step
			if err := json.Unmarshal(raw, &st); err != nil || st.StepID != rec.Trajectory[i].StepID {
				t.Errorf("%s step %d: %q (%v), want %q", rec.ID, i, st.StepID, err, rec.Trajectory[i].StepID)
			}
		}
	}
	// The failed check's evidence is in the record read back.
	got, _ := readRecord(rowOf(t, ix, "out.jsonl", "b", 1), false)
	if ev, _ := got.Record.Score.Checks[0].Evidence.(string); !strings.Contains(ev, "Add(2, 2) = 0, want 4") {
		t.Errorf("evidence read back: %v", got.Record.Score.Checks[0].Evidence)
	}
	if r := rowOf(t, ix, "out.jsonl", "b", 1); r.Checks != 2 || r.Failed != 1 || r.FirstFailed != "TestAdd" || r.Cost == nil || r.Tokens != 150 || r.Category == "" || r.Meta["difficulty"] != "hard" {
		t.Errorf("row b: %+v", r)
	}
}

// TestIndexReplaced: a file replaced (renamed over, or truncated and
// rewritten) is read again from the start, and its old rows go.
func TestIndexReplaced(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.jsonl")
	writeRecords(t, p, synthRecord("a", 1, true, 2, 50), synthRecord("b", 1, true, 2, 50))
	ix := newIndex(t, dir)
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[a/1:pass b/1:pass]" {
		t.Fatalf("rows: %v", got)
	}
	// Renamed over: another inode.
	tmp := filepath.Join(dir, "tmp.json")
	writeRecords(t, tmp, synthRecord("c", 1, false, 2, 50))
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	ix.Poll()
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[c/1:fail]" {
		t.Fatalf("rows after the file was replaced: %v", got)
	}
	// Rewritten in place, longer than before: same inode, other content.
	writeRecords(t, p, synthRecord("d", 1, true, 2, 50), synthRecord("e", 1, true, 2, 50), synthRecord("f", 1, true, 2, 50))
	ix.Poll()
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[d/1:pass e/1:pass f/1:pass]" {
		t.Fatalf("rows after the file was rewritten: %v", got)
	}
	r := rowOf(t, ix, "out.jsonl", "e", 1)
	if rec, err := readRecord(r, false); err != nil || rec.Record.ID != "e" {
		t.Fatalf("e read back: %v %v", rec, err)
	}
}

// TestIndexPartial: a trials run's partial file shows the trials of cases
// in progress; when the case's trials record arrives in the output, it
// takes their place (an interrupted trial run again leaves one row).
func TestIndexPartial(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trials.jsonl")
	part := out + ".partial"
	a1, a2 := synthRecord("a", 1, true, 2, 50), synthRecord("a", 2, false, 2, 50)
	interrupted := synthRecord("a", 2, false, 1, 50)
	interrupted.Score = nil
	interrupted.Error = &schemas.ErrorInfo{Class: schemas.ErrInterrupted, Message: "interrupted"}
	writeRecords(t, part, a1, interrupted)
	ix := newIndex(t, dir)
	if got := sourceRows(t, ix, "trials.jsonl"); fmt.Sprint(got) != "[a/1:pass a/2:error]" {
		t.Fatalf("rows from the partial file: %v", got)
	}
	ix.mu.RLock()
	prog := ix.sources["trials.jsonl"].inProgress()
	ix.mu.RUnlock()
	if len(prog) != 1 || prog[0].ID != "a" || prog[0].Trials != 2 {
		t.Errorf("in progress: %+v", prog)
	}
	f, _ := os.OpenFile(part, os.O_APPEND|os.O_WRONLY, 0)
	appendRecords(t, f, a2)
	f.Close()
	if err := os.WriteFile(out, trialsLine(t, []schemas.CaptureRecord{a1, a2}), 0o644); err != nil {
		t.Fatal(err)
	}
	ix.Poll()
	if got := sourceRows(t, ix, "trials.jsonl"); fmt.Sprint(got) != "[a/1:pass a/2:fail]" {
		t.Fatalf("rows once the case finished: %v", got)
	}
	r := rowOf(t, ix, "trials.jsonl", "a", 2)
	if r.loc.file.role != roleMain {
		t.Errorf("a/2 is read from role %d, want the output", r.loc.file.role)
	}
	rec, err := readRecord(r, true)
	if err != nil || rec.Record.Trial != 2 || rec.Record.Score == nil || rec.Record.Score.Pass || len(rec.steps) != 2 {
		t.Fatalf("a/2 from the trials record: %+v %v", rec, err)
	}
	ix.mu.RLock()
	prog = ix.sources["trials.jsonl"].inProgress()
	ix.mu.RUnlock()
	if len(prog) != 0 {
		t.Errorf("in progress after the case finished: %+v", prog)
	}
}

// TestIndexCompressedAndShards: a zstd file is read; the shards of a
// --slurm run show as one source before the merge.
func TestIndexCompressedAndShards(t *testing.T) {
	dir := t.TempDir()
	var plain bytes.Buffer
	appendRecords(t, &plain, synthRecord("z1", 1, true, 3, 80), synthRecord("z2", 1, false, 4, 80))
	var zbuf bytes.Buffer
	zw, _ := zstd.NewWriter(&zbuf)
	zw.Write(plain.Bytes())
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "c.jsonl.zst"), zbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shards := filepath.Join(dir, "sl.jsonl.shards")
	os.Mkdir(shards, 0o755)
	writeRecords(t, filepath.Join(shards, "shard-0.jsonl"), synthRecord("s1", 1, true, 1, 50))
	writeRecords(t, filepath.Join(shards, "shard-1.jsonl"), synthRecord("s1", 2, false, 1, 50), synthRecord("s2", 1, true, 1, 50))
	ix := newIndex(t, dir)
	if got := sourceRows(t, ix, "c.jsonl.zst"); fmt.Sprint(got) != "[z1/1:pass z2/1:fail]" {
		t.Fatalf("zstd rows: %v", got)
	}
	r := rowOf(t, ix, "c.jsonl.zst", "z2", 1)
	if rec, err := readRecord(r, true); err != nil || rec.Record.ID != "z2" || len(rec.steps) != 4 {
		t.Fatalf("z2 read back: %+v %v", rec, err)
	}
	got := sourceRows(t, ix, "sl.jsonl")
	if len(got) != 3 {
		t.Fatalf("shard rows: %v", got)
	}
	ix.mu.RLock()
	st := ix.runs["sl.jsonl"].status()
	ix.mu.RUnlock()
	if st != "running" {
		t.Errorf("a shard directory without its output: status %q, want running", st)
	}
}

// TestIndexBadLines: a line that is not a record is named with its file
// and line; the records around it are kept.
func TestIndexBadLines(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.jsonl")
	var b bytes.Buffer
	appendRecords(t, &b, synthRecord("a", 1, true, 1, 10))
	b.WriteString("{\"id\":\"x\",\"trajectory\":{}}\n")
	appendRecords(t, &b, synthRecord("b", 1, true, 1, 10))
	os.WriteFile(p, b.Bytes(), 0o644)
	ix := newIndex(t, dir)
	if got := sourceRows(t, ix, "out.jsonl"); fmt.Sprint(got) != "[a/1:pass b/1:pass]" {
		t.Fatalf("rows: %v", got)
	}
	ix.mu.RLock()
	probs := ix.sources["out.jsonl"].problems()
	ix.mu.RUnlock()
	if len(probs) != 1 || !strings.Contains(probs[0], "out.jsonl:2") || !strings.Contains(probs[0], "trajectory") {
		t.Errorf("problems: %q", probs)
	}
}

// TestIndexTrialsFixture: a real trials file of the fake agent: rows per
// trial with the statuses the report gives them.
func TestIndexTrialsFixture(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir, "trials_a.jsonl")
	copyFixture(t, dir, "prompts.jsonl") // not a results file: left out
	ix := newIndex(t, dir)
	ix.mu.RLock()
	_, isSrc := ix.sources["prompts.jsonl"]
	s := ix.sources["trials_a.jsonl"]
	tot := s.totals()
	aggs := s.caseAggs()
	ix.mu.RUnlock()
	if isSrc {
		t.Error("a prompts file was taken for results")
	}
	if tot.Coverage != "over 47 of 56 trials; 9 left out (agent_crash: 4, grader_error: 1, timeout: 4)" {
		t.Errorf("coverage %q", tot.Coverage)
	}
	if tot.Cases != 14 || aggs["flaky-echo"].status != "flaky" || aggs["crash"].status != statusError || aggs["wrong-answer"].status != statusFail {
		t.Errorf("totals %+v; flaky-echo %s, crash %s", tot, aggs["flaky-echo"].status, aggs["crash"].status)
	}
}

// TestRunStatus: a results file a run holds the write lock on is running;
// once the lock is gone it is finished. A run directory whose run.json
// says running but whose files are old and unlocked was interrupted.
func TestRunStatus(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.jsonl")
	// Another process writes the output, as a run does.
	writer := exec.Command(os.Args[0], "-test.run=^TestHoldOutput$")
	writer.Env = append(os.Environ(), "HARNESS_VIEW_HOLD="+p)
	stdin, _ := writer.StdinPipe()
	stdout, _ := writer.StdoutPipe()
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer writer.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the writer: %q %v", line, err)
	}
	rd := filepath.Join(dir, "runs", "r1")
	os.MkdirAll(rd, 0o755)
	writeRecords(t, filepath.Join(rd, "agent.jsonl"), synthRecord("b", 1, true, 1, 10))
	if err := rundir.Write(rd, &rundir.Manifest{Started: "2026-01-01T00:00:00Z", Status: "running", K: 1, Cases: 2,
		Agents: []rundir.Agent{{Name: "agent", Output: "agent.jsonl"}}}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{filepath.Join(rd, "agent.jsonl"), filepath.Join(rd, rundir.ManifestName)} {
		os.Chtimes(f, old, old)
	}
	ix := newIndex(t, dir)
	status := func(id string) string {
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		return ix.runs[id].status()
	}
	if s := status("out.jsonl"); s != "running" {
		t.Errorf("a locked output: %s, want running", s)
	}
	if s := status("runs/r1"); s != "interrupted" {
		t.Errorf("run.json says running, nothing locked or changed for an hour: %s, want interrupted", s)
	}
	stdin.Close()
	writer.Wait()
	ix.Poll()
	if s := status("out.jsonl"); s != "finished" {
		t.Errorf("once the lock is gone: %s, want finished", s)
	}
}

// TestHoldOutput writes a record to $HARNESS_VIEW_HOLD and holds the file's
// lock until its standard input closes (run by TestRunStatus).
func TestHoldOutput(t *testing.T) {
	p := os.Getenv("HARNESS_VIEW_HOLD")
	if p == "" {
		t.Skip("run by TestRunStatus")
	}
	out, err := results.OpenOutput(p, results.OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Write(synthRecord("a", 1, true, 1, 10)); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	out.Close()
}

// TestIndexShardDirRoot: the shard directory of a --slurm run given as
// the root shows as the one run it will be merged into, as from its
// parent.
func TestIndexShardDirRoot(t *testing.T) {
	dir := t.TempDir()
	shards := filepath.Join(dir, "sl.jsonl.shards")
	os.Mkdir(shards, 0o755)
	writeRecords(t, filepath.Join(shards, "shard-0.jsonl"), synthRecord("s1", 1, true, 1, 50))
	writeRecords(t, filepath.Join(shards, "shard-1.jsonl"), synthRecord("s1", 2, false, 1, 50), synthRecord("s2", 1, true, 1, 50))
	ix := newIndex(t, shards)
	if got := sourceRows(t, ix, "sl.jsonl"); len(got) != 3 {
		t.Fatalf("shard rows: %v", got)
	}
	ix.mu.RLock()
	n, st := len(ix.runs), ix.runs["sl.jsonl"].status()
	ix.mu.RUnlock()
	if n != 1 || st != "running" {
		t.Errorf("%d runs, status %q; want the one run, running", n, st)
	}
}
