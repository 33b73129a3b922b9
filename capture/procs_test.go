package capture

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"harness/acp"
)

// children lists the processes whose parent is this test process, and the
// processes whose command line contains marker.
func children(marker string) (kids, marked []string) {
	me := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		s := string(stat)
		rest := s[strings.LastIndexByte(s, ')')+2:]
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == me {
			kids = append(kids, s)
		}
		cmd, _ := os.ReadFile(d + "/cmdline")
		if marker != "" && strings.Contains(string(cmd), marker) {
			marked = append(marked, strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return kids, marked
}

// TestNoLeftoverProcesses runs every kind of agent failure with an agent
// that has a child of its own, and checks that nothing is left behind: no
// zombie, no orphan. It is not parallel, so no other test's processes are
// around.
func TestNoLeftoverProcesses(t *testing.T) {
	const marker = "301.25"
	// The detector must see a child when there is one.
	probe := exec.Command("sleep", marker)
	if err := probe.Start(); err != nil {
		t.Fatal(err)
	}
	if kids, marked := children(marker); len(kids) == 0 || len(marked) == 0 {
		t.Fatalf("the process scan misses a live child: %v %v", kids, marked)
	}
	probe.Process.Kill()
	probe.Wait()
	cfg := testConfig(t)
	cfg.Agent = []string{"/bin/sh", "-c", "sleep " + marker + " & exec \"$0\" --ignore-eof", os.Args[0]}
	cfg.TurnTimeout = 300 * time.Millisecond
	cfg.CancelGrace = 200 * time.Millisecond
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: time.Minute}
	cfg.Concurrency = 2
	recs := run(t, cfg, cases("crash", "hang", "slow 5000", "echo x", "terminal sleep "+marker, "error", "echo y"))
	// A command that exits but leaves a background child: release kills it.
	cfg.TurnTimeout = watchdog(t)
	recs = append(recs, run(t, cfg, cases("terminal sleep "+marker+" & echo background"))...)
	if recs[3].Output != "x" || recs[6].Output != "y" || recs[7].Output != "terminal exit=0 truncated=false output=background\n" {
		t.Errorf("outputs %q %q %q (%+v)", recs[3].Output, recs[6].Output, recs[7].Output, recs[7].Error)
	}
	var kids, marked []string
	for i := 0; i < 50; i++ {
		if kids, marked = children(marker); len(kids) == 0 && len(marked) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind: %d children %q, %d marked processes %q", len(kids), kids, len(marked), marked)
}

// TestSetsidDescendantsDie: processes that leave the agent's (or a terminal
// command's) process group with setsid are killed with it too.
func TestSetsidDescendantsDie(t *testing.T) {
	const marker = "302.75"
	cfg := testConfig(t)
	cfg.Agent = []string{"/bin/sh", "-c", "setsid sleep " + marker + " & exec \"$0\"", os.Args[0]}
	cfg.Client.Terminal = &acp.TerminalOptions{Timeout: time.Minute}
	cfg.FreshProcess = true
	recs := run(t, cfg, cases("echo x", "terminal setsid sleep "+marker+" & echo escaped", "crash"))
	if recs[0].Output != "x" || !strings.Contains(recs[1].Output, "escaped") {
		t.Errorf("outputs %q, %q", recs[0].Output, recs[1].Output)
	}
	var marked []string
	for i := 0; i < 50; i++ {
		if _, marked = children(marker); len(marked) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind: %q", marked)
}
