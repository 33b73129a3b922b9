package harbor

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MCPServer is one [[environment.mcp_servers]] table: an MCP server the
// task gives its agent.
type MCPServer struct {
	// Name is the server's name; Transport "stdio", "sse" or
	// "streamable-http".
	Name, Transport string
	// URL is an sse or streamable-http server's address.
	URL string
	// Command and Args start a stdio server (inside the trial's
	// environment, by the agent).
	Command string
	Args    []string
}

// mcpServers reads [[environment.mcp_servers]].
func (r *reader) mcpServers(raw map[string]any, src string) []MCPServer {
	v, ok := r.get(raw, "environment.mcp_servers")
	if !ok {
		return nil
	}
	list, isList := v.([]map[string]any)
	if anys, ok := v.([]any); ok {
		isList = true
		for _, x := range anys {
			m, isMap := x.(map[string]any)
			if !isMap {
				isList = false
			}
			list = append(list, m)
		}
	}
	if !isList {
		r.fail("environment.mcp_servers", "must be an array of tables ([[environment.mcp_servers]])")
		return nil
	}
	var headers []int
	for i, l := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "[[") && tableName(t) == "environment.mcp_servers" {
			headers = append(headers, i+1)
		}
	}
	var out []MCPServer
	for i, m := range list {
		field := fmt.Sprintf("environment.mcp_servers[%d]", i+1)
		line := lineOf(r.lines, "environment.mcp_servers")
		if i < len(headers) {
			line = headers[i]
		}
		fail := func(f, format string, args ...any) {
			if r.err == nil {
				r.err = fieldError(r.file, line, f, format, args...)
			}
		}
		s := MCPServer{}
		s.Name, _ = m["name"].(string)
		s.Transport, _ = m["transport"].(string)
		s.URL, _ = m["url"].(string)
		s.Command, _ = m["command"].(string)
		if a, ok := m["args"].([]any); ok {
			for _, x := range a {
				str, isStr := x.(string)
				if !isStr {
					fail(field+".args", "must be a list of strings")
				}
				s.Args = append(s.Args, str)
			}
		}
		if s.Transport == "" {
			s.Transport = "stdio"
			if s.URL != "" {
				s.Transport = "streamable-http"
			}
		}
		switch {
		case s.Name == "":
			fail(field+".name", "every MCP server needs a name")
		case s.Transport == "stdio" && s.Command == "":
			fail(field+".command", "a stdio MCP server needs a command")
		case s.Transport != "stdio" && s.Transport != "sse" && s.Transport != "streamable-http":
			fail(field+".transport", "must be stdio, sse or streamable-http, not %q", s.Transport)
		case s.Transport != "stdio" && s.URL == "":
			fail(field+".url", "an %s MCP server needs a url", s.Transport)
		}
		out = append(out, s)
	}
	return out
}

// ACPMCPServers are the task's MCP servers as session/new's mcpServers
// take them. An sse or streamable-http server is given only when the
// agent says it supports that transport (http, sse: its
// mcpCapabilities); the others are returned in skipped, each with why.
func (t *Task) ACPMCPServers(http, sse bool) (servers []json.RawMessage, skipped []string) {
	for _, s := range t.Config.MCPServers {
		var v any
		switch s.Transport {
		case "stdio":
			args := s.Args
			if args == nil {
				args = []string{}
			}
			v = map[string]any{"name": s.Name, "command": s.Command, "args": args, "env": []any{}}
		case "sse":
			if !sse {
				skipped = append(skipped, fmt.Sprintf("MCP server %s of task %s: the agent does not support sse MCP servers", s.Name, t.Name))
				continue
			}
			v = map[string]any{"type": "sse", "name": s.Name, "url": s.URL, "headers": []any{}}
		default:
			if !http {
				skipped = append(skipped, fmt.Sprintf("MCP server %s of task %s: the agent does not support http MCP servers", s.Name, t.Name))
				continue
			}
			v = map[string]any{"type": "http", "name": s.Name, "url": s.URL, "headers": []any{}}
		}
		b, _ := json.Marshal(v)
		servers = append(servers, b)
	}
	return servers, skipped
}
