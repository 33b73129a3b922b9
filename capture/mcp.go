package capture

import (
	"encoding/json"
	"slices"

	"harness/acp"
)

// mcpServers are the MCP servers of a unit's session/new: the run's, then
// its Harbor task's ([[environment.mcp_servers]]; a stdio one runs where
// the agent runs, inside the task's layer). A task's sse or http server
// the agent does not support is left out, and said on the record.
func (w *worker) mcpServers(run *caseRun, ag *agent) []json.RawMessage {
	servers := w.r.cfg.MCPServers
	if run.layer == nil || run.layer.task == nil || len(run.layer.task.Config.MCPServers) == 0 {
		return servers
	}
	var init *acp.InitializeResponse
	if ag != nil {
		init = ag.init
	}
	http, sse := mcpTransports(init)
	own, skipped := run.layer.task.ACPMCPServers(http, sse)
	run.record.Errors = append(run.record.Errors, skipped...)
	return append(slices.Clone(servers), own...)
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
