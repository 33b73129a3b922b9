package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"harness/cli"
)

// loadRun parses args as harness run's and loads the run they name.
func loadRun(t *testing.T, args []string) (*suiteRun, error) {
	t.Helper()
	var f runCmdFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.addFlags(fs)
	var agent []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, agent = args[:i], args[i+1:]
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.load(&cli.Env{Stderr: &bytes.Buffer{}, Getenv: os.Getenv}, fs.Args(), agent)
}

// A task directory's run resumed from its run.json alone is the run that
// was started: its k, agent command and image cache (its suite made there
// again, though the cache was cleared), and the same run.json; a flag that
// contradicts run.json is refused, naming it.
func TestResumeTaskDirFromRunJSON(t *testing.T) {
	tmp := t.TempDir()
	tasks, err := filepath.Abs("../../testdata/tasks/column-sum")
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(tmp, "cache")
	dir := filepath.Join(tmp, "run")
	r, err := loadRun(t, []string{tasks, "-k", "2", "--cache-dir", cache, "--task-timeout-scale", "1.5", "-o", dir, "--", "my-agent", "--fast"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.makeDir(); err != nil {
		t.Fatal(err)
	}
	started, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}

	r, err = loadRun(t, []string{"--resume", dir})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if r.s.K != 2 {
		t.Errorf("k %d, want 2", r.s.K)
	}
	if len(r.agents) != 1 || strings.Join(r.agents[0].Command, " ") != "my-agent --fast" {
		t.Errorf("agents %+v, want the one command my-agent --fast", r.agents)
	}
	if r.f.image.cacheDir != cache || r.f.image.timeoutScale != 1.5 {
		t.Errorf("cache dir %q, timeout scale %g: want %q and 1.5", r.f.image.cacheDir, r.f.image.timeoutScale, cache)
	}
	if !strings.HasPrefix(r.suiteFile, filepath.Join(cache, "task-suites")+string(filepath.Separator)) {
		t.Errorf("suite %s, not made again in %s", r.suiteFile, cache)
	}
	if err := r.makeDir(); err != nil {
		t.Fatal(err)
	}
	resumed, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(started, resumed) {
		t.Errorf("run.json resumed\n%s\nstarted\n%s", resumed, started)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-k", "1"}, "-k 1: the run in " + dir + " was started with k 2"},
		{[]string{"--cache-dir", filepath.Join(tmp, "other")}, "--cache-dir " + filepath.Join(tmp, "other") + ": the run in " + dir + " was started with --cache-dir " + cache},
		{[]string{"--force-build"}, "--force-build true: the run in " + dir + " was started without --force-build"},
		{[]string{"--", "other-agent"}, `agent command "other-agent": the run in ` + dir + ` was started with "my-agent --fast"`},
	} {
		_, err := loadRun(t, append([]string{"--resume", dir}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("resume with %v: error %v, want %q", c.args, err, c.want)
		}
	}
	// What only changes how fast it runs is taken.
	if _, err := loadRun(t, []string{"--resume", dir, "-j", "4", "-k", "2", "--cache-dir", cache}); err != nil {
		t.Errorf("resume with -j 4 and the same k and cache: %v", err)
	}
}
