package realagents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/acp"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// TestClaudeAgentAsksPermissionInDefaultMode runs claude-agent-acp with
// the session mode default (SessionMode: session/set_mode after
// session/new, since its sessions start in auto): its Write then asks
// harness for permission, and harness's policy decides it, on the record.
// Allowed, the file is in the workspace copy; denied, it is not, and the
// Write failed.
func TestClaudeAgentAsksPermissionInDefaultMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy acp.PermissionPolicy
		kind   string // the kind of the option chosen
		status string // of the Write
		file   bool
	}{
		{acp.PolicyAllow, "allow_once", "completed", true},
		{acp.PolicyDeny, "reject_once", "failed", false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			a := testagents.ClaudeAdapters()[1]
			sb, _, agent := claudeSetupWith(t, a, fakemodel.Options{})
			cfg, wire := baseConfig(t, sb, agent)
			cfg.Client.Permission = tc.policy
			cfg.SessionMode = "default"
			tmpl := t.TempDir()
			if err := os.WriteFile(filepath.Join(tmpl, "README.md"), []byte("a workspace\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg.Workspace = tmpl
			rec := runCases(t, cfg, "write notes.txt hello")[0]
			if rec.Error != nil || rec.StopReason != acp.StopEndTurn {
				t.Fatalf("error %+v, stopReason %q\n%s", rec.Error, rec.StopReason, dump(rec))
			}
			if !wire.has(false, `"currentModeId":"auto"`) || !wire.has(true, `"method":"session/set_mode"`) || !wire.has(true, `"modeId":"default"`) {
				t.Error("session/new did not answer auto, or harness sent no session/set_mode to default")
			}
			perms := stepsOf(rec, schemas.StepPermission)
			if len(perms) != 1 || perms[0].Outcome != "selected" {
				t.Fatalf("permission steps %+v, want one selected", perms)
			}
			var options []struct{ OptionID, Kind string }
			if err := json.Unmarshal(perms[0].Options, &options); err != nil {
				t.Fatalf("options %s: %v", perms[0].Options, err)
			}
			chosen := ""
			for _, o := range options {
				if o.OptionID == perms[0].OptionID {
					chosen = o.Kind
				}
			}
			if chosen != tc.kind {
				t.Errorf("the option chosen %q is of kind %q, want %s (options %s)", perms[0].OptionID, chosen, tc.kind, perms[0].Options)
			}
			if !strings.Contains(string(perms[0].ToolCall), "notes.txt") {
				t.Errorf("the permission's tool call %s does not name notes.txt", perms[0].ToolCall)
			}
			var writes []schemas.Step
			for _, s := range stepsOf(rec, schemas.StepToolCall) {
				if s.ToolName == "Write" {
					writes = append(writes, s)
				}
			}
			if len(writes) != 1 || writes[0].Status != tc.status {
				t.Errorf("Write calls %+v, want one %s", writes, tc.status)
			}
			added := rec.Workspace != nil && len(rec.Workspace.FileChanges) == 1 && rec.Workspace.FileChanges[0].Path == "notes.txt"
			if added != tc.file {
				t.Errorf("workspace %+v: notes.txt added %v, want %v", rec.Workspace, added, tc.file)
			}
		})
	}
}
