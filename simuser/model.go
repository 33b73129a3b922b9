package simuser

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"harness/chatmodel"
	"harness/ledger"
	"harness/schemas"
)

// DefaultPrompt is a model user's system prompt when its case gives none;
// {{persona}}, {{goal}} and {{maxTurns}} are replaced (a persona or goal
// left empty reads as none given).
const DefaultPrompt = `You play a user of an AI coding assistant, in a test of the assistant. You are the user, not the assistant: write only what this user would write to the assistant next, in their voice, and never do the assistant's work yourself.

Who you are: {{persona}}
What you want from the assistant: {{goal}}

The assistant's messages come to you as the user's; your own earlier messages are yours. Answer with a JSON object, and nothing else:
- {"message": "..."}: your next message to the assistant;
- {"stop": true, "reason": "..."}: the conversation is over, because your goal is reached, or cannot be reached, or the assistant has nothing more to give.
The conversation has at most {{maxTurns}} of your messages.`

// replySchema is the JSON Schema of a model user's answer.
var replySchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"message": map[string]any{"type": "string", "description": "the user's next message to the assistant"},
		"stop":    map[string]any{"type": "boolean", "description": "true ends the conversation"},
		"reason":  map[string]any{"type": "string", "description": "why the conversation ends"},
	},
}

// replyTool names the answer: Anthropic's forced tool and OpenAI's
// response format.
var replyTool = chatmodel.Tool{Name: "next_user_turn", Description: "Write the user's next message, or stop the conversation.", Format: "next_user_turn"}

// opening is the first message the model reads: the conversation's first
// turn is its own (the case's input), and a chat starts with the other
// side's.
const opening = "(The conversation starts. Write your first message to the assistant.)"

// emptyAnswer stands for an agent turn with no message text.
const emptyAnswer = "(The assistant answered with no message.)"

// Model is a user that is a model: each turn it reads the conversation
// with the roles flipped (the agent's messages as its user's, its own as
// its answers) under a system prompt of the persona and goal, and answers
// {"message": ...} or {"stop": true, "reason": ...} (a JSON Schema asks for
// it: OpenAI's response format, Anthropic's forced tool call). A reply that
// is not such a JSON object is asked for again once.
type Model struct {
	// Client calls the model.
	Client *chatmodel.Model
	// Prompt is the system prompt (empty: DefaultPrompt), its
	// placeholders not yet replaced.
	Prompt string
	// Ended, when set, is told of each call as it ends, once it is among
	// Calls.
	Ended func(schemas.ModelCall)

	mu    sync.Mutex
	calls []schemas.ModelCall
}

// SystemPrompt is the prompt with the conversation's persona, goal and
// turn limit put in.
func SystemPrompt(prompt string, c Conversation) string {
	if prompt == "" {
		prompt = DefaultPrompt
	}
	none := func(s string) string {
		if strings.TrimSpace(s) == "" {
			return "(none given)"
		}
		return s
	}
	return strings.NewReplacer("{{persona}}", none(c.Persona), "{{goal}}", none(c.Goal),
		"{{maxTurns}}", strconv.Itoa(c.MaxTurns)).Replace(prompt)
}

// Chat is the conversation as the model reads it: its own turns as the
// assistant's, the agent's as the user's, after an opening line.
func Chat(c Conversation) []chatmodel.Message {
	msgs := []chatmodel.Message{{Role: "user", Content: opening}}
	for _, m := range c.Messages {
		switch m.Role {
		case RoleUser:
			msgs = append(msgs, chatmodel.Message{Role: "assistant", Content: m.Content})
		case RoleAgent:
			text := m.Content
			if strings.TrimSpace(text) == "" {
				text = emptyAnswer
			}
			msgs = append(msgs, chatmodel.Message{Role: "user", Content: text})
		}
	}
	return msgs
}

// Next asks the model for the next turn.
func (m *Model) Next(ctx context.Context, c Conversation) (Reply, error) {
	conv := m.Client.NewChat(SystemPrompt(m.Prompt, c), Chat(c), replySchema, replyTool)
	observe := func(a chatmodel.Attempt) { m.record(c.Turn, a) }
	var problem string
	for attempt := 0; attempt < 2; attempt++ {
		reply, err := m.Client.Call(ctx, conv, chatmodel.CallOptions{Observe: observe})
		if err != nil {
			return Reply{}, fmt.Errorf("model %s: %w", m.Client.Model, err)
		}
		r, err := ParseReply([]byte(chatmodel.StripFences(reply.Text)))
		if err == nil {
			return r, nil
		}
		problem = err.Error()
		conv.Retry(reply, `answer {"message": "..."} or {"stop": true, "reason": "..."}: `+problem)
	}
	return Reply{}, fmt.Errorf("model %s: no reply after a retry: %s", m.Client.Model, m.Client.Scrub(problem))
}

// Calls are the model calls made so far, in order.
func (m *Model) Calls() []schemas.ModelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]schemas.ModelCall(nil), m.calls...)
}

// record keeps one HTTP attempt as a model call of the user's turn.
func (m *Model) record(turn int, a chatmodel.Attempt) {
	sum := sha256.Sum256(a.Payload)
	call := schemas.ModelCall{
		Provider: m.Client.Provider, API: a.API, Model: m.Client.Model,
		RequestHash: hex.EncodeToString(sum[:]), Start: a.Start.UnixMilli(),
		Duration: a.Duration.Milliseconds(), Status: a.Status, Turn: turn,
		InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
	}
	if a.Body != nil {
		// The ledger's reading: Anthropic's cache reads and writes, and
		// OpenAI's cached input apart from the rest.
		ledger.ReadUsage(&call, a.Body)
	}
	if a.Err != nil && a.Status != 200 {
		call.Error = &schemas.ModelCallError{Kind: errorKind(a.Status), Message: m.Client.Scrub(a.Err.Error())}
	}
	m.mu.Lock()
	m.calls = append(m.calls, call)
	m.mu.Unlock()
	if m.Ended != nil {
		m.Ended(call)
	}
}

// errorKind is the kind of a failed call by its HTTP status.
func errorKind(status int) string {
	switch {
	case status == 0:
		return schemas.ModelErrConnection
	case status == 429:
		return schemas.ModelErrRateLimit
	case status == 529:
		return schemas.ModelErrOverloaded
	case status >= 500:
		return schemas.ModelErrServer
	}
	return schemas.ModelErrClient
}

// NewModel is the model user a case's user names, reached as an LLM
// judge is: the provider from the model's name when not given, the base
// URL from the user, else the provider's variable (OPENAI_BASE_URL,
// ANTHROPIC_BASE_URL), else the public API; the key from APIKeyEnv, else
// the provider's variable. getenv reads the environment; a key that is
// not set is an error unless a base URL was given.
func NewModel(u *schemas.SimUser, getenv func(string) string, client *http.Client) (*Model, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	cm := &chatmodel.Model{Provider: u.Provider, Model: u.Model, BaseURL: u.BaseURL, MaxTokens: 1024,
		HTTP: client, Backoff: 500 * time.Millisecond, MaxRetries: 4}
	if cm.Provider == "" {
		cm.Provider = chatmodel.GuessProvider(u.Model)
	}
	if u.Temperature != nil {
		cm.Temperature = *u.Temperature
	}
	if u.MaxTokens > 0 {
		cm.MaxTokens = u.MaxTokens
	}
	def := chatmodel.Defaults(cm.Provider)
	if cm.BaseURL == "" {
		cm.BaseURL = getenv(def.BaseURLEnv)
	}
	explicit := cm.BaseURL != ""
	if cm.BaseURL == "" {
		cm.BaseURL = def.BaseURL
	}
	cm.BaseURL = strings.TrimRight(cm.BaseURL, "/")
	keyEnv := u.APIKeyEnv
	if keyEnv == "" {
		keyEnv = def.KeyEnv
	}
	cm.Key = getenv(keyEnv)
	if cm.Key == "" && !explicit {
		return nil, &MissingKeyError{Model: u.Model, Provider: cm.Provider, Var: keyEnv, Named: u.APIKeyEnv != ""}
	}
	return &Model{Client: cm, Prompt: u.Prompt}, nil
}

// MissingKeyError is a model user whose API key variable is not set, with
// no base URL given (a local server may need no key).
type MissingKeyError struct {
	// Model and Provider are the user's model and its provider.
	Model, Provider string
	// Var is the variable the key is read from.
	Var string
	// Named says the user named Var (apiKeyEnv); else it is the
	// provider's own variable, chosen by the model.
	Named bool
}

// Error says which variable is not set.
func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("model %s: environment variable %s is not set (the %s API key)", e.Model, e.Var, e.Provider)
}

// Problem words the missing key for a message that names the case's
// user field (Field) itself.
func (e *MissingKeyError) Problem() string {
	return fmt.Sprintf("the simulated user's %s API key: environment variable %s is not set (set it, name another variable with apiKeyEnv, or give a baseURL)", e.Provider, e.Var)
}

// Field is the user's field that chose the variable: apiKeyEnv when the
// user named it, else model (the provider's variable).
func (e *MissingKeyError) Field() string {
	if e.Named {
		return "apiKeyEnv"
	}
	return "model"
}

// CheckKey says whether a model user can be reached as far as its
// settings and the environment tell: a *MissingKeyError when its key is
// not set and no base URL was given; nil for a command user.
func CheckKey(u *schemas.SimUser, getenv func(string) string) error {
	if u == nil || u.Model == "" {
		return nil
	}
	_, err := NewModel(u, getenv, nil)
	return err
}
