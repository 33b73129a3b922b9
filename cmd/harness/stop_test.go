package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"harness/testkit/testagents"
)

// TestStopEveryProcess sends SIGTERM to every process of a run at once, as
// Slurm's scancel, systemctl stop and docker stop do, at many moments (the
// agents starting, mid-turn, grading, copying workspaces, under the
// sandbox), then resumes the run: every case ends with n = k, no grader or
// agent error, and every line of the output whole. A grader or agent that
// died of the stop is not a verdict.
func TestStopEveryProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("kills whole runs at many moments; skipped with -short")
	}
	harness, err := exec.LookPath("harness")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var prompts strings.Builder
	const cases, k = 8, 2
	for i := range cases {
		fmt.Fprintf(&prompts, `{"id":"c%d","input":"sleep %d"}`+"\n", i, 100+40*i)
	}
	write(t, filepath.Join(dir, "p.jsonl"), prompts.String(), 0o644)
	// The grader takes a while, so that the stop finds graders running.
	write(t, filepath.Join(dir, "grader.sh"), "#!/bin/sh\ncat >/dev/null\nsleep 0.3\necho '{\"pass\":true,\"score\":1}'\n", 0o755)
	tpl := filepath.Join(dir, "tpl")
	write(t, filepath.Join(tpl, "a.txt"), "template\n", 0o644)

	type variant struct {
		name  string
		flags []string
	}
	variants := []variant{
		{"plain", nil},
		{"workspace", []string{"--workspace", tpl}},
	}
	if _, err := exec.LookPath("bwrap"); err == nil {
		variants = append(variants, variant{"sandbox", []string{"--workspace", tpl, "--sandbox", "bwrap", "--sandbox-network", "none"}})
	} else if os.Getenv(testagents.RequireEnv) != "" {
		t.Fatal("bwrap not installed: the sandboxed stop test needs it")
	} else {
		t.Log("bwrap not installed: the sandboxed variant is skipped")
	}
	moments := []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 800 * time.Millisecond, 1200 * time.Millisecond, 1800 * time.Millisecond}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for i, at := range moments {
				out := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", v.name, i))
				args := append([]string{"trials", filepath.Join(dir, "p.jsonl"), "-k", strconv.Itoa(k), "-j", "4", "-g", filepath.Join(dir, "grader.sh"), "-o", out, "-q"}, v.flags...)
				args = append(args, "--", "fakeagent")
				cmd := exec.Command(harness, args...)
				cmd.Dir = dir
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(at)
				n := killSession(cmd.Process.Pid, syscall.SIGTERM)
				err := cmd.Wait()
				t.Logf("stop at %v: %d processes signalled, %v", at, n, err)
				// Resumed until done (a stop may leave the run to do in
				// one more pass): the second pass has nothing left.
				resume := exec.Command(harness, append(append([]string{}, args[:len(args)-2]...), "--resume", "--", "fakeagent")...)
				resume.Dir = dir
				if b, err := resume.CombinedOutput(); err != nil {
					t.Fatalf("stop at %v: --resume: %v\n%s\nfirst run's stderr:\n%s", at, err, b, stderr.String())
				}
				checkComplete(t, out, cases, k)
			}
		})
	}
}

// killSession sends sig to every process of session sid (as a signal to a
// job step reaches all of its processes) and returns how many it reached.
func killSession(sid int, sig syscall.Signal) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state ppid pgrp session ...
		rest := b[bytes.LastIndexByte(b, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) > 3 && f[3] == strconv.Itoa(sid) {
			if syscall.Kill(pid, sig) == nil {
				n++
			}
		}
	}
	return n
}

// checkComplete asserts that a trials output holds every case with n = k,
// no errors, and only whole lines.
func checkComplete(t *testing.T, path string, cases, k int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var rec struct {
			ID     string         `json:"id"`
			N      int            `json:"n"`
			Errors map[string]int `json:"errors"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s:%d: not a whole record: %v", path, line, err)
		}
		if rec.N != k || len(rec.Errors) > 0 {
			t.Errorf("%s:%d: case %s has n = %d (want %d), errors %v", path, line, rec.ID, rec.N, k, rec.Errors)
		}
		seen[rec.ID] = true
	}
	if len(seen) != cases {
		t.Errorf("%s holds %d cases, want %d", path, len(seen), cases)
	}
	if _, err := os.Stat(path + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.partial is left after the run completed", path)
	}
}

// write creates a file and its directory.
func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestSecondInterruptKeepsFinishedTurns interrupts a run twice while its
// graders run, as Ctrl-C twice at a terminal does (SIGINT to harness
// alone), then resumes it. Graders that run processes are part of the
// trial, so with -j 2 only two turns have run while the two graders work.
// The first interrupt says at once what the run waits for; the second
// stops the graders, and the two units whose turns were complete are kept
// ungraded with their workspaces: --resume grades them there without
// running their turns again, and every case ends with n = k.
func TestSecondInterruptKeepsFinishedTurns(t *testing.T) {
	harness, err := exec.LookPath("harness")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	turns := filepath.Join(dir, "turns.log")
	grading := filepath.Join(dir, "grading.log")
	slow := filepath.Join(dir, "slow")
	var prompts strings.Builder
	const cases, k = 3, 2
	for i := range cases {
		// Each turn leaves result.txt in its workspace and counts itself.
		fmt.Fprintf(&prompts, `{"id":"c%d","input":"sh echo done > result.txt; echo c%d >> %s"}`+"\n", i, i, turns)
	}
	write(t, filepath.Join(dir, "p.jsonl"), prompts.String(), 0o644)
	// The grader passes a unit whose workspace holds the turn's
	// result.txt; while the file slow exists it takes a minute.
	write(t, filepath.Join(dir, "grader.sh"), fmt.Sprintf(`#!/bin/sh
payload=$(cat)
echo x >> %s
if [ -e %s ]; then sleep 60; fi
ws=$(printf '%%s' "$payload" | sed -n 's/.*"workspacePath":"\([^"]*\)".*/\1/p')
if [ -f "$ws/result.txt" ]; then echo '{"pass":true,"score":1}'; else echo '{"pass":false,"score":0,"reasoning":"no result.txt in '"$ws"'"}'; fi
`, grading, slow), 0o755)
	write(t, filepath.Join(dir, "tpl", "a.txt"), "template\n", 0o644)
	write(t, slow, "", 0o644)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"trials", filepath.Join(dir, "p.jsonl"), "-k", strconv.Itoa(k), "-j", "2", "-g", filepath.Join(dir, "grader.sh"),
		"--workspace", filepath.Join(dir, "tpl"), "-o", out}
	cmd := exec.Command(harness, append(args, "--", "fakeagent")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := func(name string) int {
		b, _ := os.ReadFile(name)
		return strings.Count(string(b), "\n")
	}
	waitFor(t, "both graders running", func() bool { return lines(grading) == 2 })
	if n := lines(turns); n != 2 {
		t.Fatalf("%d turns ran while the first two units were graded with -j 2, want 2", n)
	}
	cmd.Process.Signal(syscall.SIGINT)
	const said = "stopping: waiting for 2 graders/verifiers in flight; press Ctrl-C again to stop them"
	waitFor(t, "the stop said at once", func() bool { return strings.Contains(stderr.String(), said) })
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("interrupted run: %v, want exit 130\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping now:") {
		t.Errorf("the second interrupt was not said:\n%s", stderr.String())
	}
	b, _ := os.ReadFile(out + ".partial")
	if n := strings.Count(string(b), `"pending":"grading"`); n != 2 {
		t.Fatalf("%d ungraded records in the partial file, want 2:\n%s\nstderr:\n%s", n, b, stderr.String())
	}

	os.Remove(slow)
	resume := exec.Command(harness, append(append(args, "--resume"), "--", "fakeagent")...)
	resume.Dir = dir
	resume.Env = cmd.Env
	if b, err := resume.CombinedOutput(); err != nil {
		t.Fatalf("--resume: %v\n%s", err, b)
	}
	checkComplete(t, out, cases, k)
	if n := lines(turns); n != cases*k {
		t.Errorf("%d turns ran in all, want %d: the ungraded units ran again", n, cases*k)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "harness-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// waitFor polls cond for up to 60 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
