package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Paths inside the sandbox.
const (
	// MountDir is where a session's SocketDir is bound (read-only) in the
	// sandbox.
	MountDir = "/run/harness-net"
	// BridgeBinary is where the harness executable is bound (read-only)
	// in the sandbox; its base name is "harness", like the executable's.
	BridgeBinary = "/run/harness-bin/harness"
	// socketName is the proxy's unix socket in SocketDir.
	socketName = "proxy.sock"
	// proxyPort is the HTTP proxy's port on the sandbox's 127.0.0.1,
	// unless an allowed host uses it.
	proxyPort = 3128
)

// Connection is one connection a sandboxed process opened through the
// proxy, allowed or denied.
type Connection struct {
	// ID numbers the session's connections from 1, in accept order.
	ID uint64
	// At is when the proxy accepted the connection.
	At time.Time
	// Host and Port are the destination asked for ("" and 0 when the
	// request could not be read).
	Host string
	Port int
	// Allowed says whether the allowlist let it through.
	Allowed bool
	// BytesOut and BytesIn count what went to and came from the
	// destination: for a tunnel (CONNECT, and the plain forwards) its
	// bytes each way; for a plain HTTP request the request as sent on
	// (in origin form, with Connection: close) and the whole response.
	BytesOut, BytesIn int64
	// Duration is from accept to the end of the connection.
	Duration time.Duration
	// Error says why a connection failed or was refused ("" when it
	// ended normally).
	Error string
	// Open says the connection was still open when this was taken (see
	// Session.Open): its bytes and duration are so far.
	Open bool
}

// Proxy lets sandboxed processes out to the hosts of an allowlist. It runs
// in the harness process; each sandboxed process gets a Session of its
// own. Set the exported fields before the first NewSession.
type Proxy struct {
	rules  []Rule
	tmpDir string

	// Executable is the harness binary bound in at BridgeBinary (default:
	// the running executable).
	Executable string
	// Dial opens connections to allowed destinations (default: a
	// net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HeadTimeout bounds the time a client has to send its request head
	// (default 30s); DialTimeout bounds a dial (default 30s).
	HeadTimeout, DialTimeout time.Duration
	// MaxConns bounds the connections open at once in one session
	// (default 256); more are refused and reported.
	MaxConns int
	// CloseGrace is how long Session.Close lets open connections finish
	// before it cuts them (default 2s).
	CloseGrace time.Duration
	// Unprivileged says bwrap runs as a user other than root (default:
	// when harness does). bwrap then puts a sandbox whose user is not
	// uid 0 in a nested user namespace, which does not own the network
	// namespace, so the bridge could not bind ports below 1024 there;
	// such a session has the sandbox run as uid 0 of its own user
	// namespace (mapped to the user; no capabilities once the bridge has
	// dropped them).
	Unprivileged bool
	// Redirect makes every other TCP connection a sandboxed process opens
	// (one that ignores the proxy variables, to an address no forward
	// listens on) go to the proxy too, as a tunnel to where it was going:
	// the bridge redirects them with nftables in the sandbox's network
	// namespace (it then needs CAP_NET_ADMIN there). Set it only where
	// ProbeRedirect succeeds.
	Redirect bool
}

// maxHead bounds a request head (request line and headers).
const maxHead = 64 << 10

// NewProxy returns a proxy for rules whose sessions keep their sockets in
// directories under tmpDir ("" = the system temp dir).
func NewProxy(rules []Rule, tmpDir string) *Proxy {
	exe, _ := os.Executable()
	d := &net.Dialer{}
	return &Proxy{
		rules:       append([]Rule(nil), rules...),
		tmpDir:      tmpDir,
		Executable:  exe,
		Dial:        d.DialContext,
		HeadTimeout: 30 * time.Second,
		DialTimeout: 30 * time.Second,
		MaxConns:    256,
		CloseGrace:  2 * time.Second,

		Unprivileged: os.Geteuid() != 0,
	}
}

// Rules returns the allowlist.
func (p *Proxy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// With returns a proxy whose allowlist is p's and then extra's (each rule
// once), set up as p is: the allowlist of one task whose own hosts are
// added to the run's.
func (p *Proxy) With(extra []Rule) *Proxy {
	q := *p
	q.rules = p.Rules()
	for _, r := range extra {
		if !slices.Contains(q.rules, r) {
			q.rules = append(q.rules, r)
		}
	}
	return &q
}

// Only returns a proxy set up as p whose allowlist is rules alone: the
// allowlist of a process that reaches a task's hosts and not the run's
// (a task's verifier, which has no model to call).
func (p *Proxy) Only(rules []Rule) *Proxy {
	q := *p
	q.rules = nil
	for _, r := range rules {
		if !slices.Contains(q.rules, r) {
			q.rules = append(q.rules, r)
		}
	}
	return &q
}

// Session is the proxy's side of one sandboxed process: a unix socket in
// a directory of its own, and what the sandbox needs to reach it.
type Session struct {
	// SocketDir holds the proxy's socket; it is bound read-only at
	// MountDir in the sandbox.
	SocketDir string
	// MountDir is where SocketDir appears in the sandbox.
	MountDir string
	// HostsFile is an /etc/hosts that maps each allowed name to the
	// loopback address its forward listens on; it is bound over
	// /etc/hosts in the sandbox.
	HostsFile string
	// Env holds the proxy variables to add to the agent's environment
	// (they override any the agent had).
	Env []string
	// BridgeArgs is the command line that starts the bridge in the
	// sandbox; the agent's command line follows it.
	BridgeArgs []string
	// BwrapArgs are the bubblewrap arguments the session needs (network
	// namespace, capabilities for the bridge, binds); they go after the
	// sandbox's own arguments, once /run is a tmpfs.
	BwrapArgs []string
	// Forwards lists the plain TCP forwards: listen address in the
	// sandbox and the destination it stands for.
	Forwards []Forward
	// ProxyAddr is the HTTP proxy's address in the sandbox.
	ProxyAddr string

	p      *Proxy
	dir    string
	ln     net.Listener
	onConn func(Connection)
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	nextID    uint64
	live      map[uint64]*liveConn
	reportMu  sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

// Forward is one plain TCP forward in the sandbox.
type Forward struct {
	// Listen is the address the bridge listens on in the sandbox.
	Listen string
	// Target is the allowed destination, HOST:PORT.
	Target string
}

// Command returns the command line to run in the sandbox (after bwrap's
// "--"): the bridge, then the agent.
func (s *Session) Command(agentArgv []string) []string {
	return append(append([]string(nil), s.BridgeArgs...), agentArgv...)
}

// CommandAs is Command for a bridge started as root in the sandbox that
// runs the agent as u: it listens and drops its capabilities as root,
// taking u's identity on the way, so the agent's user needs no privilege
// for ports below 1024 or the redirection.
func (s *Session) CommandAs(u Credential, agentArgv []string) []string {
	n := len(s.BridgeArgs)
	if n == 0 || s.BridgeArgs[n-1] != "--" {
		return s.Command(agentArgv)
	}
	args := append(append([]string(nil), s.BridgeArgs[:n-1]...), "--user", u.String(), "--")
	return append(args, agentArgv...)
}

// NewSession makes the socket directory and hosts file for one sandboxed
// process and starts accepting its connections. onConn (may be nil) is
// told of every connection, allowed or denied, once it has ended; calls
// come one at a time, and none after Close returns.
func (p *Proxy) NewSession(onConn func(Connection)) (*Session, error) {
	if p.Executable == "" {
		return nil, errors.New("egress session: the harness executable is unknown")
	}
	proxyAddr, forwards, hosts := plan(p.rules)
	dir, err := os.MkdirTemp(p.tmpDir, "harness-net-")
	if err != nil {
		return nil, fmt.Errorf("egress session: %w", err)
	}
	sockDir := filepath.Join(dir, "net")
	sock := filepath.Join(sockDir, socketName)
	hostsFile := filepath.Join(dir, "hosts")
	fail := func(err error) (*Session, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("egress session: %w", err)
	}
	if len(sock) >= 108 {
		return fail(fmt.Errorf("socket path %s is too long for a unix socket: use a shorter temp dir", sock))
	}
	if err := os.Mkdir(sockDir, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fail(err)
	}
	// The bridge may run as a user of an image other than the one that
	// made the socket; the session's directory (0700) keeps it from the
	// host's other users.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		SocketDir: sockDir,
		MountDir:  MountDir,
		HostsFile: hostsFile,
		Forwards:  forwards,
		ProxyAddr: proxyAddr,
		p:         p,
		dir:       dir,
		ln:        ln,
		onConn:    onConn,
		ctx:       ctx,
		cancel:    cancel,
		slots:     make(chan struct{}, max(p.MaxConns, 1)),
		conns:     map[net.Conn]struct{}{},
		live:      map[uint64]*liveConn{},
	}
	url := "http://" + proxyAddr
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		s.Env = append(s.Env, k+"="+url)
	}
	s.Env = append(s.Env, "NO_PROXY=", "no_proxy=")
	s.BridgeArgs = []string{BridgeBinary, BridgeArg, "--socket", MountDir + "/" + socketName, "--http", proxyAddr}
	lowPort := false
	for _, f := range forwards {
		s.BridgeArgs = append(s.BridgeArgs, "--forward", f.Listen+"="+f.Target)
		if _, port, _ := net.SplitHostPort(f.Listen); atoi(port) < 1024 {
			lowPort = true
		}
	}
	if p.Redirect {
		s.BridgeArgs = append(s.BridgeArgs, "--redirect")
	}
	s.BridgeArgs = append(s.BridgeArgs, "--")
	s.BwrapArgs = []string{"--unshare-net", "--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP"}
	if lowPort {
		s.BwrapArgs = append(s.BwrapArgs, "--cap-add", "CAP_NET_BIND_SERVICE")
	}
	if p.Redirect {
		s.BwrapArgs = append(s.BwrapArgs, "--cap-add", "CAP_NET_ADMIN")
	}
	if (lowPort || p.Redirect) && p.Unprivileged {
		// The sandbox's user namespace must own its network namespace.
		s.BwrapArgs = append(s.BwrapArgs, "--uid", "0", "--gid", "0")
	}
	s.BwrapArgs = append(s.BwrapArgs,
		"--ro-bind", sockDir, MountDir,
		"--ro-bind", hostsFile, "/etc/hosts",
		"--ro-bind", p.Executable, BridgeBinary)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// ProbeRedirect says whether a sandbox made by bwrap (the path of the
// bubblewrap binary) can redirect the connections that ignore the proxy
// variables (see Redirect): the bridge installs the redirection in a
// throwaway network namespace and sends a connection through it. The
// error says why not (no nftables in the kernel, no NAT, no netlink).
func (p *Proxy) ProbeRedirect(bwrap string) error {
	if p.Executable == "" {
		return errors.New("the harness executable is unknown")
	}
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent",
		"--unshare-net", "--cap-drop", "ALL", "--cap-add", "CAP_NET_ADMIN"}
	if p.Unprivileged {
		args = append(args, "--uid", "0", "--gid", "0")
	}
	args = append(args, "--", p.Executable, BridgeArg, "--probe-redirect")
	out, err := exec.Command(bwrap, args...).CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return errors.New(msg)
		}
		return err
	}
	return nil
}

// plan lays out the sandbox's side for rules: the HTTP proxy's address,
// the plain forwards, and the hosts file. Names get loopback addresses
// from 127.0.0.2 on, skipping those the rules name; "localhost" stays on
// 127.0.0.1.
func plan(rules []Rule) (proxyAddr string, forwards []Forward, hosts string) {
	used := map[netip.Addr]bool{netip.MustParseAddr("127.0.0.1"): true}
	takenPorts := map[int]bool{}
	for _, r := range rules {
		if a, err := netip.ParseAddr(r.Host); err == nil {
			used[a] = true
		}
	}
	next := netip.MustParseAddr("127.0.0.1")
	names := map[string]netip.Addr{}
	var b strings.Builder
	b.WriteString("# Written by harness: the names the sandbox's egress allowlist lets through.\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	seen := map[string]bool{}
	for _, r := range rules {
		addr, err := netip.ParseAddr(r.Host)
		if err != nil {
			var ok bool
			if addr, ok = names[r.Host]; !ok {
				if r.Host == "localhost" {
					addr = netip.MustParseAddr("127.0.0.1")
				} else {
					for next = next.Next(); used[next]; next = next.Next() {
					}
					used[next] = true
					fmt.Fprintf(&b, "%s\t%s\n", next, r.Host)
					addr = next
				}
				names[r.Host] = addr
			}
		}
		for _, port := range r.Ports() {
			listen := netip.AddrPortFrom(addr, uint16(port)).String()
			if seen[listen] {
				continue
			}
			seen[listen] = true
			if addr.String() == "127.0.0.1" {
				takenPorts[port] = true
			}
			forwards = append(forwards, Forward{Listen: listen, Target: net.JoinHostPort(r.Host, strconv.Itoa(port))})
		}
	}
	port := proxyPort
	for takenPorts[port] {
		port++
	}
	return "127.0.0.1:" + strconv.Itoa(port), forwards, b.String()
}

// Close stops accepting connections, lets open ones finish for the
// proxy's CloseGrace, cuts the rest, waits for their reports and removes
// the session's directory.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.ln.Close()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(s.p.CloseGrace):
			s.cancel()
			s.mu.Lock()
			for c := range s.conns {
				c.Close()
			}
			s.mu.Unlock()
			<-done
		}
		s.cancel()
		if err := os.RemoveAll(s.dir); err != nil {
			s.closeErr = fmt.Errorf("egress session: %w", err)
		}
	})
	return s.closeErr
}

func (s *Session) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond): // e.g. out of file descriptors
			}
			continue
		}
		at := time.Now()
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close()
			s.report(Connection{At: at, Error: fmt.Sprintf("refused: %d connections already open", cap(s.slots))})
			continue
		}
		s.track(c, true)
		s.mu.Lock()
		s.nextID++
		id := s.nextID
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			conn := s.serve(c, Connection{ID: id, At: at})
			s.track(c, false)
			c.Close()
			conn.Duration = time.Since(at)
			s.report(conn)
		}()
	}
}

func (s *Session) track(c net.Conn, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *Session) report(c Connection) {
	if s.onConn == nil {
		return
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	s.onConn(c)
}

// headReader limits how much of a connection can be read while the
// request head is: once the head is read, the limit is lifted.
type headReader struct {
	r     io.Reader
	left  int64
	limit bool
}

func (h *headReader) Read(p []byte) (int, error) {
	if !h.limit {
		return h.r.Read(p)
	}
	if h.left <= 0 {
		return 0, errors.New("request head too large")
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// liveConn is an allowed connection in progress.
type liveConn struct {
	conn    Connection
	out, in *countingWriter
}

// Open returns the allowed connections still open, with their bytes so
// far, marked Open.
func (s *Session) Open() []Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Connection, 0, len(s.live))
	for _, l := range s.live {
		c := l.conn
		c.BytesOut, c.BytesIn = l.out.n.Load(), l.in.n.Load()
		c.Duration = time.Since(c.At)
		c.Open = true
		out = append(out, c)
	}
	return out
}

// serve handles one client connection and says what became of it.
func (s *Session) serve(c net.Conn, conn Connection) Connection {
	c.SetReadDeadline(time.Now().Add(s.p.HeadTimeout))
	hr := &headReader{r: c, left: maxHead, limit: true}
	br := bufio.NewReader(hr)
	req, err := http.ReadRequest(br)
	if err != nil {
		conn.Error = "bad request: " + err.Error()
		writeStatus(c, http.StatusBadRequest, "harness sandbox proxy: "+conn.Error)
		return conn
	}
	hr.limit = false
	c.SetReadDeadline(time.Time{})

	var hostport string
	switch {
	case req.Method == http.MethodConnect:
		hostport = req.RequestURI
	case req.URL.IsAbs() && strings.EqualFold(req.URL.Scheme, "http"):
		hostport = req.URL.Host
		if req.URL.Port() == "" {
			hostport = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	default:
		conn.Error = "bad request: want CONNECT HOST:PORT or an absolute http:// URI"
		writeStatus(c, http.StatusBadRequest, "harness sandbox proxy: "+conn.Error)
		return conn
	}
	host, portText, err := net.SplitHostPort(hostport)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		conn.Error = fmt.Sprintf("bad request: destination %q is not HOST:PORT", hostport)
		writeStatus(c, http.StatusBadRequest, "harness sandbox proxy: "+conn.Error)
		return conn
	}
	conn.Host, conn.Port = strings.ToLower(host), port
	if h, ok := normalizeHost(host); ok {
		conn.Host = h
	}
	if !Allowed(s.p.rules, host, port) {
		conn.Error = "denied by the allowlist"
		writeStatus(c, http.StatusForbidden, fmt.Sprintf("harness sandbox proxy: %s is not on the egress allowlist", net.JoinHostPort(conn.Host, portText)))
		return conn
	}
	conn.Allowed = true
	dctx, cancel := context.WithTimeout(s.ctx, s.p.DialTimeout)
	up, err := s.p.Dial(dctx, "tcp", net.JoinHostPort(conn.Host, portText))
	cancel()
	if err != nil {
		conn.Error = "dial: " + err.Error()
		writeStatus(c, http.StatusBadGateway, "harness sandbox proxy: "+conn.Error)
		return conn
	}
	s.track(up, true)
	defer func() { s.track(up, false); up.Close() }()
	out := &countingWriter{w: up}
	in := &countingWriter{w: c}
	s.mu.Lock()
	s.live[conn.ID] = &liveConn{conn: conn, out: out, in: in}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.live, conn.ID)
		s.mu.Unlock()
	}()
	var copyErr error
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			conn.Error = err.Error()
			return conn
		}
		copyErr = pipe(c, br, up, out, in, true, s.p.HeadTimeout)
	} else {
		for k := range req.Header {
			if strings.HasPrefix(strings.ToLower(k), "proxy-") {
				req.Header.Del(k)
			}
		}
		req.Header.Set("Connection", "close")
		req.Close = true
		rr := requestReader(req)
		copyErr = pipe(c, rr, up, out, in, false, s.p.HeadTimeout)
		rr.Close()
	}
	conn.BytesOut, conn.BytesIn = out.n.Load(), in.n.Load()
	if copyErr != nil {
		conn.Error = copyErr.Error()
	}
	return conn
}

// requestReader streams req as it is to be sent on; close it to stop.
func requestReader(req *http.Request) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(req.Write(pw)) }()
	return pr
}

// pipe copies what the client sends (read through r) to up and what up
// sends back to the client, until both directions end. A tunnel passes a
// half-close on; once the destination has closed, the client has idle to
// close too. A plain request is not half-closed (servers take that for an
// abort); once its response has ended, the connection ends.
func pipe(client net.Conn, r io.Reader, up net.Conn, out, in *countingWriter, tunnel bool, idle time.Duration) error {
	sent := make(chan error, 1)
	received := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, r)
		if err == nil && tunnel {
			closeWrite(up)
		}
		sent <- err
	}()
	go func() {
		_, err := io.Copy(in, up)
		if err == nil {
			closeWrite(client)
		}
		received <- err
	}()
	var sendErr, recvErr error
	select {
	case sendErr = <-sent:
		if sendErr != nil {
			client.Close()
			up.Close()
		}
		recvErr = <-received
	case recvErr = <-received:
		switch {
		case recvErr != nil:
			client.Close()
			up.Close()
		case tunnel:
			client.SetReadDeadline(time.Now().Add(idle))
		default:
			client.SetReadDeadline(time.Now())
		}
		sendErr = <-sent
		if recvErr == nil {
			sendErr = nil // the exchange is complete; how the client's side ended does not matter
		}
	}
	for _, err := range []error{sendErr, recvErr} {
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// countingWriter counts what it writes.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func writeStatus(c net.Conn, code int, msg string) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
