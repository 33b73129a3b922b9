package suite

import (
	"path/filepath"
	"strings"
)

// CommandName names the agent of a command after its program: the base
// name without its extension ("./bin/my-agent.sh" is my-agent), or
// "agent" when that leaves nothing.
func CommandName(cmd []string) string {
	base := filepath.Base(cmd[0])
	if name := strings.TrimSuffix(base, filepath.Ext(base)); name != "" && name != "." && name != "/" {
		return name
	}
	return "agent"
}

// AgentNames lists the names of as, comma-separated.
func AgentNames(as []Agent) string {
	var names []string
	for _, a := range as {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}
