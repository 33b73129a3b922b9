package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"harness/acp"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// geminiSetup finds Gemini CLI, starts a fake Gemini API server and a
// sandbox pointing the agent at it.
func geminiSetup(t *testing.T, opts fakemodel.Options) (*sandbox, *fakemodel.Server, []string) {
	t.Helper()
	script := nodeAgent(t, "@google/gemini-cli/bundle/gemini.js")
	srv := startModel(t, fakemodel.Gemini, opts)
	sb := newSandbox(t,
		"GOOGLE_GEMINI_BASE_URL="+srv.URL,
		"GEMINI_API_KEY=dummy",
		// Skips the self-relaunch: initialize takes 1.1 s instead of 1.9 s.
		"GEMINI_CLI_NO_RELAUNCH=true",
	)
	return sb, srv, []string{"node", script, "--acp"}
}

// TestGeminiCLI drives Gemini CLI with the client's fs switched on: its
// write_file goes through fs/*; it reads files and runs shell commands
// itself.
func TestGeminiCLI(t *testing.T) {
	t.Parallel()
	sb, srv, agent := geminiSetup(t, fakemodel.Options{})
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Auth = "gemini-api-key"
	cfg.Client.FS = &acp.FSOptions{}
	notes := sb.write(t, "notes.txt", "alpha beta gamma\n")
	// Gemini CLI 0.61.0 cannot create a new file through fs/* (its "not
	// found" check never matches a JSON-RPC error), so it overwrites one.
	out := sb.write(t, "out.txt", "old\n")
	recs := runCases(t, cfg,
		"bash echo hello-from-gemini",
		"read "+notes,
		"write "+out+" written-by-gemini",
	)

	// 1. A shell command Gemini runs itself.
	rec := recs[0]
	tools := checkTurn(t, rec, true, true, "hello-from-gemini")
	if len(tools) > 0 && (tools[0].Kind != "execute" || tools[0].Name != "echo hello-from-gemini") {
		t.Errorf("shell tool call = %+v", tools[0])
	}
	if n := len(stepsOf(rec, schemas.StepTerminal)); n != 0 {
		t.Errorf("%d terminal steps, but the terminal is off", n)
	}
	if rec.Provenance.AgentName != "gemini-cli" || rec.Provenance.AgentVersion != "0.61.0" {
		t.Errorf("provenance = %+v", rec.Provenance)
	}

	// 2. read_file. Gemini CLI 0.61.0 reads the disk itself here, even
	// with fs/* offered (its read path ignores the ACP file system).
	rec = recs[1]
	tools = checkTurn(t, rec, true, true, "alpha beta gamma")
	if len(tools) > 0 && (tools[0].Kind != "read" || !strings.Contains(string(tools[0].Locations), notes)) {
		t.Errorf("read tool call = %+v", tools[0])
	}

	// 3. write_file: a permission request (with no tool_call before it),
	// then fs/read_text_file and fs/write_text_file.
	rec = recs[2]
	checkTurn(t, rec, true, true, "")
	perms := stepsOf(rec, schemas.StepPermission)
	if len(perms) == 0 || perms[0].Outcome != "selected" {
		t.Errorf("permission steps = %+v", perms)
	}
	reads := stepsOf(rec, schemas.StepFSRead)
	if len(reads) == 0 || reads[0].Path != out || reads[0].Allowed == nil || !*reads[0].Allowed {
		t.Errorf("fs_read steps = %+v", reads)
	}
	writes := stepsOf(rec, schemas.StepFSWrite)
	if len(writes) == 0 || writes[0].Path != out || writes[0].Allowed == nil || !*writes[0].Allowed {
		t.Errorf("fs_write steps = %+v", writes)
	}
	if b, err := os.ReadFile(out); err != nil || strings.TrimSpace(string(b)) != "written-by-gemini" {
		t.Errorf("written file: %q, %v", b, err)
	}

	checkRequests(t, srv, "run_shell_command", checkGeminiRequest)
	checkNoLeftovers(t, sb)
}

// checkGeminiRequest checks the shape of a main-turn request.
func checkGeminiRequest(r fakemodel.Request) error {
	if !strings.HasSuffix(r.Path, ":streamGenerateContent") || r.Query != "alt=sse" || r.Header.Get("x-goog-api-key") != "dummy" {
		return fmt.Errorf("path %q query %q x-goog-api-key %q", r.Path, r.Query, r.Header.Get("x-goog-api-key"))
	}
	var body struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ThinkingConfig struct {
				IncludeThoughts bool `json:"includeThoughts"`
			} `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	var names []string
	for _, tl := range body.Tools {
		for _, f := range tl.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	all := " " + strings.Join(names, " ") + " "
	if !strings.Contains(all, " read_file ") || !strings.Contains(all, " write_file ") || !body.GenerationConfig.ThinkingConfig.IncludeThoughts {
		return fmt.Errorf("tools %v, includeThoughts %v", names, body.GenerationConfig.ThinkingConfig.IncludeThoughts)
	}
	return nil
}
