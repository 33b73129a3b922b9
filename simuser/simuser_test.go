package simuser

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"harness/schemas"
)

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want Reply
		err  string
	}{
		{out: `{"message":"hi"}`, want: Reply{Message: "hi"}},
		{out: "debug\n{\"stop\":true,\"reason\":\"ok\"}\n\n", want: Reply{Stop: true, Reason: "ok"}},
		{out: "plain words", err: "not a JSON reply"},
		{out: `{"reason":"x"}`, err: "neither a message nor a stop"},
		{out: "", err: "not a JSON reply"},
	} {
		got, err := ParseReply([]byte(tc.out))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.out, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.out, got, err, tc.want)
		}
	}
}

// scripted answers with its list, then stops; it records what it saw.
type scripted struct {
	replies []Reply
	seen    []Conversation
}

func (s *scripted) Next(_ context.Context, c Conversation) (Reply, error) {
	s.seen = append(s.seen, c)
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r, nil
}

func caseWith(u schemas.SimUser) *schemas.PromptCase {
	return &schemas.PromptCase{ID: "c", Input: schemas.SingleTurn("hello"), User: &u}
}

func TestTalkEnds(t *testing.T) {
	ctx := context.Background()
	// The user stops.
	u := &scripted{replies: []Reply{{Message: "two"}, {Stop: true, Reason: "enough"}}}
	talk := New(u, caseWith(schemas.SimUser{Command: []string{"x"}, Goal: "g"}), 1)
	talk.Sent("hello")
	talk.Answered("hi", "end_turn")
	next, done, err := talk.Next(ctx)
	if next != "two" || done || err != nil {
		t.Fatalf("turn 2: %q %v %v", next, done, err)
	}
	talk.Sent(next)
	talk.Answered("hi again", "end_turn")
	if _, done, _ := talk.Next(ctx); !done {
		t.Fatal("the user's stop did not end the talk")
	}
	if o := talk.Outcome(); !reflect.DeepEqual(o, schemas.SimUserOutcome{Turns: 2, Ended: schemas.UserEndStop, Reason: "enough"}) {
		t.Errorf("outcome %+v", o)
	}
	if c := u.seen[1]; c.Turn != 3 || c.Goal != "g" || len(c.Messages) != 4 || c.Messages[3].Content != "hi again" {
		t.Errorf("the user saw %+v", c)
	}
	// The agent's stop ends it without asking the user.
	u = &scripted{}
	talk = New(u, caseWith(schemas.SimUser{Command: []string{"x"}}), 1)
	talk.Sent("hello")
	talk.Answered("", "refusal")
	if _, done, _ := talk.Next(ctx); !done || talk.Outcome().Ended != schemas.UserEndAgentStop || len(u.seen) != 0 {
		t.Errorf("agent stop: %+v, user asked %d times", talk.Outcome(), len(u.seen))
	}
	// The turn limit ends it.
	talk = New(u, caseWith(schemas.SimUser{Command: []string{"x"}, MaxTurns: 1}), 1)
	talk.Sent("hello")
	talk.Answered("hi", "end_turn")
	if _, done, _ := talk.Next(ctx); !done || talk.Outcome().Ended != schemas.UserEndMaxTurns || len(u.seen) != 0 {
		t.Errorf("limit: %+v", talk.Outcome())
	}
}

func TestExecUserHoldsAConversation(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	user, _ := filepath.Abs("testdata/user.py")
	e := &Exec{Command: []string{user}, Timeout: time.Minute}
	talk := New(e, caseWith(schemas.SimUser{Command: e.Command}), 1)
	say := "echo start"
	for i := 0; ; i++ {
		talk.Sent(say)
		talk.Answered(strings.TrimPrefix(say, "echo "), "end_turn")
		next, done, err := talk.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		say = next
		if i > 10 {
			t.Fatal("the user never stopped")
		}
	}
	want := []string{"echo start", "echo t2<start>", "echo t3<t2<start>>", "echo t4<t3<t2<start>>>"}
	if got := talk.Turns(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("turns %q, want %q", got, want)
	}
	if o := talk.Outcome(); o.Ended != schemas.UserEndStop || o.Reason != "done after 4 turns" || o.Turns != 4 {
		t.Errorf("outcome %+v", o)
	}
}

func TestExecUserFailure(t *testing.T) {
	e := &Exec{Command: []string{"sh", "-c", "echo oops >&2; exit 4"}}
	_, err := e.Next(context.Background(), Conversation{})
	if err == nil || !strings.Contains(err.Error(), "exit status 4: oops") {
		t.Errorf("err = %v", err)
	}
	e = &Exec{Command: []string{"sh", "-c", "sleep 30"}, Timeout: 50 * time.Millisecond}
	_, err = e.Next(context.Background(), Conversation{})
	if err == nil || !strings.Contains(err.Error(), "no reply within") {
		t.Errorf("err = %v", err)
	}
}
