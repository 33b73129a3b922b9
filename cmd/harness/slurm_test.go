package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/cli"
	"harness/slurm/array"
)

// Without the Slurm client on PATH, --slurm says which package has it,
// before anything runs.
func TestSlurmWithoutSbatch(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	prompts := filepath.Join(dir, "p.jsonl")
	os.WriteFile(prompts, []byte(`{"id":"a","input":"x"}`+"\n"), 0o644)
	var stderr bytes.Buffer
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: os.Getenv}
	code := runMain(context.Background(), e, []string{"trials", prompts, "-k", "2", "--slurm", "2", "-o", filepath.Join(dir, "t.jsonl"), "--", "agent"})
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "sbatch not found on PATH: a Slurm run needs the Slurm client commands (Debian and Ubuntu package slurm-client") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "t.jsonl.shards")); err == nil {
		t.Error("a shard directory was made")
	}
}

// Each kind of error of an array run exits with its status, its message
// unchanged; an error of no kind is left as it is.
func TestSlurmExit(t *testing.T) {
	for kind, want := range map[array.Kind]int{array.Input: cli.ExitUsage, array.GivenUp: cli.ExitInfraErrors, array.Interrupted: cli.ExitInterrupted, array.OutputLinked: cli.ExitForeign} {
		err := slurmExit(&array.Error{Kind: kind, Err: errors.New("what happened")}, "")
		var ee *cli.ExitError
		if !errors.As(err, &ee) || ee.Code != want || err.Error() != "what happened" {
			t.Errorf("kind %d: %v, want exit %d", kind, err, want)
		}
	}
	// The remedy is worded with the command's flags.
	err := slurmExit(&array.Error{Kind: array.Input, Remedy: array.ResumeOrForce, Err: errors.New("DIR holds the shards of an earlier run")}, "")
	if want := "DIR holds the shards of an earlier run; continue it with --resume, or start over with --force"; err.Error() != want {
		t.Errorf("remedy: %q, want %q", err, want)
	}
	err = slurmExit(&array.Error{Kind: array.GivenUp, Remedy: array.ResumeLater, Err: errors.New("given up")}, "harness merge a b")
	if want := "given up; finish later with the same command and --resume (or: harness merge a b)"; err.Error() != want {
		t.Errorf("remedy: %q, want %q", err, want)
	}
	plain := errors.New("plain")
	if err := slurmExit(plain, ""); err != plain {
		t.Errorf("plain error: %v", err)
	}
}
