package acp

import "encoding/json"

// UnitMetaKey names harness's own ACP extension. An agent whose initialize
// answer has agentCapabilities._meta[UnitMetaKey] = true is told, in the
// _meta of each session/new, which case and trial the session is for:
// {"_meta": {UnitMetaKey: {"id": ID, "trial": N}}}. harness replay asks for
// it, to serve exactly the recorded trial; no other agent is told anything.
const UnitMetaKey = "harness/unit"

// UnitMeta is the value under UnitMetaKey in session/new's _meta.
type UnitMeta struct {
	ID    string `json:"id"`
	Trial int    `json:"trial"`
}

// WantsUnit reports whether the agent asked to be told the unit of each
// session (see UnitMetaKey).
func (r *InitializeResponse) WantsUnit() bool {
	if r == nil || len(r.AgentCapabilities) == 0 {
		return false
	}
	var caps struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(r.AgentCapabilities, &caps) != nil {
		return false
	}
	return string(caps.Meta[UnitMetaKey]) == "true"
}

// SessionUnitMeta is the _meta of a session/new that tells the agent its
// unit.
func SessionUnitMeta(id string, trial int) json.RawMessage {
	b, _ := json.Marshal(map[string]UnitMeta{UnitMetaKey: {ID: id, Trial: trial}})
	return b
}

// ReadUnitMeta returns the unit a session/new's _meta names, if any.
func ReadUnitMeta(meta json.RawMessage) (UnitMeta, bool) {
	if len(meta) == 0 {
		return UnitMeta{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return UnitMeta{}, false
	}
	var u UnitMeta
	if raw, ok := m[UnitMetaKey]; !ok || json.Unmarshal(raw, &u) != nil || u.ID == "" || u.Trial < 1 {
		return UnitMeta{}, false
	}
	return u, true
}

// UserMetaKey names the recorded conversation of a case's simulated user
// in the _meta of a session/new answer, from an agent that asked for
// UnitMetaKey (harness replay): the client then plays these user turns
// back instead of asking the case's user.
const UserMetaKey = "harness/simulatedUser"

// UserMeta is the value under UserMetaKey: every user turn sent (the
// input's first), and how the conversation ended.
type UserMeta struct {
	Turns  []string `json:"turns"`
	Ended  string   `json:"ended"`
	Reason string   `json:"reason,omitempty"`
}

// SessionUserMeta is the _meta of a session/new answer that carries a
// recorded simulated user's conversation.
func SessionUserMeta(u UserMeta) json.RawMessage {
	b, _ := json.Marshal(map[string]UserMeta{UserMetaKey: u})
	return b
}

// ReadUserMeta returns the recorded conversation a session/new answer's
// _meta carries, if any.
func ReadUserMeta(meta json.RawMessage) (UserMeta, bool) {
	if len(meta) == 0 {
		return UserMeta{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return UserMeta{}, false
	}
	var u UserMeta
	if raw, ok := m[UserMetaKey]; !ok || json.Unmarshal(raw, &u) != nil || len(u.Turns) == 0 {
		return UserMeta{}, false
	}
	return u, true
}
