package chatmodel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// server answers the statuses in order (200 with body after them) and
// keeps every request body.
func server(t *testing.T, statuses []int, body string) (*httptest.Server, *[]map[string]any) {
	t.Helper()
	var mu sync.Mutex
	var seen []map[string]any
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		mu.Lock()
		seen = append(seen, m)
		i := n
		n++
		mu.Unlock()
		if i < len(statuses) {
			w.WriteHeader(statuses[i])
			io.WriteString(w, `{"error":"busy, key sk-secret-123"}`)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestCallRetriesAndObservesEveryAttempt(t *testing.T) {
	srv, seen := server(t, []int{429}, `{"choices":[{"message":{"content":"{\"message\":\"hi\"}"}}],"usage":{"prompt_tokens":12,"completion_tokens":3}}`)
	m := &Model{Provider: ProviderOpenAI, Model: "gpt-x", BaseURL: srv.URL, Key: "sk-secret-123", MaxTokens: 50, MaxRetries: 2}
	schema := map[string]any{"type": "object"}
	c := m.NewChat("be a user", []Message{{Role: "assistant", Content: "hello"}, {Role: "user", Content: "hi there"}}, schema, Tool{Format: "user_reply"})
	var attempts []Attempt
	var u Usage
	reply, err := m.Call(context.Background(), c, CallOptions{Usage: &u, Observe: func(a Attempt) { attempts = append(attempts, a) }})
	if err != nil || reply.Text != `{"message":"hi"}` {
		t.Fatalf("reply %+v, err %v", reply, err)
	}
	if len(attempts) != 2 || attempts[0].Status != 429 || attempts[0].Err == nil || attempts[1].Status != 200 || attempts[1].Err != nil {
		t.Fatalf("attempts %+v", attempts)
	}
	if strings.Contains(attempts[0].Err.Error(), "sk-secret-123") || !strings.Contains(attempts[0].Err.Error(), "[REDACTED]") {
		t.Errorf("the key is in the error: %v", attempts[0].Err)
	}
	if *attempts[1].InputTokens != 12 || *attempts[1].OutputTokens != 3 || u.Calls != 1 || u.Input != 12 || attempts[1].API != "chat.completions" {
		t.Errorf("tokens %+v usage %+v", attempts[1], u)
	}
	msgs := (*seen)[1]["messages"].([]any)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "system,assistant,user" {
		t.Errorf("roles %v", roles)
	}
	if f := (*seen)[1]["response_format"].(map[string]any)["json_schema"].(map[string]any)["name"]; f != "user_reply" {
		t.Errorf("response format %v", f)
	}
}

func TestAnthropicForcedToolAndSystem(t *testing.T) {
	srv, seen := server(t, nil, `{"content":[{"type":"tool_use","id":"tu1","name":"next","input":{"stop":true}}],"usage":{"input_tokens":7,"output_tokens":2}}`)
	m := &Model{Provider: ProviderAnthropic, Model: "claude-x", BaseURL: srv.URL, MaxTokens: 50}
	c := m.NewChat("sys", []Message{{Role: "user", Content: "q"}}, map[string]any{"type": "object"}, Tool{Name: "next"})
	reply, err := m.Call(context.Background(), c, CallOptions{})
	if err != nil || reply.Text != `{"stop":true}` {
		t.Fatalf("reply %+v, err %v", reply, err)
	}
	req := (*seen)[0]
	if req["system"] != "sys" || req["tool_choice"].(map[string]any)["name"] != "next" {
		t.Errorf("request %v", req)
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	m := &Model{Provider: ProviderOpenAI, Model: "m", BaseURL: url}
	_, err := m.Call(context.Background(), m.NewTextConversation("", "q"), CallOptions{})
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Errorf("err %v, want unreachable", err)
	}
}
