// Package testagents finds the real agents the tests drive: the npm
// packages scripts/test installs under testdata/agents, and the fixture
// agent the test binary itself can become.
package testagents

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"harness/internal/fakeagent"
	"harness/replay"
	"harness/results"
	"harness/schemas"
)

// RequireEnv is the environment variable that turns a missing real agent
// from a skip into a failure (CI sets it).
const RequireEnv = "HARNESS_REQUIRE_AGENTS"

// FakeAgentEnv is the environment variable that makes a test binary whose
// TestMain calls RunFakeAgentIfAsked behave as the fixture agent.
const FakeAgentEnv = "HARNESS_TEST_FAKEAGENT"

// File returns the path of rel inside testdata/agents/node_modules. When
// the file (or, with needNode, node itself) is missing, the test is
// skipped with a message saying how to install it, or fails when
// RequireEnv is set.
func File(t testing.TB, rel string, needNode bool) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(self), "..", "..", "testdata", "agents", "node_modules", rel)
	msg := ""
	if _, err := os.Stat(p); err != nil {
		msg = "real agent not installed (run scripts/test to install it): " + p
	} else if _, err := exec.LookPath("node"); needNode && err != nil {
		msg = "node not found on PATH, needed by " + p
	}
	if msg != "" {
		if os.Getenv(RequireEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// NodeScript returns the path of an npm-installed agent script run by node.
func NodeScript(t testing.TB, rel string) string {
	t.Helper()
	return File(t, rel, true)
}

// ReplayEnv is the environment variable that makes a test binary whose
// TestMain calls FakeAgentMain behave as the replay agent of the results
// file it names.
const ReplayEnv = "HARNESS_TEST_REPLAY"

// ReplayTimingEnv, set to 1 beside ReplayEnv, replays with the recorded
// timing.
const ReplayTimingEnv = "HARNESS_TEST_REPLAY_TIMING"

// FakeAgentMain is the body of a TestMain whose test binary doubles as the
// fixture agent or the replay agent: started with FakeAgentEnv set (see
// FakeAgent) it plays the fixture agent, with ReplayEnv set (see
// ReplayAgent) it replays a results file, otherwise it runs the tests.
func FakeAgentMain(m *testing.M) int {
	if os.Getenv(FakeAgentEnv) == "1" {
		fakeagent.Run()
		return 0
	}
	if name := os.Getenv(ReplayEnv); name != "" {
		return runReplay(name, os.Getenv(ReplayTimingEnv) == "1")
	}
	return m.Run()
}

func runReplay(name string, timing bool) int {
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
	if err := replay.Serve(context.Background(), lib, os.Stdin, os.Stdout, replay.Options{Timing: timing, Log: os.Stderr, Version: "test"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// ReplayAgent returns the command line and environment that start the
// running test binary as the replay agent of the results file name (with
// the recorded timing when timing is set). env is added to the test
// process's environment.
func ReplayAgent(name string, timing bool, env ...string) (argv, fullEnv []string) {
	e := append(append(os.Environ(), env...), ReplayEnv+"="+name)
	if timing {
		e = append(e, ReplayTimingEnv+"=1")
	}
	return []string{os.Args[0]}, e
}

// FakeAgent returns the command line and environment that start the
// running test binary as the fixture agent with the given flags.
func FakeAgent(flags ...string) (argv, env []string) {
	return append([]string{os.Args[0]}, flags...), append(os.Environ(), FakeAgentEnv+"=1")
}

// TrajectoryBytes is a record's trajectory as written: its "trajectory"
// and "events" fields, byte for byte. Unless keepTimes, step timestamps
// and tool call durations are zeroed first (they differ from run to run).
func TrajectoryBytes(rec *schemas.CaptureRecord, keepTimes bool) (string, error) {
	c := *rec
	c.Trajectory = append([]schemas.Step(nil), rec.Trajectory...)
	if !keepTimes {
		for i := range c.Trajectory {
			s := &c.Trajectory[i]
			s.Timestamp = 0
			if s.Duration != nil {
				s.Duration = new(int64)
			}
		}
	}
	b, err := results.Marshal(&c)
	if err != nil {
		return "", err
	}
	var w struct {
		Trajectory json.RawMessage `json:"trajectory"`
		Events     json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return "", err
	}
	return string(w.Trajectory) + "\n" + string(w.Events), nil
}
