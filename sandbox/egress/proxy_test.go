package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// newTestSession starts a session for spec whose reports go to the
// returned channel.
func newTestSession(t *testing.T, spec string, tune func(*Proxy)) (*Session, chan Connection) {
	t.Helper()
	rules, err := ParseAllow(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(rules, t.TempDir())
	if tune != nil {
		tune(p)
	}
	reports := make(chan Connection, 16)
	s, err := p.NewSession(func(c Connection) { reports <- c })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, reports
}

func dialSession(t *testing.T, s *Session) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(s.SocketDir, socketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func status(t *testing.T, c net.Conn) int {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

func TestSessionLayout(t *testing.T) {
	s, _ := newTestSession(t, "api.example.com,127.0.0.1:8123", func(p *Proxy) { p.Executable, p.Unprivileged = "/opt/harness", false })
	env := strings.Join(s.Env, " ")
	want := "HTTP_PROXY=http://127.0.0.1:3128 HTTPS_PROXY=http://127.0.0.1:3128 ALL_PROXY=http://127.0.0.1:3128 " +
		"http_proxy=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128 all_proxy=http://127.0.0.1:3128 NO_PROXY= no_proxy="
	if env != want {
		t.Errorf("env:\n got %s\nwant %s", env, want)
	}
	args := strings.Join(s.BridgeArgs, " ")
	want = "/run/harness-bin/harness __sandbox-bridge --socket /run/harness-net/proxy.sock --http 127.0.0.1:3128 " +
		"--forward 127.0.0.2:80=api.example.com:80 --forward 127.0.0.2:443=api.example.com:443 --forward 127.0.0.1:8123=127.0.0.1:8123 --"
	if args != want {
		t.Errorf("bridge args:\n got %s\nwant %s", args, want)
	}
	bw := strings.Join(s.BwrapArgs, " ")
	want = "--unshare-net --cap-drop ALL --cap-add CAP_SETPCAP --cap-add CAP_NET_BIND_SERVICE --ro-bind " + s.SocketDir + " /run/harness-net --ro-bind " +
		s.HostsFile + " /etc/hosts --ro-bind /opt/harness /run/harness-bin/harness"
	if bw != want {
		t.Errorf("bwrap args:\n got %s\nwant %s", bw, want)
	}
	s2, _ := newTestSession(t, "127.0.0.1:8123", func(p *Proxy) { p.Unprivileged = true })
	if slices.Contains(s2.BwrapArgs, "CAP_NET_BIND_SERVICE") || slices.Contains(s2.BwrapArgs, "--uid") {
		t.Errorf("no port below 1024, yet %v", s2.BwrapArgs)
	}
	s3, _ := newTestSession(t, "api.example.com", func(p *Proxy) { p.Unprivileged = true })
	if !strings.Contains(strings.Join(s3.BwrapArgs, " "), "--cap-add CAP_NET_BIND_SERVICE --uid 0 --gid 0 ") {
		t.Errorf("unprivileged, port 443: %v", s3.BwrapArgs)
	}
}

// TestProxyPlainHTTP: a plain request goes on in origin form without the
// client's proxy headers and with Connection: close.
func TestProxyPlainHTTP(t *testing.T) {
	got := make(chan string, 1)
	srv := newRawServer(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			got <- err.Error()
			return
		}
		got <- fmt.Sprintf("%s %s close=%v proxy-auth=%q", req.Method, req.RequestURI, req.Close, req.Header.Get("Proxy-Authorization"))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	s, reports := newTestSession(t, srv, nil)
	c := dialSession(t, s)
	fmt.Fprintf(c, "GET http://%s/a?b=c HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n\r\n", srv, srv)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("response %v %v", resp, err)
	}
	if g := <-got; g != `GET /a?b=c close=true proxy-auth=""` {
		t.Errorf("server got %s", g)
	}
	if r := <-reports; !r.Allowed || r.BytesIn != int64(len("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) || r.Error != "" {
		t.Errorf("report %+v", r)
	}
}

func newRawServer(t *testing.T, handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	return ln.Addr().String()
}

func TestProxyRefusesWhatItCannotServe(t *testing.T) {
	s, reports := newTestSession(t, "127.0.0.1:9", func(p *Proxy) {
		p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, errors.New("no such host")
		}
	})
	for _, tc := range []struct {
		req    string
		code   int
		report string
	}{
		{"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", 400, ":0 allowed=false bad request: want CONNECT HOST:PORT or an absolute http:// URI"},
		{"GET https://127.0.0.1:9/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, ":0 allowed=false bad request: want CONNECT HOST:PORT or an absolute http:// URI"},
		{"CONNECT 127.0.0.1 HTTP/1.1\r\nHost: x\r\n\r\n", 400, `:0 allowed=false bad request: destination "127.0.0.1" is not HOST:PORT`},
		{"not http at all\r\n\r\n", 400, ":0 allowed=false bad request: malformed HTTP version \"at all\""},
		{"CONNECT evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n", 403, "evil.example:443 allowed=false denied by the allowlist"},
		{"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: x\r\n\r\n", 502, "127.0.0.1:9 allowed=true dial: no such host"},
	} {
		c := dialSession(t, s)
		io.WriteString(c, tc.req)
		if code := status(t, c); code != tc.code {
			t.Errorf("%q: status %d, want %d", tc.req, code, tc.code)
		}
		r := <-reports
		if got := fmt.Sprintf("%s:%d allowed=%v %s", r.Host, r.Port, r.Allowed, r.Error); got != tc.report {
			t.Errorf("%q: report %s, want %s", tc.req, got, tc.report)
		}
	}
}

// TestProxySlowClient: a client that never finishes its request head is
// cut off after HeadTimeout and reported; one with an endless head is cut
// off at the size limit.
func TestProxySlowClient(t *testing.T) {
	s, reports := newTestSession(t, "127.0.0.1:9", func(p *Proxy) { p.HeadTimeout = 50 * time.Millisecond })
	c := dialSession(t, s)
	io.WriteString(c, "CONNECT 127.0.0.1:9 HTTP/1.1\r\n")
	if code := status(t, c); code != 400 {
		t.Errorf("status %d", code)
	}
	if r := <-reports; r.Allowed || !strings.Contains(r.Error, "timeout") {
		t.Errorf("report %+v", r)
	}
	c = dialSession(t, s)
	go func() {
		io.WriteString(c, "CONNECT 127.0.0.1:9 HTTP/1.1\r\n")
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for range 100 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	if r := <-reports; r.Allowed || !strings.Contains(r.Error, "too large") {
		t.Errorf("report %+v", r)
	}
}

// TestProxyConnectionLimit: connections past MaxConns are refused and
// reported; once one ends, a new one is served.
func TestProxyConnectionLimit(t *testing.T) {
	s, reports := newTestSession(t, "127.0.0.1:9", func(p *Proxy) { p.MaxConns = 1 })
	first := dialSession(t, s)
	io.WriteString(first, "CONNECT 127.0.0.1:9") // holds the only slot
	second := dialSession(t, s)
	if n, err := second.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("second connection: read %d, %v", n, err)
	}
	if r := <-reports; r.Allowed || r.Error != "refused: 1 connections already open" {
		t.Errorf("report %+v", r)
	}
	first.Close()
	<-reports
	third := dialSession(t, s)
	io.WriteString(third, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
	if code := status(t, third); code != 403 {
		t.Errorf("third connection: status %d", code)
	}
}

// TestSessionCloseIsBounded: a tunnel whose ends both stay open does not
// hold Close up past CloseGrace, and is reported.
func TestSessionCloseIsBounded(t *testing.T) {
	hold, arrived := make(chan struct{}), make(chan struct{})
	srv := newRawServer(t, func(c net.Conn) {
		io.ReadFull(c, make([]byte, 3))
		close(arrived)
		<-hold
	})
	defer close(hold)
	s, reports := newTestSession(t, srv, func(p *Proxy) { p.CloseGrace = 10 * time.Millisecond })
	c := dialSession(t, s)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", srv)
	if code := status(t, c); code != 200 {
		t.Fatalf("status %d", code)
	}
	io.WriteString(c, "abc")
	<-arrived
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	select {
	case r := <-reports:
		if !r.Allowed || r.BytesOut != 3 {
			t.Errorf("report %+v", r)
		}
	default:
		t.Error("no report once Close returned")
	}
}
