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
