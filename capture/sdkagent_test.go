package capture

import (
	"strings"
	"testing"

	"harness/acp"
	"harness/schemas"
	"harness/testkit/testagents"
)

// TestSDKExampleAgent drives the example agent shipped in
// @agentclientprotocol/sdk@1.9.0, an agent nobody here wrote.
func TestSDKExampleAgent(t *testing.T) {
	t.Parallel()
	script := testagents.NodeScript(t, "@agentclientprotocol/sdk/dist/examples/agent.js")
	for _, policy := range []acp.PermissionPolicy{acp.PolicyAllow, acp.PolicyDeny} {
		cfg := testConfig(t)
		cfg.Agent = []string{"node", script}
		cfg.Client.Permission = policy
		var wire wireLog
		cfg.Client.Tap = wire.tap
		rec := one(t, cfg, "Hello, agent!")
		if rec.Error != nil || rec.StopReason != "end_turn" {
			t.Fatalf("%s: error %+v stopReason %q", policy, rec.Error, rec.StopReason)
		}
		if !strings.HasPrefix(rec.Output, "I'll help you with that. Let me start by reading some files") {
			t.Errorf("%s: output %q", policy, rec.Output)
		}
		// The duration is measured between two lines the agent writes about
		// a second apart; how far apart they arrive depends on the load of
		// the machine, so only its presence is checked.
		tools := stepsOf(rec, schemas.StepToolCall)
		if len(tools) != 2 {
			t.Fatalf("%s: %d tool calls, want 2: %+v", policy, len(tools), tools)
		}
		if tools[0].ToolCallID != "call_1" || tools[0].Status != "completed" || tools[0].Kind != "read" ||
			!strings.Contains(string(tools[0].Output), "My Project") || tools[0].Duration == nil || *tools[0].Duration < 0 {
			t.Errorf("%s: first tool call: id %s status %s kind %s duration %v output %s", policy,
				tools[0].ToolCallID, tools[0].Status, tools[0].Kind, tools[0].Duration, tools[0].Output)
		}
		perm := stepsOf(rec, schemas.StepPermission)
		wantOpt := map[acp.PermissionPolicy]string{acp.PolicyAllow: "allow", acp.PolicyDeny: "reject"}[policy]
		if len(perm) != 1 || perm[0].OptionID != wantOpt || perm[0].ToolCallID != "call_2" {
			t.Errorf("%s: permission = %+v", policy, perm)
		}
		// The agent sleeps about a second between steps: arrival timestamps show it.
		if n := len(rec.Trajectory); n < 4 || rec.Trajectory[n-1].Timestamp-rec.Trajectory[0].Timestamp < 2000 {
			t.Errorf("%s: timestamps not spread over the turn: %d steps", policy, n)
		}
		validateClientMessages(t, &wire)
	}
}
