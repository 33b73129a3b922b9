package view

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// A viewer listened for with a token answers only requests that carry it,
// and Serve returns once its context ends.
func TestListenServeToken(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, filepath.Join(dir, "r.jsonl"), synthRecord("a", 1, true, 2, 10))
	ix := newIndex(t, dir)
	tok, err := NewToken()
	if err != nil || len(tok) != 32 {
		t.Fatalf("token %q, err %v; want 32 hex digits", tok, err)
	}
	l, err := Listen(ix, "127.0.0.1", 0, ServerOptions{Token: tok, Loopback: true, Resamples: 50})
	if err != nil {
		t.Fatal(err)
	}
	u := l.URL()
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/?token="+tok) {
		t.Fatalf("URL %s: want the address and the token", u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	base := strings.TrimSuffix(u, "?token="+tok)
	for _, c := range []struct {
		url  string
		want int
	}{{base + "api/runs", http.StatusUnauthorized}, {base + "api/runs?token=" + tok, http.StatusOK}} {
		resp, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: %d, want %d", c.url, resp.StatusCode, c.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after the context ended: %v, want nil", err)
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "0.0.0.0": false, "example.org": false} {
		if IsLoopback(host) != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, !want, want)
		}
	}
}
