package graders

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/judgecache"
)

// The judge cache: a trial judged before is answered from disk; another
// trial of the same trajectory, another draw, a changed prompt or a
// corrupted entry asks the model.
func TestJudgeCache(t *testing.T) {
	reply := openAIReply(`{"score": 0.8, "reasoning": "fine"}`)
	srv := newFakeLLM(t, reply, reply, reply, reply, reply, reply)
	dir := t.TempDir()
	cache := judgecache.New(dir, 0, func(err error) { t.Errorf("cache warning: %v", err) })
	env := envFunc(map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": secret})
	g := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: env, JudgeCache: cache})
	calls := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.reqs)
	}
	usage := func(r map[string]any, field string) float64 {
		t.Helper()
		v, _ := r[field].(float64)
		return v
	}
	decode := func(b json.RawMessage) map[string]any {
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}

	rec := record("42", "")
	first := grade(t, g, rec)
	wantOK(t, first, true, 0.8)
	if calls() != 1 {
		t.Fatalf("%d calls, want 1", calls())
	}
	again := grade(t, g, rec)
	wantOK(t, again, true, 0.8)
	if calls() != 1 {
		t.Fatalf("the same trial judged again made %d calls, want 1 in all", calls())
	}
	u := decode(again.Usage)
	if usage(u, "calls") != 0 || usage(u, "cachedCalls") != 1 || usage(u, "inputTokens") != 0 {
		t.Errorf("usage of a cached judgment %s: want no calls, 1 cached call, no tokens", again.Usage)
	}
	noSecret(t, again)
	ents, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	for _, e := range ents {
		b, _ := os.ReadFile(e)
		if strings.Contains(string(b), secret) {
			t.Errorf("cache entry %s holds the API key", e)
		}
	}

	// Another trial with the same trajectory is judged on its own.
	other := *rec
	other.Trial = 3
	grade(t, g, &other)
	if calls() != 2 {
		t.Fatalf("another trial: %d calls, want 2", calls())
	}
	// So is another draw of the same trial (calibrate --repeat).
	g.Grade(WithJudgeDraw(context.Background(), 2), &Input{Record: rec})
	if calls() != 3 {
		t.Fatalf("draw 2: %d calls, want 3", calls())
	}
	// A changed prompt (here: a changed response) misses.
	changed := record("43", "")
	grade(t, g, changed)
	if calls() != 4 {
		t.Fatalf("changed prompt: %d calls, want 4", calls())
	}
	// A changed model misses too.
	g2 := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: env, JudgeCache: cache})
	unpinned(g2).(*judge).model.Model.Model = "gpt-4o"
	grade(t, g2, rec)
	if calls() != 5 {
		t.Fatalf("changed model: %d calls, want 5", calls())
	}

	// A corrupted entry is ignored, asked again and replaced.
	for _, e := range ents {
		if err := os.WriteFile(e, []byte(`{"v":1,"key":"`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := grade(t, g, rec)
	wantOK(t, r, true, 0.8)
	if calls() != 6 {
		t.Fatalf("corrupted entry: %d calls, want 6", calls())
	}
	grade(t, g, rec)
	if calls() != 6 {
		t.Fatalf("after the refetch: %d calls, want still 6", calls())
	}

	// Without a cache every grading calls the model.
	srv2 := newFakeLLM(t, reply, reply)
	plain := load(t, fx("seed002/quality-judge.yaml"), Options{Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv2.URL + "/v1", "OPENAI_API_KEY": secret})})
	grade(t, plain, rec)
	grade(t, plain, rec)
	if len(srv2.reqs) != 2 {
		t.Errorf("no cache: %d calls, want 2", len(srv2.reqs))
	}
}

// A failed call is not cached: the next grading asks again.
func TestJudgeCacheKeepsNoFailures(t *testing.T) {
	srv := newFakeLLM(t,
		fakeReply{status: 400, body: `{"error":{"message":"bad request"}}`},
		openAIReply(`{"score": 1, "reasoning": "ok"}`))
	cache := judgecache.New(t.TempDir(), 0, nil)
	g := load(t, fx("seed002/quality-judge.yaml"), Options{JudgeCache: cache, Getenv: envFunc(map[string]string{
		"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": secret})})
	rec := record("42", "")
	if r := grade(t, g, rec); r.Error == nil {
		t.Fatalf("want an error from HTTP 400, got %+v", r)
	}
	wantOK(t, grade(t, g, rec), true, 1)
	if len(srv.reqs) != 2 {
		t.Errorf("%d calls, want 2", len(srv.reqs))
	}
}
