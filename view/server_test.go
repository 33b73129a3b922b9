package view

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerPaths: an id with "..", an absolute path or a link that leads
// out of the root is refused; a file outside the root is never indexed.
func TestServerPaths(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.MkdirAll(outside, 0o755)
	writeRecords(t, filepath.Join(root, "sub", "in.jsonl"), synthRecord("in", 1, true, 1, 10))
	writeRecords(t, filepath.Join(outside, "secret.jsonl"), synthRecord("secret", 1, true, 1, 10))
	if err := os.Symlink(filepath.Join(outside, "secret.jsonl"), filepath.Join(root, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linkdir")); err != nil {
		t.Fatal(err)
	}
	ix := newIndex(t, root)
	ts := serve(t, ix, ServerOptions{})
	var runs struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	getJSON(t, ts, "/api/runs", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != "sub/in.jsonl" {
		t.Errorf("runs: %+v (only sub/in.jsonl is inside the root)", runs.Runs)
	}
	if code := getJSON(t, ts, "/api/rows?src=sub/in.jsonl", nil); code != http.StatusOK {
		t.Errorf("a source inside the root: %d", code)
	}
	for _, src := range []string{
		"../outside/secret.jsonl", "sub/../../outside/secret.jsonl", "sub/../in.jsonl", filepath.Join(outside, "secret.jsonl"),
		"link.jsonl", "linkdir/secret.jsonl", "./sub/in.jsonl", "sub//in.jsonl",
	} {
		for _, api := range []string{"rows", "source", "trial", "steps"} {
			code := getJSON(t, ts, "/api/"+api+"?src="+url.QueryEscape(src)+"&id=secret&trial=1", nil)
			if code != http.StatusForbidden {
				t.Errorf("/api/%s?src=%s: status %d, want 403", api, src, code)
			}
		}
	}
	// Compare and diff check every source they are given.
	if code := getJSON(t, ts, "/api/compare?src=sub/in.jsonl&src=../outside/secret.jsonl", nil); code != http.StatusForbidden {
		t.Errorf("compare with a source out of the root: %d", code)
	}
	// The page's files: only the embedded ones.
	for _, p := range []string{"/assets/..%2f..%2fgo.mod", "/assets/index.html", "/assets/%2e%2e"} {
		if code := getJSON(t, ts, p, nil); code == http.StatusOK {
			t.Errorf("%s: served", p)
		}
	}
}

// TestServerHeaders: every answer carries a Content-Security-Policy with
// no inline script; a Host other than a loopback name is refused; with a
// token, requests without it are refused.
func TestServerHeaders(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, filepath.Join(dir, "a.jsonl"), synthRecord("a", 1, true, 1, 10))
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(string(body), "<script>") || strings.Contains(string(body), "onload=") {
		t.Error("the page has inline script")
	}
	req, _ := http.NewRequest("GET", ts.URL+"/api/runs", nil)
	req.Host = "evil.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("a request for another host name was served (DNS rebinding)")
	}

	tok := serve(t, ix, ServerOptions{Token: "s3cret"})
	for _, p := range []string{"/", "/api/runs", "/assets/view.js", "/api/runs?token=wrong"} {
		if code := getJSON(t, tok, p, nil); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", p, code)
		}
	}
	if code := getJSON(t, tok, "/api/runs?token=s3cret", nil); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
	// The token in the URL sets a cookie the page's other requests carry.
	resp, err = http.Get(tok.URL + "/?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == tokenCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("token cookie: %+v", cookie)
	}
	req, _ = http.NewRequest("GET", tok.URL+"/assets/view.js", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("asset with the cookie: %d", resp.StatusCode)
	}
}

// sseEvent is one event read from the stream.
type sseEvent struct{ id, typ, data string }

// readEvents reads events until n have come or the time is up.
func readEvents(t *testing.T, r *bufio.Reader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func openEvents(t *testing.T, ctx context.Context, base, last string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/events", nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	return bufio.NewReader(resp.Body)
}

// TestServerEventsResume: events carry increasing ids; a client that
// reconnects with Last-Event-ID gets every event after it and none twice.
func TestServerEventsResume(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "live.jsonl")
	writeRecords(t, p, synthRecord("r0", 1, true, 1, 10))
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	appendOne := func(id string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		appendRecords(t, f, synthRecord(id, 1, true, 1, 10))
		f.Close()
		ix.Poll()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1, stop1 := context.WithCancel(ctx)
	r := openEvents(t, c1, ts.URL, "")
	appendOne("r1")
	appendOne("r2")
	got := readEvents(t, r, 4) // rows, runs, rows, runs
	stop1()
	lastID := got[len(got)-1].id
	var rowIDs []string
	for _, e := range got {
		if e.typ == "rows" {
			rowIDs = append(rowIDs, e.data[strings.Index(e.data, `"id":"`)+6:][:2])
		}
	}
	// While disconnected: two more records.
	appendOne("r3")
	appendOne("r4")
	r = openEvents(t, ctx, ts.URL, lastID)
	again := readEvents(t, r, 4)
	appendOne("r5")
	again = append(again, readEvents(t, r, 2)...)
	prev := 0
	for _, e := range append(got, again...) {
		var n int
		fmt.Sscan(e.id, &n)
		if n != prev+1 && prev != 0 {
			t.Errorf("event ids jump from %d to %d", prev, n)
		}
		prev = n
		if e.typ == "rows" && e != got[0] && e != got[2] {
			rowIDs = append(rowIDs, e.data[strings.Index(e.data, `"id":"`)+6:][:2])
		}
	}
	if fmt.Sprint(rowIDs) != "[r1 r2 r3 r4 r5]" {
		t.Errorf("records pushed across the reconnect: %v, want each once, in order", rowIDs)
	}
}
