package array

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/slurm"
)

func TestBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "harness")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Binary(bin, "ignored"); err != nil || got != bin {
		t.Errorf("named: %q, %v", got, err)
	}
	for _, bad := range []string{dir, filepath.Join(dir, "missing")} {
		if _, err := Binary(bad, ""); !errors.Is(err, ErrNotFile) || !strings.Contains(err.Error(), bad) {
			t.Errorf("named %s: %v, want ErrNotFile naming it", bad, err)
		}
	}
	// By the name it was started with, looked up in PATH.
	t.Setenv("PATH", dir)
	if got, err := Binary("", "harness"); err != nil || got != bin {
		t.Errorf("argv0 in PATH: %q, %v", got, err)
	}
	// A name that is not found: the running executable.
	exe, _ := os.Executable()
	if got, err := Binary("", "no-such-harness"); err != nil || got != exe {
		t.Errorf("argv0 not found: %q, %v, want %s", got, err, exe)
	}
}

func TestWrittenSkipsEmptyShards(t *testing.T) {
	r, _ := newRun(t, 3, 0, &fakeSlurm{})
	if err := os.MkdirAll(r.Dir(), 0o777); err != nil {
		t.Fatal(err)
	}
	shards := r.Shards()
	os.WriteFile(shards[0], []byte("{}\n"), 0o644)
	os.WriteFile(shards[1], nil, 0o644)
	if got := r.Written(); len(got) != 1 || got[0] != shards[0] {
		t.Errorf("written %v, want %v", got, shards[:1])
	}
}

func TestWaitChecksTheOutput(t *testing.T) {
	f := &fakeSlurm{states: func(string, int) map[int]slurm.Task {
		return map[int]slurm.Task{1: task("COMPLETED", 0)}
	}}
	r, _ := newRun(t, 1, 0, f)
	submit(t, r)
	if err := os.Symlink(t.TempDir(), r.cfg.Output); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(context.Background(), "1"); KindOf(err) != OutputLinked {
		t.Errorf("Wait: %v, want the output refused", err)
	}
}

func TestCountErrored(t *testing.T) {
	name := filepath.Join(t.TempDir(), "out.jsonl")
	records := `{"id":"a","trial":1,"input":"x","output":"ok","trajectory":[],"provenance":{}}
{"id":"b","trial":1,"input":"y","output":"","trajectory":[],"error":{"class":"agent_crash","message":"died"},"provenance":{}}
{"id":"c","trial":1,"input":"z","output":"","trajectory":[],"error":{"class":"timeout","message":"slow"},"provenance":{}}
`
	if err := os.WriteFile(name, []byte(records), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := CountErrored(name); n != 2 {
		t.Errorf("CountErrored = %d, want 2", n)
	}
	if n := CountErrored(name + ".missing"); n != 0 {
		t.Errorf("missing file: %d", n)
	}
}
