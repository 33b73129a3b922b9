package view

import (
	"context"
	"fmt"
	"net"
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

// A viewer on every interface prints a URL per address of the machine
// (what another host can open first, loopback last), never 0.0.0.0 or ::.
func TestMachineURLs(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	addrs := []net.Addr{cidr("127.0.0.1/8"), cidr("::1/128"), cidr("10.1.2.3/24"), cidr("fe80::1/64"), cidr("2001:db8::5/64")}
	got := machineURLs(addrs, true, 8080, "tok")
	if want := "[http://10.1.2.3:8080/?token=tok http://127.0.0.1:8080/?token=tok]"; fmt.Sprint(got) != want {
		t.Errorf("IPv4 listener: %v, want %s", got, want)
	}
	got = machineURLs(addrs, false, 8080, "")
	if want := "[http://10.1.2.3:8080/ http://[2001:db8::5]:8080/ http://127.0.0.1:8080/ http://[::1]:8080/]"; fmt.Sprint(got) != want {
		t.Errorf("dual-stack listener: %v, want %s", got, want)
	}
	l := &Listener{ln: addrOnly{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}}, tok: "tok"}
	urls := l.URLs(func() ([]net.Addr, error) { return addrs, nil })
	if len(urls) != 2 || strings.Contains(strings.Join(urls, " "), "0.0.0.0") || !strings.HasPrefix(urls[0], "http://10.1.2.3:") {
		t.Errorf("URLs of a listener on 0.0.0.0: %v", urls)
	}
}

// addrOnly is a listener that only has an address.
type addrOnly struct{ addr net.Addr }

func (a addrOnly) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (a addrOnly) Close() error              { return nil }
func (a addrOnly) Addr() net.Addr            { return a.addr }
