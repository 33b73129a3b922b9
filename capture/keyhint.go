package capture

import (
	"os"
	"path/filepath"
	"strings"

	"harness/schemas"
)

// An agent with no API key often fails in a way that does not say so:
// Claude Code's adapter, for one, can answer session/new with "Query closed
// before response received". When an agent ends while starting, or asks
// for authentication, keyHint says what its environment or its stderr
// shows: a known agent none of whose key variables is set, or a stderr
// line about a key or a login.

// keyedAgent is an agent whose API key harness knows how it is given.
type keyedAgent struct {
	// name is how the hint names the agent; match are the lower-case
	// words its agentInfo or command line holds.
	name  string
	match []string
	// keys are the variables that hold its key, the first one suggested;
	// other are variables that give it credentials another way (a cloud
	// provider, a token).
	keys, other []string
	// login is where a saved login lives: a file under the directory the
	// variable dirVar names, else under HOME/homeDir.
	dirVar, homeDir, login string
}

var keyedAgents = []keyedAgent{
	{name: "Claude Code", match: []string{"claude"},
		keys:   []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
		other:  []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
		dirVar: "CLAUDE_CONFIG_DIR", homeDir: ".claude", login: ".credentials.json"},
	{name: "Codex", match: []string{"codex"},
		keys:   []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		dirVar: "CODEX_HOME", homeDir: ".codex", login: "auth.json"},
	{name: "Gemini CLI", match: []string{"gemini"},
		keys:    []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
		other:   []string{"GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"},
		homeDir: ".gemini", login: "oauth_creds.json"},
}

// explainKey adds to the error of an agent that ended while starting (at
// initialize or session/new), or asked for authentication, what its
// environment or stderr says of its key.
func (r *Runner) explainKey(ag *agent, info *schemas.ErrorInfo) {
	if info == nil {
		return
	}
	switch info.Class {
	case schemas.ErrInterrupted, schemas.ErrProtocol, schemas.ErrResourceLimit:
		return // harness, the protocol or the sandbox ended it
	}
	var names []string
	stderr := info.Stderr
	if ag != nil {
		if ag.init != nil && ag.init.AgentInfo != nil {
			names = []string{ag.init.AgentInfo.Name, ag.init.AgentInfo.Title}
		}
		if stderr == "" && ag.proc != nil {
			stderr = ag.proc.StderrTail()
		}
	}
	sandboxed := r.cfg.Sandbox != nil || r.cfg.Image != nil
	if h := keyHint(names, r.cfg.Agent, r.cfg.AgentEnv, sandboxed, stderr); h != "" {
		info.Message += "; " + h
	}
}

// keyHint says why an agent probably ended while starting or asked for
// authentication ("" when nothing says): the agent is named by its
// agentInfo (name and title, when it answered initialize) or else its
// command line; env is its environment, sandboxed whether it ran in a
// fresh HOME (so no saved login of the user's is seen), stderr what it
// wrote last.
func keyHint(info, command []string, env []string, sandboxed bool, stderr string) string {
	if a := identify(info, command); a != nil && !hasKey(a, env, sandboxed) {
		h := a.name + " found no API key (set " + strings.Join(a.keys, " or ")
		if sandboxed {
			h += "; a login saved in your HOME is not in the sandbox's HOME unless the sandbox is given it"
		}
		return h + ")"
	}
	if line := keyLine(stderr); line != "" {
		return "the agent's stderr says: " + line
	}
	return ""
}

// identify finds the known agent info (or else the command line) names.
func identify(info, command []string) *keyedAgent {
	words := info
	if strings.Join(info, "") == "" {
		// Every path segment of every word: node .../claude-code-acp/dist/index.js.
		words = nil
		for _, w := range command {
			words = append(words, strings.Split(w, "/")...)
		}
	}
	for i := range keyedAgents {
		a := &keyedAgents[i]
		for _, w := range words {
			for _, m := range a.match {
				if strings.Contains(strings.ToLower(w), m) {
					return a
				}
			}
		}
	}
	return nil
}

// hasKey says whether env gives the agent a key or other credentials, or
// (outside a sandbox) its saved login exists.
func hasKey(a *keyedAgent, env []string, sandboxed bool) bool {
	get := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	for _, k := range append(append([]string(nil), a.keys...), a.other...) {
		if get(k) != "" {
			return true
		}
	}
	if sandboxed {
		return false
	}
	dir := ""
	if a.dirVar != "" {
		dir = get(a.dirVar)
	}
	if dir == "" && get("HOME") != "" {
		dir = filepath.Join(get("HOME"), a.homeDir)
	}
	if dir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, a.login))
	return err == nil
}

// keyWords mark a stderr line about a key or a login.
var keyWords = []string{"api key", "api_key", "apikey", "/login", "not logged in", "log in", "login required", "credentials"}

// keyLine is the last line of stderr about a key or a login, cut to 200
// bytes; "" when there is none.
func keyLine(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		low := strings.ToLower(l)
		for _, w := range keyWords {
			if strings.Contains(low, w) {
				if len(l) > 200 {
					l = strings.ToValidUTF8(l[:200], "") + "..."
				}
				return l
			}
		}
	}
	return ""
}
