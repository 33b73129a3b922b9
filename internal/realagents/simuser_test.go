package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"harness/results"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/replaytest"
	"harness/testkit/testagents"
)

// scriptedUser is an executable simulated user: it asks for one shell
// echo a turn, naming the turn, and stops after the fourth.
const scriptedUser = `#!/bin/sh
turn=$(grep -o '"turn":[0-9]*' | head -n 1 | cut -d: -f2)
if [ "$turn" -gt 4 ]; then
	echo '{"stop": true, "reason": "four turns"}'
else
	echo "{\"message\": \"bash echo user-turn-$turn\"}"
fi
`

// TestClaudeCodeTalksWithSimulatedUsers holds two four-turn conversations
// with Claude Code (claude-agent-acp), each in one session: one with an
// executable user, one with a model user played by a second fake
// Anthropic server. The record holds every user turn, an answer to each,
// and the model user's calls.
func TestClaudeCodeTalksWithSimulatedUsers(t *testing.T) {
	t.Parallel()
	sb, _, agent := claudeSetupWith(t, testagents.ClaudeAdapters()[1], fakemodel.Options{})
	user := startModel(t, fakemodel.Anthropic, fakemodel.Options{
		UserTurns: []string{"bash echo model-turn-2", "bash echo model-turn-3", "bash echo model-turn-4"},
		UserStop:  "goal reached",
	})
	cfg, wire := baseConfig(t, sb, agent)
	env := map[string]string{"ANTHROPIC_BASE_URL": user.URL}
	cfg.Getenv = func(k string) string { return env[k] }
	script := sb.write(t, "user.sh", scriptedUser)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []schemas.PromptCase{
		{ID: "scripted", Input: schemas.SingleTurn("bash echo user-turn-1"), User: &schemas.SimUser{Command: []string{script}, MaxTurns: 10}},
		{ID: "model", Input: schemas.SingleTurn("bash echo model-turn-1"), User: &schemas.SimUser{Model: "claude-user-fake", Goal: "four echoes", MaxTurns: 10}},
	}
	recs := runPromptCases(t, cfg, casePointers(cases)...)

	for i, who := range []string{"user", "model"} {
		rec := recs[i]
		if rec.Error != nil {
			t.Fatalf("%s: error %+v\n%s", rec.ID, rec.Error, dump(rec))
		}
		var want []string
		for n := 1; n <= 4; n++ {
			want = append(want, fmt.Sprintf("bash echo %s-turn-%d", who, n))
		}
		if !slices.Equal(rec.Input.List, want) || rec.TurnCount != 4 {
			t.Errorf("%s: input %q, %d turns; want %q", rec.ID, rec.Input.List, rec.TurnCount, want)
		}
		if o := rec.SimulatedUser; o == nil || o.Turns != 4 || o.Ended != schemas.UserEndStop {
			t.Errorf("%s: simulatedUser %+v", rec.ID, o)
		}
		// An answer to each turn, built from that turn's echo.
		for n := 1; n <= 4; n++ {
			echo := fmt.Sprintf("%s-turn-%d", who, n)
			found := false
			for _, s := range rec.Trajectory {
				if s.Type == schemas.StepMessage && s.Turn == n && strings.Contains(s.TextContent(), fakemodel.FinalPrefix+echo) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no answer in turn %d with %q\n%s", rec.ID, n, echo, dump(rec))
			}
		}
		var written int
		for _, s := range rec.Trajectory {
			if s.Type == schemas.StepSimUser && s.TextContent() != "" {
				written++
			}
		}
		if written != 3 {
			t.Errorf("%s: %d simulated_user steps with a turn, want 3", rec.ID, written)
		}
		if rec.Session == nil || rec.Session.ID == "" {
			t.Errorf("%s: no session", rec.ID)
		}
	}
	if calls := recs[1].SimulatedUser.Calls; len(calls) != 4 || calls[0].Turn != 2 || calls[3].Turn != 5 || calls[0].Status != 200 {
		t.Errorf("model user calls %+v", calls)
	}
	if n := len(user.Requests()); n != 4 {
		t.Errorf("the user's model served %d requests, want 4", n)
	}
	// One session a conversation: two session/new, eight prompts.
	if n, p := wire.count(true, `"method":"session/new"`), wire.count(true, `"method":"session/prompt"`); n != 2 || p != 8 {
		t.Errorf("%d session/new and %d session/prompt sent, want 2 and 8", n, p)
	}

	// A replay of the records plays the recorded user turns back: the
	// users are neither run nor called (the executable would fail, the
	// model's server is gone), and the conversations are the same.
	var b strings.Builder
	for _, r := range recs {
		line, err := results.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	file := filepath.Join(t.TempDir(), "recorded.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	user.Close()
	served := len(user.Requests())
	rcfg, _ := baseConfig(t, sb, []string{os.Args[0]})
	rcfg.AgentEnv = append(append([]string(nil), sb.Env...), replaytest.Env+"="+file)
	rcfg.Getenv = cfg.Getenv
	cases[0].User = &schemas.SimUser{Command: []string{"/bin/false"}, MaxTurns: 10}
	replayed := runPromptCases(t, rcfg, casePointers(cases)...)
	for i, want := range recs {
		got := replayed[i]
		checkReplayed(t, want, got)
		if !slices.Equal(got.Input.List, want.Input.List) || got.SimulatedUser == nil || got.SimulatedUser.Turns != 4 || got.SimulatedUser.Ended != schemas.UserEndStop {
			t.Errorf("%s replayed: input %q, simulatedUser %+v", got.ID, got.Input.List, got.SimulatedUser)
		}
	}
	if n := len(user.Requests()); n != served {
		t.Errorf("the replay called the user's model: %d requests, %d before", n, served)
	}
}
