package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// SimUser is a case's simulated user: an executable that reads the
// conversation so far and writes the next user message, or a stop; or a
// model, told the persona and the goal, that does the same. The case's
// input opens the conversation; the user writes the turns after it.
type SimUser struct {
	// Command is the executable and its arguments (a string is a command
	// of one word); a relative path starting with ./ or ../ is relative to
	// the file that names it.
	Command []string `json:"command,omitempty"`
	// Model is the model of a model user (Command and Model exclude each
	// other); Provider ("openai" or "anthropic", from the model's name when
	// empty), BaseURL, APIKeyEnv, Temperature and MaxTokens say how it is
	// called, as an LLM judge's.
	Model       string   `json:"model,omitempty"`
	Provider    string   `json:"provider,omitempty"`
	BaseURL     string   `json:"baseURL,omitempty"`
	APIKeyEnv   string   `json:"apiKeyEnv,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   int      `json:"maxTokens,omitempty"`
	// Prompt is a model user's system prompt, replacing the default one
	// ({{persona}}, {{goal}} and {{maxTurns}} in it are replaced);
	// PromptFile names a file that holds it, relative to the file that
	// names it (read when the case is loaded, into Prompt).
	Prompt     string `json:"prompt,omitempty"`
	PromptFile string `json:"promptFile,omitempty"`
	// MaxTurns caps the user turns of the conversation, the input's
	// included (DefaultUserMaxTurns when 0).
	MaxTurns int `json:"maxTurns,omitempty"`
	// Goal and Persona are handed to the user as they are.
	Goal    string `json:"goal,omitempty"`
	Persona string `json:"persona,omitempty"`
}

// DefaultUserMaxTurns is a simulated user's turn limit when its case sets
// none.
const DefaultUserMaxTurns = 10

// Limit is the user's turn limit.
func (u *SimUser) Limit() int {
	if u.MaxTurns > 0 {
		return u.MaxTurns
	}
	return DefaultUserMaxTurns
}

// ParseSimUser decodes and checks a case's user. Errors are *InputError
// whose Field is the key below user ("user.maxTurns").
func ParseSimUser(raw []byte) (*SimUser, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil || probe == nil {
		return nil, &InputError{Field: "user", Msg: "must be an object {command or model, maxTurns, goal, persona, ...}"}
	}
	keys := make([]string, 0, len(probe))
	for k := range probe {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	u := &SimUser{}
	for _, k := range keys {
		v := probe[k]
		bad := func(msg string) error { return &InputError{Field: "user." + k, Msg: msg} }
		switch k {
		case "command":
			var s string
			if json.Unmarshal(v, &s) == nil {
				if s == "" {
					return nil, bad("is empty")
				}
				u.Command = []string{s}
				continue
			}
			if err := json.Unmarshal(v, &u.Command); err != nil || len(u.Command) == 0 || u.Command[0] == "" {
				return nil, bad("must be an executable: a string or a non-empty array of strings")
			}
		case "maxTurns":
			var n json.Number
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if err := d.Decode(&n); err != nil {
				return nil, bad("must be a whole number of turns, at least 1")
			}
			i, err := n.Int64()
			if err != nil || i < 1 {
				return nil, bad("must be a whole number of turns, at least 1")
			}
			u.MaxTurns = int(i)
		case "goal", "persona", "model", "provider", "baseURL", "apiKeyEnv", "prompt", "promptFile":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, bad("must be a string")
			}
			switch k {
			case "goal":
				u.Goal = s
			case "persona":
				u.Persona = s
			case "model":
				if s == "" {
					return nil, bad("is empty")
				}
				u.Model = s
			case "provider":
				if s != "openai" && s != "anthropic" {
					return nil, bad(fmt.Sprintf("unknown provider %q (want openai or anthropic)", s))
				}
				u.Provider = s
			case "baseURL":
				u.BaseURL = s
			case "apiKeyEnv":
				u.APIKeyEnv = s
			case "prompt":
				u.Prompt = s
			case "promptFile":
				if s == "" {
					return nil, bad("is empty")
				}
				u.PromptFile = s
			}
		case "temperature":
			var t float64
			if err := json.Unmarshal(v, &t); err != nil || t < 0 || t > 2 {
				return nil, bad("must be a number between 0 and 2")
			}
			u.Temperature = &t
		case "maxTokens":
			var n json.Number
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			i, err := int64(0), d.Decode(&n)
			if err == nil {
				i, err = n.Int64()
			}
			if err != nil || i < 1 {
				return nil, bad("must be a whole number of tokens, at least 1")
			}
			u.MaxTokens = int(i)
		default:
			return nil, bad("unknown key (known: apiKeyEnv, baseURL, command, goal, maxTokens, maxTurns, model, persona, prompt, promptFile, provider, temperature)")
		}
	}
	switch {
	case len(u.Command) > 0 && u.Model != "":
		return nil, &InputError{Field: "user.model", Msg: "give either command (an executable user) or model (a model user), not both"}
	case len(u.Command) == 0 && u.Model == "":
		return nil, &InputError{Field: "user.command", Msg: "missing (a simulated user is an executable, command, or a model, model)"}
	case u.Prompt != "" && u.PromptFile != "":
		return nil, &InputError{Field: "user.promptFile", Msg: "give either prompt or promptFile, not both"}
	}
	if u.Model == "" {
		for _, k := range []string{"provider", "baseURL", "apiKeyEnv", "temperature", "maxTokens", "prompt", "promptFile"} {
			if _, ok := probe[k]; ok {
				return nil, &InputError{Field: "user." + k, Msg: "is a model user's setting (this user is a command)"}
			}
		}
	}
	return u, nil
}

// IsModel says the user is a model, not an executable.
func (u *SimUser) IsModel() bool { return u.Model != "" }

// UnmarshalJSON decodes a user as ParseSimUser does.
func (u *SimUser) UnmarshalJSON(b []byte) error {
	v, err := ParseSimUser(b)
	if err != nil {
		return err
	}
	*u = *v
	return nil
}

// How a simulated user's conversation ended (SimUserOutcome.Ended).
const (
	UserEndStop      = "user_stop"  // the user wrote a stop
	UserEndMaxTurns  = "max_turns"  // the user's turn limit was reached
	UserEndAgentStop = "agent_stop" // the agent's turn ended with a stop reason other than end_turn
	UserEndError     = "error"      // a turn or the user failed
)

// SimUserOutcome is what a simulated user's conversation came to, on the
// record.
type SimUserOutcome struct {
	// Turns counts the user turns sent, the input's included.
	Turns int `json:"turns"`
	// Ended says why the conversation ended: user_stop, max_turns,
	// agent_stop or error.
	Ended string `json:"ended"`
	// Reason is the user's reason for stopping, or the agent's stop reason.
	Reason string `json:"reason,omitempty"`
	// Calls are a model user's calls to its model, each priced (never
	// the agent's: they are not in the record's modelCalls).
	Calls []ModelCall `json:"calls,omitempty"`
}

// Artifacts are the files a Harbor task's artifacts copied out of a
// trial's environment after it.
type Artifacts struct {
	// Dir is the trial's artifacts directory.
	Dir string `json:"dir"`
	// Paths are the artifacts copied, relative to Dir.
	Paths []string `json:"paths,omitempty"`
	// Missing says, per artifact that could not be copied, why.
	Missing []string `json:"missing,omitempty"`
}
