// Package replaytest lets a test binary double as the replay agent (and the
// fixture agent), so tests can capture a replay of what they recorded.
package replaytest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"harness/replay"
	"harness/testkit/testagents"
)

// Environment variables that make a test binary whose TestMain calls Main
// the replay agent: Env names the results file; TimingEnv and ApplyEnv,
// set to 1, replay with the recorded timing and workspace changes.
const (
	Env       = "HARNESS_TEST_REPLAY"
	TimingEnv = "HARNESS_TEST_REPLAY_TIMING"
	ApplyEnv  = "HARNESS_TEST_REPLAY_APPLY"
)

// Main is the body of a TestMain whose test binary doubles as the replay
// agent (started with Env set, see Agent) and the fixture agent (see
// testagents.FakeAgentMain); otherwise it runs the tests.
func Main(m *testing.M) int {
	if name := os.Getenv(Env); name != "" {
		return serve(name, replay.Options{Timing: os.Getenv(TimingEnv) == "1",
			ApplyChanges: os.Getenv(ApplyEnv) == "1", Log: os.Stderr, Version: "test"})
	}
	return testagents.FakeAgentMain(m)
}

func serve(name string, opts replay.Options) int {
	f, err := os.Open(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lib, err := replay.Load(name, f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := replay.Serve(context.Background(), lib, os.Stdin, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Agent returns the command line and environment that start the running
// test binary as the replay agent of the results file name, with opts'
// Timing and ApplyChanges. env is added to the test process's environment.
func Agent(name string, opts replay.Options, env ...string) (argv, fullEnv []string) {
	e := append(append(os.Environ(), env...), Env+"="+name)
	if opts.Timing {
		e = append(e, TimingEnv+"=1")
	}
	if opts.ApplyChanges {
		e = append(e, ApplyEnv+"=1")
	}
	return []string{os.Args[0]}, e
}
