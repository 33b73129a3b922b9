package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"harness/slurm"
)

// Without the Slurm client on PATH, --slurm says which package has it,
// before anything runs.
func TestSlurmWithoutSbatch(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	prompts := filepath.Join(dir, "p.jsonl")
	os.WriteFile(prompts, []byte(`{"id":"a","input":"x"}`+"\n"), 0o644)
	var stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &stderr, getenv: os.Getenv}
	code := runMain(context.Background(), e, []string{"trials", prompts, "-k", "2", "--slurm", "2", "-o", filepath.Join(dir, "t.jsonl"), "--", "agent"})
	if code != exitUsage || !strings.Contains(stderr.String(), "sbatch not found on PATH: --slurm needs the Slurm client commands (Debian and Ubuntu package slurm-client") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "t.jsonl.shards")); err == nil {
		t.Error("a shard directory was made")
	}
}

// An output on a filesystem that looks local, with a cluster of several
// nodes, is refused with what to do; one node, or --slurm-shared, is fine.
func TestSlurmOutputNotShared(t *testing.T) {
	dir := t.TempDir()
	fake := func(nodes string) *slurm.Client {
		return &slurm.Client{Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
			if name != "sinfo" {
				t.Fatalf("unexpected %s %v", name, args)
			}
			return []byte(nodes), nil
		}}
	}
	r := &slurmRun{f: &runFlags{output: filepath.Join(dir, "out.jsonl")}, client: fake("2\n1\n")}
	err := r.checkShared(context.Background())
	if isLocal(t, dir) {
		if err == nil || !strings.Contains(err.Error(), "looks local to this machine, and the cluster has 3 nodes") || !strings.Contains(err.Error(), "--slurm-shared") {
			t.Errorf("local filesystem, 3 nodes: %v", err)
		}
	} else if err != nil {
		t.Errorf("a filesystem that is not local: %v", err)
	}
	r.client = fake("1\n")
	if err := r.checkShared(context.Background()); err != nil {
		t.Errorf("one node: %v", err)
	}
	r.client = fake("3\n")
	r.f.slurm.shared = true
	if err := r.checkShared(context.Background()); err != nil {
		t.Errorf("--slurm-shared: %v", err)
	}
}

// isLocal says whether dir's filesystem type is one of localFS.
func isLocal(t *testing.T, dir string) bool {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	_, ok := localFS[int64(st.Type)]
	return ok
}

// The progress count reads only what the shards gained since the last poll,
// and starts over for a shard that was emptied.
func TestShardCounter(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("1\n2\n"), 0o644)
	var c shardCounter
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
