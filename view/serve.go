package view

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// IsLoopback reports whether host names the loopback interface, where
// the viewer needs no token.
func IsLoopback(host string) bool {
	return host == "127.0.0.1" || host == "localhost" || host == "::1"
}

// NewToken is a random token for a viewer reachable from other hosts.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("view: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Listener is a viewer listening for requests, not yet serving them.
type Listener struct {
	ix  *Index
	ln  net.Listener
	srv *http.Server
	tok string
}

// Listen listens on host:port (port 0: a free one) for the viewer of ix
// with the server options opt.
func Listen(ix *Index, host string, port int, opt ServerOptions) (*Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("serve the viewer: %w", err)
	}
	srv := &http.Server{Handler: NewServer(ix, opt), ReadHeaderTimeout: 10 * time.Second}
	return &Listener{ix: ix, ln: ln, srv: srv, tok: opt.Token}, nil
}

// URL is the address to open, with the token when there is one.
func (l *Listener) URL() string {
	return viewURL(l.ln.Addr().String(), l.tok)
}

// URLs are the addresses to open. A listener on every interface (0.0.0.0,
// ::) has no address a browser can open: it gets one URL per address of
// the machine that ifaces lists (nil: net.InterfaceAddrs), those of other
// hosts' reach first, loopback last.
func (l *Listener) URLs(ifaces func() ([]net.Addr, error)) []string {
	tcp, ok := l.ln.Addr().(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return []string{l.URL()}
	}
	if ifaces == nil {
		ifaces = net.InterfaceAddrs
	}
	addrs, err := ifaces()
	if err != nil {
		return []string{viewURL(net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port)), l.tok)}
	}
	return machineURLs(addrs, tcp.IP.To4() != nil, tcp.Port, l.tok)
}

// machineURLs are the viewer's URLs on each address (IPv4 only when
// the listener is IPv4's), loopback last, link-local ones left out.
func machineURLs(addrs []net.Addr, v4only bool, port int, tok string) []string {
	var out, loop []string
	for _, a := range addrs {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		default:
			continue
		}
		if ip.IsLinkLocalUnicast() || (v4only && ip.To4() == nil) {
			continue
		}
		u := viewURL(net.JoinHostPort(ip.String(), strconv.Itoa(port)), tok)
		if ip.IsLoopback() {
			loop = append(loop, u)
		} else {
			out = append(out, u)
		}
	}
	out = append(out, loop...)
	if len(out) == 0 {
		out = []string{viewURL(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), tok)}
	}
	return out
}

func viewURL(hostport, tok string) string {
	u := "http://" + hostport + "/"
	if tok != "" {
		u += "?token=" + tok
	}
	return u
}

// Serve keeps the index up to date and serves requests until ctx ends
// (then it shuts the server down, giving requests in flight two seconds,
// and returns nil) or the server fails.
func (l *Listener) Serve(ctx context.Context) error {
	go func() {
		l.ix.Scan()
		l.ix.Run(ctx)
	}()
	done := make(chan error, 1)
	go func() { done <- l.srv.Serve(l.ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		l.srv.Shutdown(sctx)
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve the viewer: %w", err)
	}
}
