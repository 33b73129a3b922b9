// Package simuser drives a conversation with a simulated user: after each
// of the agent's turns it hands the conversation so far to the user (an
// executable reading JSON on stdin, a model told the persona and goal, or
// a recorded user played back) and takes the next user message, or says
// why the conversation is over (the user stopped, the agent's turn ended
// with a stop, or the turn limit was reached).
package simuser

import (
	"context"
	"encoding/json"
	"fmt"

	"harness/schemas"
)

// Roles of a conversation's messages.
const (
	RoleUser  = "user"
	RoleAgent = "agent"
)

// Message is one message of the conversation.
type Message struct {
	// Role is user or agent.
	Role string `json:"role"`
	// Content is the message's text (an agent's turn: its message text).
	Content string `json:"content"`
	// StopReason is an agent turn's stop reason.
	StopReason string `json:"stopReason,omitempty"`
}

// Conversation is what the user reads on stdin.
type Conversation struct {
	// CaseID and Trial name the unit.
	CaseID string `json:"caseId"`
	Trial  int    `json:"trial"`
	// Turn is the user turn to write (1-based, the input's turns counted).
	Turn int `json:"turn"`
	// MaxTurns is the user's turn limit.
	MaxTurns int `json:"maxTurns"`
	// Goal and Persona are the case's, as written.
	Goal    string `json:"goal,omitempty"`
	Persona string `json:"persona,omitempty"`
	// Messages is the conversation so far, oldest first.
	Messages []Message `json:"messages"`
}

// Reply is what the user writes: the next message, or a stop.
type Reply struct {
	// Message is the next user message.
	Message string `json:"message,omitempty"`
	// Stop ends the conversation; Reason says why.
	Stop   bool   `json:"stop,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ParseReply reads a user's output: one JSON object, {"message": "..."}
// or {"stop": true, "reason": "..."}; when the whole output is not JSON,
// its last non-empty line is.
func ParseReply(out []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(out, &r); err != nil {
		line := lastLine(out)
		if line == nil || json.Unmarshal(line, &r) != nil {
			return Reply{}, fmt.Errorf("the user's output is not a JSON reply ({\"message\": ...} or {\"stop\": true}): %q", clip(out))
		}
	}
	if !r.Stop && r.Message == "" {
		return Reply{}, fmt.Errorf("the user's reply has neither a message nor a stop: %q", clip(out))
	}
	return r, nil
}

func lastLine(b []byte) []byte {
	end := len(b)
	for end > 0 {
		start := end - 1
		for start >= 0 && b[start] != '\n' {
			start--
		}
		line := trim(b[start+1 : end])
		if len(line) > 0 {
			return line
		}
		end = start
		if end < 0 {
			break
		}
	}
	return nil
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// User writes the next user message of a conversation.
type User interface {
	Next(ctx context.Context, c Conversation) (Reply, error)
}

// Talk is one conversation: the case's opening turns, then the user's.
type Talk struct {
	user    User
	conv    Conversation
	outcome schemas.SimUserOutcome
}

// New starts the conversation of a case with its simulated user spec.
func New(user User, c *schemas.PromptCase, trial int) *Talk {
	t := &Talk{user: user, conv: Conversation{CaseID: c.ID, Trial: trial, MaxTurns: c.User.Limit(),
		Goal: c.User.Goal, Persona: c.User.Persona, Messages: []Message{}}}
	return t
}

// Sent notes a user turn sent to the agent.
func (t *Talk) Sent(text string) {
	t.conv.Messages = append(t.conv.Messages, Message{Role: RoleUser, Content: text})
	t.outcome.Turns++
}

// Answered notes the agent's answer to the last user turn and its stop
// reason.
func (t *Talk) Answered(text, stopReason string) {
	t.conv.Messages = append(t.conv.Messages, Message{Role: RoleAgent, Content: text, StopReason: stopReason})
}

// Next asks the user for the next turn after the agent's answer. done
// says the conversation is over (Outcome says why); a user that failed is
// err, and the conversation is over as well.
func (t *Talk) Next(ctx context.Context) (text string, done bool, err error) {
	if n := len(t.conv.Messages); n > 0 {
		if last := t.conv.Messages[n-1]; last.Role == RoleAgent && last.StopReason != "" && last.StopReason != "end_turn" {
			t.outcome.Ended, t.outcome.Reason = schemas.UserEndAgentStop, last.StopReason
			return "", true, nil
		}
	}
	if t.outcome.Turns >= t.conv.MaxTurns {
		t.outcome.Ended = schemas.UserEndMaxTurns
		return "", true, nil
	}
	t.conv.Turn = t.outcome.Turns + 1
	r, err := t.user.Next(ctx, t.conv)
	if err != nil {
		t.outcome.Ended, t.outcome.Reason = schemas.UserEndError, err.Error()
		return "", true, fmt.Errorf("simulated user, turn %d: %w", t.conv.Turn, err)
	}
	if r.Stop {
		t.outcome.Ended, t.outcome.Reason = schemas.UserEndStop, r.Reason
		return "", true, nil
	}
	return r.Message, false, nil
}

// Failed marks the conversation ended by a turn that failed.
func (t *Talk) Failed(why string) {
	t.outcome.Ended, t.outcome.Reason = schemas.UserEndError, why
}

// Outcome is how the conversation went so far.
func (t *Talk) Outcome() schemas.SimUserOutcome { return t.outcome }

// Turns are the user turns sent, in order.
func (t *Talk) Turns() []string {
	var out []string
	for _, m := range t.conv.Messages {
		if m.Role == RoleUser {
			out = append(out, m.Content)
		}
	}
	return out
}

// Recorded is a user that says again what a recorded one said (a
// replay): turn n is Turns[n-1] (the input's turns first), and past them
// the conversation ends as it did: a stop with its reason, or, for a
// recorded failure, an error.
type Recorded struct {
	Turns  []string
	Ended  string
	Reason string
}

// Next implements User.
func (r *Recorded) Next(_ context.Context, c Conversation) (Reply, error) {
	if c.Turn >= 1 && c.Turn <= len(r.Turns) {
		return Reply{Message: r.Turns[c.Turn-1]}, nil
	}
	if r.Ended == schemas.UserEndError {
		return Reply{}, fmt.Errorf("the recorded user failed: %s", r.Reason)
	}
	return Reply{Stop: true, Reason: r.Reason}, nil
}
