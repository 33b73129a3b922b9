package realagents

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"harness/capture"
	"harness/harbor"
	"harness/image"
	"harness/sandbox/egress"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// imageMarker is the text of a file only the task's image has
// (/etc/harness-task-marker): the MCP server reads it back only when it
// runs inside the trial's layer.
const imageMarker = "only-in-the-task-image"

// mcpTask writes a Harbor task whose image carries the test MCP server,
// built static from testdata/mcpserver into environment/ and copied in by
// its Dockerfile (what a task author does), and declares it in task.toml
// as the stdio server "task"; then builds the image. It skips when podman
// or the base image is missing (fails with HARNESS_REQUIRE_AGENTS set).
func mcpTask(t *testing.T) (*harbor.Task, *image.Image) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil || exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run() != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			t.Fatal("podman or the task base image is missing (scripts/test installs podman and runs scripts/build-base-image)")
		}
		t.Skip("podman or the task base image is missing")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "task-mcp-image")
	files := map[string]string{
		"task.toml": `version = "1.0"

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 60.0

[environment]
allow_internet = false

[[environment.mcp_servers]]
name = "task"
transport = "stdio"
command = "/usr/local/bin/lookup-mcp"
`,
		"instruction.md":         "Read /etc/harness-task-marker with the task's MCP server.\n",
		"environment/Dockerfile": "FROM localhost/harness-base:bookworm\nWORKDIR /app\nCOPY lookup-mcp /usr/local/bin/lookup-mcp\nCOPY marker /etc/harness-task-marker\n",
		"environment/marker":     imageMarker + "\n",
		"tests/test.sh":          "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command(goTool, "build", "-o", filepath.Join(dir, "environment", "lookup-mcp"), "../../testdata/mcpserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the MCP server: %v\n%s", err, out)
	}
	task, err := harbor.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Config.MCPServers) != 1 || task.Config.AllowInternet {
		t.Fatalf("task config: MCP servers %+v, allow_internet %v", task.Config.MCPServers, task.Config.AllowInternet)
	}
	store := &image.Store{Dir: filepath.Join(t.TempDir(), "images")}
	img, err := store.Resolve(context.Background(), task.Image)
	if err != nil {
		t.Fatal(err)
	}
	return task, img
}

// TestAgentsCallATaskMCPServerInItsImage runs Claude Code (each ACP
// adapter) and Gemini CLI, installed on the host, in the image of a task
// whose task.toml declares a stdio MCP server the image carries: the agent
// starts the server inside the trial's layer, the fake model calls its
// read tool on a file only the image has, and the call is in the
// trajectory with that file's text as its output.
func TestAgentsCallATaskMCPServerInItsImage(t *testing.T) {
	task, img := mcpTask(t)
	if _, err := os.Stat("/etc/harness-task-marker"); err == nil {
		t.Fatal("the host has /etc/harness-task-marker: the test could not tell where the server ran")
	}
	type run struct {
		name string
		// setup starts the fake model and the agent's sandbox, and
		// configures the capture.
		setup func(t *testing.T) (*sandbox, *fakemodel.Server, []string, func(*capture.Config))
		// tool is the name the model calls the read tool by; call the
		// step's name of the call; input what its input shows ("" for an
		// agent that reports none).
		tool, call, input string
	}
	var runs []run
	for _, a := range testagents.ClaudeAdapters() {
		runs = append(runs, run{"claude-" + a.Version, func(t *testing.T) (*sandbox, *fakemodel.Server, []string, func(*capture.Config)) {
			sb, srv, agent := claudeSetupWith(t, a, fakemodel.Options{})
			return sb, srv, agent, func(*capture.Config) {}
		}, "mcp__task__read", "mcp__task__read", "/etc/harness-task-marker"})
	}
	runs = append(runs, run{"gemini", func(t *testing.T) (*sandbox, *fakemodel.Server, []string, func(*capture.Config)) {
		sb, srv, agent := geminiSetup(t, fakemodel.Options{})
		// Gemini CLI starts no MCP server in a folder it does not trust.
		sb.Env = append(sb.Env, "GEMINI_CLI_TRUST_WORKSPACE=true")
		return sb, srv, agent, func(c *capture.Config) { c.Auth = "gemini-api-key" }
	}, "mcp_task_read", "read (task MCP Server)", ""})
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			sb, srv, agent, configure := r.setup(t)
			cfg, _ := baseConfig(t, sb, agent)
			configure(&cfg)
			cfg.Image = &capture.ImageConfig{
				For:      func(*schemas.PromptCase) (*image.Image, *harbor.Task, error) { return img, task, nil },
				LayerDir: t.TempDir(),
				Egress:   egress.NewProxy(egress.DefaultRules(sb.Env, agent), ""),
			}
			rec := runCases(t, cfg, "tool "+r.tool+` {"path":"/etc/harness-task-marker"}`)[0]
			checkMCPCall(t, rec, checkTurn(t, rec, true, true, imageMarker), r.call, r.input, imageMarker)
			if rec.Cwd != "/app" || rec.Provenance.Sandbox == nil || rec.Provenance.Sandbox.Backend != "image" {
				t.Errorf("cwd %q, sandbox %+v: want the task's image", rec.Cwd, rec.Provenance.Sandbox)
			}
			if rec.Score == nil || rec.Score.Score != 1 {
				t.Errorf("verdict %+v", rec.Score)
			}
			checkRequests(t, srv, r.tool, nil)
		})
	}
}
