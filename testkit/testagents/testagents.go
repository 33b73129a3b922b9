// Package testagents finds the real agents the tests drive: the npm
// packages scripts/test installs under testdata/agents, and the fixture
// agent the test binary itself can become.
package testagents

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"harness/results"
	"harness/schemas"
	"harness/testkit/fakeagent"
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

// ClaudeAdapter is one of Claude Code's ACP adapters the tests run.
type ClaudeAdapter struct {
	// Package is its npm package, as it names itself in initialize.
	Package string
	// Version is the version testdata/agents/package.json pins.
	Version string
	// Script is its entry point under node_modules, run by node.
	Script string
}

// ClaudeAdapters are Claude Code's ACP adapters the tests run, the older
// first: @zed-industries/claude-code-acp and its successor
// @agentclientprotocol/claude-agent-acp.
func ClaudeAdapters() []ClaudeAdapter {
	return []ClaudeAdapter{
		{"@zed-industries/claude-code-acp", "0.16.2", "@zed-industries/claude-code-acp/dist/index.js"},
		{"@agentclientprotocol/claude-agent-acp", "0.101.0", "@agentclientprotocol/claude-agent-acp/dist/index.js"},
	}
}

// NodeScript returns the path of an npm-installed agent script run by node.
func NodeScript(t testing.TB, rel string) string {
	t.Helper()
	return File(t, rel, true)
}

// FakeAgentMain is the body of a TestMain whose test binary doubles as the
// fixture agent: started with FakeAgentEnv set (see FakeAgent) it plays
// the agent, otherwise it runs the tests.
func FakeAgentMain(m *testing.M) int {
	if os.Getenv(FakeAgentEnv) == "1" {
		fakeagent.Run()
		return 0
	}
	return m.Run()
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
