package egress

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// BridgeArg is the first argument that makes the harness binary run as
// the bridge (BridgeMain) instead of as itself.
const BridgeArg = "__sandbox-bridge"

// bridgeConfig is what the bridge's command line says.
type bridgeConfig struct {
	socket   string
	http     string
	forwards []Forward
	// redirect says every other TCP connection is redirected to a
	// listener of the bridge (see installRedirect); probe, that the
	// bridge only checks that the redirection works here.
	redirect, probe bool
	// fds, in the second stage, are the inherited listeners: the HTTP
	// proxy's, one per forward, then the redirect listener.
	fds   []int
	agent []string
	// user, when set, is who the first stage becomes once it has
	// listened, before it drops its capabilities.
	user *Credential
}

// Credential is a user the bridge runs its command as: a bridge started
// as root listens (ports below 1024 too) and installs its redirection,
// then takes this identity, with no capability left, before running the
// command.
type Credential struct {
	UID, GID int
	// Groups are the supplementary groups.
	Groups []int
}

// String is the credential as the bridge's --user flag takes it:
// UID:GID, then :G1,G2,... when it has supplementary groups.
func (c Credential) String() string {
	s := strconv.Itoa(c.UID) + ":" + strconv.Itoa(c.GID)
	if len(c.Groups) > 0 {
		gs := make([]string, len(c.Groups))
		for i, g := range c.Groups {
			gs[i] = strconv.Itoa(g)
		}
		s += ":" + strings.Join(gs, ",")
	}
	return s
}

// parseCredential reads a Credential as String writes it.
func parseCredential(v string) (*Credential, error) {
	f := strings.Split(v, ":")
	if len(f) < 2 || len(f) > 3 {
		return nil, fmt.Errorf("want UID:GID[:G1,G2...], got %q", v)
	}
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad id %q in %q", s, v)
		}
		return n, nil
	}
	var c Credential
	var err error
	if c.UID, err = num(f[0]); err != nil {
		return nil, err
	}
	if c.GID, err = num(f[1]); err != nil {
		return nil, err
	}
	if len(f) == 3 && f[2] != "" {
		for _, g := range strings.Split(f[2], ",") {
			n, err := num(g)
			if err != nil {
				return nil, err
			}
			c.Groups = append(c.Groups, n)
		}
	}
	return &c, nil
}

type userFlag struct{ c **Credential }

func (f userFlag) String() string { return "" }

func (f userFlag) Set(v string) error {
	c, err := parseCredential(v)
	if err != nil {
		return err
	}
	*f.c = c
	return nil
}

type forwardFlag struct{ list *[]Forward }

func (f forwardFlag) String() string { return "" }

func (f forwardFlag) Set(v string) error {
	listen, target, ok := strings.Cut(v, "=")
	if !ok || listen == "" || target == "" {
		return fmt.Errorf("want LISTEN=HOST:PORT, got %q", v)
	}
	*f.list = append(*f.list, Forward{Listen: listen, Target: target})
	return nil
}

type fdsFlag struct{ list *[]int }

func (f fdsFlag) String() string { return "" }

func (f fdsFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			return fmt.Errorf("bad descriptor %q", s)
		}
		*f.list = append(*f.list, n)
	}
	return nil
}

func parseBridgeArgs(args []string) (bridgeConfig, error) {
	var c bridgeConfig
	fs := flag.NewFlagSet(BridgeArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.socket, "socket", "", "the proxy's unix socket")
	fs.StringVar(&c.http, "http", "", "address of the HTTP proxy listener")
	fs.Var(forwardFlag{&c.forwards}, "forward", "LISTEN=HOST:PORT plain forward")
	fs.Var(fdsFlag{&c.fds}, "fds", "inherited listeners")
	fs.BoolVar(&c.redirect, "redirect", false, "redirect every other TCP connection to the proxy")
	fs.BoolVar(&c.probe, "probe-redirect", false, "check that the redirection works, and exit")
	fs.Var(userFlag{&c.user}, "user", "UID:GID[:G1,G2...] to run the command as")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.agent = fs.Args()
	n := 1 + len(c.forwards)
	if c.redirect {
		n++
	}
	switch {
	case c.probe:
	case c.socket == "" || c.http == "":
		return c, errors.New("--socket and --http are required")
	case len(c.agent) == 0:
		return c, errors.New("no command to run (want ... -- COMMAND ARGS...)")
	case c.fds != nil && len(c.fds) != n:
		return c, errors.New("--fds does not match the listeners")
	}
	return c, nil
}

// bridgeConn carries one connection accepted in the sandbox to the proxy.
// For a forward, it first asks the proxy for a tunnel to target; a
// refused one is closed.
func bridgeConn(c net.Conn, socket, target string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer u.Close()
	var fromProxy io.Reader = u
	if target != "" {
		if _, err := fmt.Fprintf(u, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
			return
		}
		u.SetReadDeadline(time.Now().Add(2 * time.Minute))
		br := bufio.NewReader(u)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // the client sees a reset, as for a refused connection
			}
			return
		}
		u.SetReadDeadline(time.Time{})
		fromProxy = br
	}
	done := make(chan struct{})
	go func() {
		io.Copy(u, c)
		closeWrite(u)
		close(done)
	}()
	io.Copy(c, fromProxy)
	closeWrite(c)
	<-done
}

// acceptLoop hands every connection l accepts to handle.
func acceptLoop(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		go handle(c)
	}
}

func bridgeFail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "harness sandbox bridge: "+format+"\n", a...)
	return 125
}
