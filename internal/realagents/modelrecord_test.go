package realagents

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"harness/capture"
	"harness/internal/redact"
	"harness/modelgateway"
	"harness/modelrecord"
	"harness/schemas"
	"harness/testkit/fakemodel"
)

// runTrials runs k trials of one case on one agent process and returns
// the records in trial order.
func runTrials(t *testing.T, cfg capture.Config, id, input string, k int) []*schemas.CaptureRecord {
	t.Helper()
	c := &schemas.PromptCase{ID: id, Input: schemas.SingleTurn(input)}
	var units []capture.Unit
	for i := 1; i <= k; i++ {
		units = append(units, capture.Unit{Case: c, Trial: i})
	}
	r := capture.NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight: %v", err)
	}
	var mu sync.Mutex
	out := make([]*schemas.CaptureRecord, k)
	if _, err := r.Run(context.Background(), slices.Values(units), func(rec *schemas.CaptureRecord) error {
		mu.Lock()
		out[rec.Trial-1] = rec
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatalf("run: %v", err)
	}
	for i, rec := range out {
		if rec == nil {
			t.Fatalf("no record of trial %d", i+1)
		}
	}
	return out
}

// trajectoryAnswer is what a replay must give again: the output, and each
// tool call's name, kind, status, input and output.
func trajectoryAnswer(rec *schemas.CaptureRecord) string {
	var b strings.Builder
	b.WriteString(rec.Output)
	for _, s := range stepsOf(rec, schemas.StepToolCall) {
		line, _ := json.Marshal([]any{s.Name, s.Kind, s.Status, s.Input, s.Output})
		b.WriteString("\n" + string(line))
	}
	return b.String()
}

// TestClaudeCodeModelReplay: Claude Code's run recorded through the
// gateway, then replayed ten times with the fake model server stopped:
// no request reaches a provider, and every trial gives the same tool
// calls and output. The recording keeps no key. An edited prompt is a
// replay miss: the trial fails as replay_miss with the diff against the
// nearest recorded request.
func TestClaudeCodeModelReplay(t *testing.T) {
	t.Parallel()
	sb, srv, agent := claudeSetup(t, fakemodel.Options{})
	const key = "sk-ant-recorded-secret-1234"
	sb.Env = append(sb.Env, "ANTHROPIC_API_KEY="+key)
	dir := filepath.Join(t.TempDir(), "rec")
	red := redact.New(nil, sb.Env)
	rec, err := modelrecord.NewRecorder(dir, red)
	if err != nil {
		t.Fatal(err)
	}
	g, err := modelgateway.Start(modelgateway.Options{Tape: rec})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := baseConfig(t, sb, agent)
	cfg.Gateway = g
	first := runTrials(t, cfg, "replayed", "bash echo replayed-answer", 1)[0]
	g.Close()
	checkTurn(t, first, true, true, "replayed-answer")
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	served := len(srv.Requests())
	srv.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "replayed-t1"+modelrecord.Ext))
	if err != nil {
		t.Fatal(err)
	}
	if raw[0] != 0x28 || raw[1] != 0xb5 { // the zstd magic number
		t.Errorf("the recording is not zstd: % x", raw[:4])
	}
	entries, err := modelrecord.Read(filepath.Join(dir, "replayed-t1"+modelrecord.Ext))
	if err != nil || len(entries) == 0 {
		t.Fatalf("recording: %d entries, %v", len(entries), err)
	}
	for _, e := range entries {
		if b, _ := json.Marshal(e); strings.Contains(string(b), key) {
			t.Fatalf("the recording holds the API key: %s", b)
		}
	}

	want := trajectoryAnswer(first)
	player, err := modelrecord.NewPlayer(dir, red)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := modelgateway.Start(modelgateway.Options{Tape: player})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	cfg.Gateway = pg
	for i, r := range runTrials(t, cfg, "replayed", "bash echo replayed-answer", 10) {
		checkTurn(t, r, true, true, "replayed-answer")
		if got := trajectoryAnswer(r); got != want {
			t.Errorf("replay %d:\n%s\nwant\n%s", i+1, got, want)
		}
		for _, c := range r.ModelCalls {
			if !c.Replayed {
				t.Errorf("replay %d: a call was not served from the recording: %+v", i+1, c)
			}
		}
	}
	if n := len(srv.Requests()); n != served {
		t.Errorf("the stopped fake server got %d requests during the replays", n-served)
	}

	miss := runTrials(t, cfg, "replayed", "bash echo edited-prompt", 1)[0]
	if miss.Error == nil || miss.Error.Class != schemas.ErrReplayMiss {
		t.Fatalf("an edited prompt replayed with error %+v, want replay_miss", miss.Error)
	}
	if !strings.Contains(miss.Error.Message, "+") || !strings.Contains(miss.Error.Message, "edited-prompt") || !strings.Contains(miss.Error.Message, "replayed-answer") {
		t.Errorf("the miss has no diff naming both prompts:\n%s", miss.Error.Message)
	}
}
