package capture

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"harness/acp"
)

// mcpServers are the MCP servers of a unit's session/new: the run's, then
// its Harbor task's ([[environment.mcp_servers]]; a stdio one runs where
// the agent runs, inside the task's layer). A task's sse or http server
// the agent does not support is left out, and said on the record; so is
// Gemini CLI's not starting them (see untrustedGemini).
func (w *worker) mcpServers(run *caseRun, ag *agent) []json.RawMessage {
	servers := w.r.cfg.MCPServers
	var init *acp.InitializeResponse
	if ag != nil {
		init = ag.init
	}
	// The task's variables, then the agent's own, which win (as in the
	// layer).
	var env []string
	if run.layer != nil && run.layer.task != nil {
		for k, v := range run.layer.task.AgentEnv() {
			env = append(env, k+"="+v)
		}
		if len(run.layer.task.Config.MCPServers) > 0 {
			http, sse := mcpTransports(init)
			own, skipped := run.layer.task.ACPMCPServers(http, sse)
			run.record.Errors = append(run.record.Errors, skipped...)
			servers = append(slices.Clone(servers), own...)
		}
	}
	env = append(env, w.r.cfg.AgentEnv...)
	if note := untrustedGemini(init, env, servers); note != "" && !slices.Contains(run.record.Errors, note) {
		run.record.Errors = append(run.record.Errors, note)
	}
	return servers
}

// geminiTrustVar is the variable by which Gemini CLI trusts its working
// folder; it starts no MCP server in a folder it does not trust.
const geminiTrustVar = "GEMINI_CLI_TRUST_WORKSPACE"

// untrustedGemini is the note for a record whose agent is Gemini CLI,
// given MCP servers with nothing in its environment that makes it trust
// the session's folder: in an untrusted folder it starts none of them,
// and says nothing of it. It trusts folders in other ways too (its
// trustedFolders.json, its settings), so the note says what to check.
func untrustedGemini(init *acp.InitializeResponse, env []string, servers []json.RawMessage) string {
	if len(servers) == 0 || init == nil || init.AgentInfo == nil || init.AgentInfo.Name != "gemini-cli" {
		return ""
	}
	trust := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == geminiTrustVar {
			trust = v
		}
	}
	if trust == "true" {
		return ""
	}
	var names []string
	for _, s := range servers {
		var v struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(s, &v) == nil {
			names = append(names, v.Name)
		}
	}
	return fmt.Sprintf("MCP servers %s given to Gemini CLI, which starts none in a folder it does not trust: %s=true is not in its environment (unless its trustedFolders.json or settings trust the folder, their tools were never offered)",
		strings.Join(names, ", "), geminiTrustVar)
}

// mcpTransports says which MCP transports besides stdio the agent
// supports (agentCapabilities.mcpCapabilities).
func mcpTransports(r *acp.InitializeResponse) (http, sse bool) {
	if r == nil || len(r.AgentCapabilities) == 0 {
		return false, false
	}
	var caps struct {
		MCP struct {
			HTTP bool `json:"http"`
			SSE  bool `json:"sse"`
		} `json:"mcpCapabilities"`
	}
	if json.Unmarshal(r.AgentCapabilities, &caps) != nil {
		return false, false
	}
	return caps.MCP.HTTP, caps.MCP.SSE
}
