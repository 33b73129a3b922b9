package realagents

import (
	hsandbox "harness/sandbox"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/image"
	"harness/results"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/mcpserver"
	"harness/testkit/replaytest"
	"harness/testkit/testagents"
)

// The test binary doubles as the replay agent.
func TestMain(m *testing.M) {
	if code, ok := hsandbox.HelperMain(); ok {
		os.Exit(code) // the test binary stands in for harness in a sandbox
	}
	if os.Getenv(mcpServerEnv) == "1" {
		os.Exit(mcpserver.Main()) // and in a stdio MCP server
	}
	if len(os.Args) > 1 && os.Args[1] == image.InitArg {
		os.Exit(image.Main(os.Args[2:], os.Stderr)) // and in a task image
	}
	os.Exit(replaytest.Main(m))
}

// TestReplayRealAgents captures real agents (against the fake model
// servers), then replays their records through harness's replay agent:
// a capture of the replay reproduces each trajectory byte for byte (step
// times and tool call durations aside), with the same output and stop
// reason.
func TestReplayRealAgents(t *testing.T) {
	type agentSetup func(*testing.T, fakemodel.Options) (*sandbox, *fakemodel.Server, []string)
	for _, tc := range []struct {
		name   string
		setup  agentSetup
		inputs func(sb *sandbox) []string
	}{
		{"claude", claudeSetup, func(sb *sandbox) []string {
			notes := sb.write(t, "notes.txt", "alpha beta gamma\n")
			return []string{"bash echo hello-from-terminal", "read " + notes, "write " + filepath.Join(sb.Cwd, "out.txt") + " written-by-claude", "plan the work"}
		}},
		{"gemini", geminiSetup, func(sb *sandbox) []string {
			notes := sb.write(t, "notes.txt", "alpha beta gamma\n")
			return []string{"bash echo hello-from-gemini", "read " + notes}
		}},
		{"codex", codexSetup, func(sb *sandbox) []string {
			return []string{"bash echo hello-from-codex", "plan the work"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, _, agent := tc.setup(t, fakemodel.Options{})
			cfg, _ := baseConfig(t, sb, agent)
			cfg.Client.FS = &acp.FSOptions{}
			cfg.Client.Terminal = &acp.TerminalOptions{Timeout: 30 * time.Second, Env: sb.Env}
			inputs := tc.inputs(sb)
			recorded := runCases(t, cfg, inputs...)
			var b strings.Builder
			for _, r := range recorded {
				if r.Error != nil || len(r.Trajectory) < 2 {
					t.Fatalf("case %s: a recording to replay needs a good run: %+v\n%s", r.ID, r.Error, dump(r))
				}
				line, err := results.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(line)
				b.WriteByte('\n')
			}
			file := filepath.Join(t.TempDir(), "recorded.jsonl")
			if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}

			rcfg, _ := baseConfig(t, sb, []string{os.Args[0]})
			rcfg.AgentEnv = append(append([]string(nil), sb.Env...), replaytest.Env+"="+file)
			rcfg.Client.FS, rcfg.Client.Terminal = cfg.Client.FS, cfg.Client.Terminal
			replayed := runCases(t, rcfg, inputs...)
			for i, want := range recorded {
				got := replayed[i]
				checkReplayed(t, want, got)
			}
		})
	}
}

func checkReplayed(t *testing.T, want, got *schemas.CaptureRecord) {
	t.Helper()
	w, err := testagents.TrajectoryBytes(want, false)
	if err != nil {
		t.Fatal(err)
	}
	g, err := testagents.TrajectoryBytes(got, false)
	if err != nil {
		t.Fatal(err)
	}
	if w != g {
		t.Errorf("case %s: the replayed trajectory differs\nrecorded %s\nreplayed %s", want.ID, w, g)
	}
	if got.Error != nil || want.Output != got.Output || want.StopReason != got.StopReason || want.ToolErrors != got.ToolErrors {
		t.Errorf("case %s: replayed error %+v, output %q (recorded %q), stop %q (%q)", want.ID, got.Error, got.Output, want.Output, got.StopReason, want.StopReason)
	}
}
