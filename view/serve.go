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
		return nil, fmt.Errorf("view: %w", err)
	}
	srv := &http.Server{Handler: NewServer(ix, opt), ReadHeaderTimeout: 10 * time.Second}
	return &Listener{ix: ix, ln: ln, srv: srv, tok: opt.Token}, nil
}

// URL is the address to open, with the token when there is one.
func (l *Listener) URL() string {
	u := "http://" + l.ln.Addr().String() + "/"
	if l.tok != "" {
		u += "?token=" + l.tok
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
		return fmt.Errorf("view: %w", err)
	}
}
