// Package agentskills knows where coding agents read their user-level
// skills (directories holding a SKILL.md each): Claude Code in
// ~/.claude/skills, Gemini CLI in ~/.gemini/skills, Codex in
// ~/.agents/skills. It recognizes an agent by its command line.
package agentskills

import (
	"path"
	"strings"
)

// Layout is where one agent reads its user-level skills.
type Layout struct {
	// Agent names the agent ("Claude Code").
	Agent string
	// Dir is the skills directory, relative to the agent's HOME.
	Dir string
}

// known are the agents whose skills directory is known, by the names
// their programs and packages go by.
var known = []struct {
	names  []string
	layout Layout
}{
	{[]string{"claude", "claude-code", "claude-code-acp", "claude-agent-acp"}, Layout{Agent: "Claude Code", Dir: ".claude/skills"}},
	{[]string{"gemini", "gemini-cli"}, Layout{Agent: "Gemini CLI", Dir: ".gemini/skills"}},
	{[]string{"codex", "codex-acp"}, Layout{Agent: "Codex", Dir: ".agents/skills"}},
}

// launchers run the program named by their first argument that is not a
// flag.
var launchers = map[string]bool{"node": true, "npx": true, "bunx": true, "bun": true, "pnpm": true, "pnpx": true, "deno": true, "env": true, "exec": true}

// For finds the agent of a command line: its program, or the script or
// package a launcher (node, npx, bunx, ...) runs, by a path element that
// names a known agent (".../@zed-industries/claude-code-acp/dist/index.js",
// "gemini --acp", "npx codex-acp"). ok is false for any other agent.
func For(argv []string) (Layout, bool) {
	for i, a := range argv {
		if i > 0 && strings.HasPrefix(a, "-") {
			continue
		}
		if l, ok := match(a); ok {
			return l, true
		}
		if !launchers[path.Base(a)] {
			return Layout{}, false
		}
	}
	return Layout{}, false
}

// match looks for a known agent's name among the path elements of a
// program, a script or a package (a version suffix, "@1.2.3", and a file
// extension left out).
func match(p string) (Layout, bool) {
	for _, el := range strings.Split(p, "/") {
		if at := strings.LastIndex(el, "@"); at > 0 {
			el = el[:at]
		}
		el = strings.TrimSuffix(el, path.Ext(el))
		for _, k := range known {
			for _, n := range k.names {
				if el == n {
					return k.layout, true
				}
			}
		}
	}
	return Layout{}, false
}
