package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MCP server transports.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
	MCPSSE   = "sse"
)

// MCPServer is an MCP server given to the agent in session/new. Type is
// "" or "stdio" for a server the agent starts (Command, Args, Env), "http"
// or "sse" for one it connects to (URL, Headers).
type MCPServer struct {
	Type    string
	Name    string
	Command string
	Args    []string
	Env     []NameValue
	URL     string
	Headers []NameValue
	Meta    json.RawMessage
}

// NameValue is an environment variable of a stdio MCP server or a header
// of an HTTP one.
type NameValue struct {
	Name  string          `json:"name"`
	Value string          `json:"value"`
	Meta  json.RawMessage `json:"_meta,omitempty"`
}

type mcpStdio struct {
	Type    string          `json:"type,omitempty"`
	Name    string          `json:"name"`
	Command string          `json:"command"`
	Args    []string        `json:"args"`
	Env     []NameValue     `json:"env"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

type mcpRemote struct {
	Type    string          `json:"type"`
	Name    string          `json:"name"`
	URL     string          `json:"url"`
	Headers []NameValue     `json:"headers"`
	Meta    json.RawMessage `json:"_meta,omitempty"`
}

// MarshalJSON writes the server in the shape of its transport, with the
// arrays ACP requires always present.
func (s MCPServer) MarshalJSON() ([]byte, error) {
	switch s.Type {
	case "", MCPStdio:
		return json.Marshal(mcpStdio{Type: s.Type, Name: s.Name, Command: s.Command, Args: nonNil(s.Args), Env: nonNil(s.Env), Meta: s.Meta})
	case MCPHTTP, MCPSSE:
		return json.Marshal(mcpRemote{Type: s.Type, Name: s.Name, URL: s.URL, Headers: nonNil(s.Headers), Meta: s.Meta})
	}
	return nil, fmt.Errorf("mcp server %q: unknown type %q", s.Name, s.Type)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// UnmarshalJSON reads one server strictly: a field its transport does not
// have, a missing required field or a wrong type is an error naming the
// field. Null args, env and headers read as empty, as ACP allows.
func (s *MCPServer) UnmarshalJSON(b []byte) error {
	var probe struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return mcpFieldError(err)
	}
	typ := ""
	if probe.Type != nil {
		typ = *probe.Type
	}
	var required []string
	switch typ {
	case "", MCPStdio:
		var v mcpStdio
		if err := strictDecode(b, &v); err != nil {
			return err
		}
		*s = MCPServer{Type: v.Type, Name: v.Name, Command: v.Command, Args: nonNil(v.Args), Env: nonNil(v.Env), Meta: v.Meta}
		required = []string{"name", "command"}
	case MCPHTTP, MCPSSE:
		var v mcpRemote
		if err := strictDecode(b, &v); err != nil {
			return err
		}
		*s = MCPServer{Type: v.Type, Name: v.Name, URL: v.URL, Headers: nonNil(v.Headers), Meta: v.Meta}
		required = []string{"name", "url"}
	default:
		return fmt.Errorf("field type: %q is not a transport (want stdio, http or sse)", typ)
	}
	var present map[string]json.RawMessage
	_ = json.Unmarshal(b, &present)
	for _, f := range required {
		if _, ok := present[f]; !ok {
			return fmt.Errorf("field %s: missing", f)
		}
	}
	if s.Name == "" {
		return errors.New("field name: empty")
	}
	for _, nv := range append(s.Env, s.Headers...) {
		if nv.Name == "" {
			return errors.New("an env or headers entry has no name")
		}
	}
	return nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return mcpFieldError(err)
	}
	return nil
}

// mcpFieldError says which field a decoding error is about.
func mcpFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("field %s: not a field of this transport", strings.Trim(msg, `"`))
	}
	return err
}

// ParseMCPServer reads an MCP server configuration from JSON text.
func ParseMCPServer(text string) (MCPServer, error) {
	var s MCPServer
	trimmed := strings.TrimSpace(text)
	if !strings.HasPrefix(trimmed, "{") {
		return s, errors.New("not a JSON object")
	}
	if err := json.Unmarshal([]byte(trimmed), &s); err != nil {
		return s, err
	}
	return s, nil
}
