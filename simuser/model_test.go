package simuser

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"harness/schemas"
	"harness/testkit/fakemodel"
)

// TestModelUserReadsTheConversationFlipped serves an OpenAI chat
// completions endpoint that answers a bad reply, then a message, and
// checks what the model read: the system prompt with the persona and goal,
// the opening, the user's own turn as the assistant's, the agent's answer
// as the user's.
func TestModelUserReadsTheConversationFlipped(t *testing.T) {
	var bodies []map[string]any
	answers := []string{"I think I will say hi", "```json\n{\"message\": \"now run the tests\"}\n```"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		bodies = append(bodies, m)
		if r.Header.Get("Authorization") != "Bearer sk-test-9999" {
			t.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		a := answers[0]
		answers = answers[1:]
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": a}}},
			"usage": map[string]any{"prompt_tokens": 50, "completion_tokens": 5}})
	}))
	defer srv.Close()
	env := map[string]string{"USER_KEY": "sk-test-9999"}
	u := &schemas.SimUser{Model: "gpt-user", BaseURL: srv.URL, APIKeyEnv: "USER_KEY", Persona: "a hurried tester", Goal: "tests pass", MaxTurns: 3}
	m, err := NewModel(u, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	talk := New(m, &schemas.PromptCase{ID: "c", User: u}, 1)
	talk.Sent("fix the bug")
	talk.Answered("", "end_turn")
	next, done, err := talk.Next(context.Background())
	if err != nil || done || next != "now run the tests" {
		t.Fatalf("next %q done %v err %v", next, done, err)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d calls, want 2 (a retry after the reply that was no JSON)", len(bodies))
	}
	msgs := bodies[0]["messages"].([]any)
	var got []string
	for _, x := range msgs {
		m := x.(map[string]any)
		got = append(got, m["role"].(string)+": "+m["content"].(string))
	}
	if len(got) != 4 || !strings.Contains(got[0], "Who you are: a hurried tester") || !strings.Contains(got[0], "What you want from the assistant: tests pass") ||
		!strings.Contains(got[0], "at most 3 of your messages") || got[1] != "user: "+opening || got[2] != "assistant: fix the bug" || got[3] != "user: "+emptyAnswer {
		t.Errorf("the model read %q", got)
	}
	if rf := bodies[0]["response_format"].(map[string]any); rf["type"] != "json_schema" {
		t.Errorf("response format %v", rf)
	}
	calls := m.Calls()
	if len(calls) != 2 || calls[0].Turn != 2 || calls[0].Status != 200 || *calls[0].InputTokens != 50 || calls[0].Model != "gpt-user" || calls[0].API != "chat.completions" || len(calls[0].RequestHash) != 64 {
		t.Errorf("calls %+v", calls)
	}
}

func TestModelUserPrompt(t *testing.T) {
	c := Conversation{Persona: "", Goal: "g", MaxTurns: 4}
	if got := SystemPrompt("P={{persona}} G={{goal}} N={{maxTurns}}", c); got != "P=(none given) G=g N=4" {
		t.Errorf("prompt %q", got)
	}
}

func TestModelUserNeedsAKey(t *testing.T) {
	_, err := NewModel(&schemas.SimUser{Model: "claude-x"}, func(string) string { return "" }, nil)
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY is not set") {
		t.Errorf("err %v", err)
	}
	none := func(string) string { return "" }
	var mk *MissingKeyError
	if err := CheckKey(&schemas.SimUser{Model: "gpt-x", APIKeyEnv: "MY_KEY"}, none); !errors.As(err, &mk) || mk.Var != "MY_KEY" || mk.Field() != "apiKeyEnv" {
		t.Errorf("named variable: %v", err)
	}
	if err := CheckKey(&schemas.SimUser{Model: "gpt-x"}, none); !errors.As(err, &mk) || mk.Var != "OPENAI_API_KEY" || mk.Field() != "model" {
		t.Errorf("provider's variable: %v", err)
	}
	// a base URL without a key is a local server's; a command user has no key
	for _, u := range []*schemas.SimUser{{Model: "gpt-x", BaseURL: "http://127.0.0.1:9"}, {Command: []string{"./u.py"}}} {
		if err := CheckKey(u, none); err != nil {
			t.Errorf("%+v: %v", u, err)
		}
	}
	if err := CheckKey(&schemas.SimUser{Model: "gpt-x"}, func(k string) string { return map[string]string{"OPENAI_BASE_URL": "http://x"}[k] }); err != nil {
		t.Errorf("base URL from the environment: %v", err)
	}
}

// TestModelUserWithTheFakeAnthropic holds a conversation with the fake
// model's scripted user: three turns through the forced tool, then a stop.
func TestModelUserWithTheFakeAnthropic(t *testing.T) {
	srv := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{UserTurns: []string{"two after {{last}}", "three", "four"}, UserStop: "done"})
	defer srv.Close()
	u := &schemas.SimUser{Model: "claude-user", MaxTurns: 10}
	env := map[string]string{"ANTHROPIC_BASE_URL": srv.URL}
	m, err := NewModel(u, func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	talk := New(m, &schemas.PromptCase{ID: "c", User: u}, 1)
	say := "one"
	for i := 0; ; i++ {
		talk.Sent(say)
		talk.Answered("answer to "+say, "end_turn")
		next, done, err := talk.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		say = next
		if i > 5 {
			t.Fatal("the user never stopped")
		}
	}
	if got := strings.Join(talk.Turns(), "|"); got != "one|two after answer to one|three|four" {
		t.Errorf("turns %q", got)
	}
	if o := talk.Outcome(); o.Ended != schemas.UserEndStop || o.Reason != "done" || o.Turns != 4 {
		t.Errorf("outcome %+v", o)
	}
	if n := len(m.Calls()); n != 4 {
		t.Errorf("%d calls, want 4", n)
	}
}
