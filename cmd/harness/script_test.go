package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"harness/internal/fakeagent"
	"harness/internal/testagents"
)

// TestMain lets the test binary double as the harness command in scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"harness":   main,
		"fakeagent": fakeagent.Run,
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv(testagents.RequireEnv) != "" {
		t.Fatal("bwrap not installed: the sandbox scripts need it (scripts/test installs bubblewrap)")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("TESTDATA", mustAbs(t, "../../testdata"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitlock": waitLock,
		},
	})
}

// waitLock waits (up to 30 s) until another process holds a lock on the
// file: "waitlock FILE".
func waitLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitlock FILE")
	}
	name := ts.MkAbs(args[0])
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(name); err == nil {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			}
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("%s: no process locked it within 30s", args[0])
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/" + p
}
