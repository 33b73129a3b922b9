//go:build linux

package egress_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"harness/sandbox/egress"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// TestRealAgentsThroughBridge runs Claude Code, Codex and Gemini CLI
// headless in a bwrap sandbox whose only way out is the egress proxy, with
// the default allowlist (the host of the base URL each is given) and its
// fake model server: each finishes its tool call, its model traffic shows
// as allowed connections with bytes both ways, and whatever else it tries
// (telemetry, update checks) is denied.
func TestRealAgentsThroughBridge(t *testing.T) {
	bwrap := egress.RequireBwrap(t)
	for _, name := range []string{"claude", "codex", "gemini"} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			var api fakemodel.API
			var env, agent []string
			switch name {
			case "claude":
				script := testagents.NodeScript(t, "@anthropic-ai/claude-agent-sdk/cli.js")
				api = fakemodel.Anthropic
				env = []string{"ANTHROPIC_API_KEY=dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}
				agent = []string{"node", script, "-p", "bash echo hello-egress", "--output-format", "stream-json", "--verbose"}
			case "codex":
				script := testagents.NodeScript(t, "@openai/codex/bin/codex.js")
				api = fakemodel.OpenAIResponses
				os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
				env = []string{"FAKE_OPENAI_KEY=dummy", "CODEX_HOME=" + filepath.Join(home, ".codex")}
				agent = []string{"node", script, "exec", "--json", "--skip-git-repo-check",
					"-c", "model_provider=fake", "-c", `model="gpt-5.3-codex"`, "-c", `sandbox_mode="danger-full-access"`, "bash echo hello-egress"}
			case "gemini":
				script := testagents.NodeScript(t, "@google/gemini-cli/bundle/gemini.js")
				api = fakemodel.Gemini
				os.MkdirAll(filepath.Join(home, ".gemini"), 0o755)
				os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o644)
				env = []string{"GEMINI_API_KEY=dummy", "GEMINI_CLI_NO_RELAUNCH=true", "GEMINI_CLI_TRUST_WORKSPACE=true"}
				agent = []string{"node", script, "--yolo", "--output-format", "stream-json", "--prompt", "bash echo hello-egress"}
			}
			srv := fakemodel.Start(api, fakemodel.Options{})
			defer srv.Close()
			switch name {
			case "claude":
				env = append(env, "ANTHROPIC_BASE_URL="+srv.URL)
			case "codex":
				agent = append(agent[:len(agent)-1], "-c",
					fmt.Sprintf(`model_providers.fake={name="fake", base_url="%s/v1", env_key="FAKE_OPENAI_KEY", wire_api="responses"}`, srv.URL),
					agent[len(agent)-1])
			case "gemini":
				env = append(env, "GOOGLE_GEMINI_BASE_URL="+srv.URL)
			}
			env = append(env, "HOME="+home, "PATH="+os.Getenv("PATH"))

			rules := egress.DefaultRules(env, agent)
			host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
			if want := []egress.Rule{{Host: host, Port: egress.Atoi(port)}}; len(rules) != 1 || rules[0] != want[0] {
				t.Fatalf("default rules %v, want %v", rules, want)
			}
			var mu sync.Mutex
			var conns []egress.Connection
			s, err := egress.NewProxy(rules, t.TempDir()).NewSession(func(c egress.Connection) { mu.Lock(); conns = append(conns, c); mu.Unlock() })
			if err != nil {
				t.Fatal(err)
			}
			// The agents' packages, wherever the tree is (under the host's
			// /tmp, which the sandbox's private /tmp hides, in CI).
			agents := filepath.Dir(testagents.File(t, "", false))
			argv := append(append([]string{}, egress.SandboxArgs...), "--ro-bind", agents, agents, "--bind", home, home, "--chdir", home)
			argv = append(append(argv, s.BwrapArgs...), "--")
			cmd := exec.Command(bwrap, append(argv, s.Command(agent)...)...)
			cmd.Env = append(env, s.Env...)
			out, err := cmd.CombinedOutput()
			s.Close()
			if err != nil || !strings.Contains(string(out), "hello-egress") || len(srv.Requests()) == 0 {
				t.Fatalf("%v, %d model requests:\n%s", err, len(srv.Requests()), out)
			}
			model := 0
			for _, c := range conns {
				switch {
				case c.Allowed && c.Host == host && strconv.Itoa(c.Port) == port && c.BytesOut > 0 && c.BytesIn > 0:
					model++
				case c.Allowed:
					t.Errorf("allowed connection that is not to the model: %+v", c)
				case c.Error != "denied by the allowlist":
					t.Errorf("denied connection: %+v", c)
				}
			}
			if model == 0 {
				t.Errorf("no model connection reported: %+v", conns)
			}
		})
	}
}
