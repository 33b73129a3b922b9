package replay_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/replay"
)

// A client that does not say which trial a session is for (any ACP client
// but harness) gets trials by prompt: the n-th session with a prompt gets
// its n-th recorded trial, in the order the trials started; an unknown
// prompt, or one more session than recorded trials, is an error naming it;
// what the expected record sent before its first prompt goes out before
// session/new answers.
func TestServeByPromptOrder(t *testing.T) {
	t.Parallel()
	const results = `{"id":"x","trial":2,"input":"same","output":"second","timing":{"start":20},"trajectory":[{"type":"message","stepId":"x-t2-s1","timestamp":5,"turn":1,"content":"second","chunks":1}],"stopReason":"end_turn"}
{"id":"x","trial":1,"input":"same","output":"first","timing":{"start":10},"trajectory":[{"type":"commands","stepId":"x-t1-s1","timestamp":1,"phase":"setup","update":"available_commands_update","raw":{"sessionUpdate":"available_commands_update","availableCommands":[]}},{"type":"message","stepId":"x-t1-s2","timestamp":5,"turn":1,"content":"first","chunks":1}],"stopReason":"max_tokens"}
`
	lib, err := replay.Load("r.jsonl", strings.NewReader(results))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	toAgent, clientOut := io.Pipe()
	agentOut, fromAgent := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- replay.Serve(ctx, lib, toAgent, fromAgent, replay.Options{Version: "test"})
		fromAgent.Close()
	}()
	client := acp.Connect(ctx, agentOut, clientOut, acp.Options{ClientInfo: acp.Implementation{Name: "other-client", Version: "0"}})
	init, err := client.Initialize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !init.WantsUnit() || init.AgentInfo.Name != "harness-replay" {
		t.Errorf("initialize: %+v %s", init.AgentInfo, init.AgentCapabilities)
	}
	cwd := t.TempDir()
	session := func(prompt string) (*capture.Recorder, *acp.PromptResponse, error) {
		rec := capture.NewRecorder(time.Now())
		s, err := client.NewSession(ctx, cwd, nil)
		if err != nil {
			t.Fatal(err)
		}
		client.Attach(s.SessionID, cwd, rec)
		rec.BeginTurn(1, time.Now())
		resp, err := client.Prompt(ctx, s.SessionID, []acp.ContentBlock{acp.TextBlock(prompt)})
		rec.EndTurn(resp)
		return rec, resp, err
	}
	for _, want := range []struct{ output, stop string }{{"first", "max_tokens"}, {"second", "end_turn"}} {
		rec, resp, err := session("same")
		if err != nil {
			t.Fatalf("prompt: %v", err)
		}
		res := rec.Seal("x")
		if res.Output != want.output || resp.StopReason != want.stop {
			t.Errorf("got %q %q, want %q %q", res.Output, resp.StopReason, want.output, want.stop)
		}
		if want.output == "first" && (len(res.Steps) != 2 || res.Steps[0].Phase != "setup") {
			t.Errorf("the first trial's setup update: %+v", res.Steps)
		}
	}
	if _, _, err := session("same"); err == nil || !strings.Contains(err.Error(), `all 2 recorded trials of this prompt were served (case "x")`) {
		t.Errorf("third session: %v", err)
	}
	if _, _, err := session("never"); err == nil || !strings.Contains(err.Error(), `no recorded trial has this prompt`) {
		t.Errorf("unknown prompt: %v", err)
	}
	client.Close()
	clientOut.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
