//go:build linux

package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testAgentVar, when set, makes the test binary run as the sandboxed
// agent of these tests (testAgent) instead of running the tests.
const testAgentVar = "EGRESS_TEST_AGENT"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == BridgeArg {
		os.Exit(BridgeMain(os.Args[2:]))
	}
	if os.Getenv(testAgentVar) != "" {
		os.Exit(testAgent(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// testAgent runs the actions its arguments name, one result line each:
//
//	connect=HOST:PORT    CONNECT through $HTTPS_PROXY, send a line, read the answer
//	get=URL              a GET through $HTTP_PROXY
//	dial=HOST:PORT       a direct connection: send a line, read the answer
//	direct=HOST:PORT     the same, saying "refused" when nothing came back
//	                     (refused, reset or closed, whichever came first)
//	local                a direct connection to a server of its own on the
//	                     sandbox's loopback, which echoes a line
//	bench=MODE,ADDR,N    N connections to ADDR, one after the other, each
//	                     sending a line and reading the answer to the end,
//	                     through $HTTPS_PROXY (MODE proxy) or directly (any
//	                     other MODE); says "ns=TOTAL" or the first error
//	forge=HOST:PORT      CONNECT on the proxy's unix socket itself
//	caps                 this process's capability sets and no-new-privs
//	exit=N               exit with status N
//	term-handled         SIGTERM the parent (the bridge), exit 42 when it comes back
//	term-unhandled       SIGTERM the parent and wait to die of it
func testAgent(args []string) int {
	for _, a := range args {
		action, arg, _ := strings.Cut(a, "=")
		fmt.Printf("%s %s -> %s\n", action, arg, runAction(action, arg))
	}
	return 0
}

func runAction(action, arg string) string {
	payload := "hello " + action + " " + arg + "\n"
	switch action {
	case "connect", "forge":
		var c net.Conn
		var err error
		if action == "forge" {
			c, err = net.Dial("unix", MountDir+"/"+socketName)
		} else {
			u, perr := url.Parse(os.Getenv("HTTPS_PROXY"))
			if perr != nil {
				return "error " + perr.Error()
			}
			c, err = net.Dial("tcp", u.Host)
		}
		if err != nil {
			return "error " + err.Error()
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", arg, arg)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "error " + err.Error()
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("status %d", resp.StatusCode)
		}
		io.WriteString(c, payload)
		got, err := io.ReadAll(br)
		if err != nil {
			return "error " + err.Error()
		}
		return fmt.Sprintf("status 200 got %q", got)
	case "get":
		proxy, _ := url.Parse(os.Getenv("HTTP_PROXY"))
		client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
		resp, err := client.Get(arg)
		if err != nil {
			return "error " + err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("status %d got %q", resp.StatusCode, body)
	case "dial":
		c, err := net.DialTimeout("tcp", arg, 10*time.Second)
		if err != nil {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				return "error " + errno.Error()
			}
			return "error " + err.Error()
		}
		defer c.Close()
		io.WriteString(c, payload)
		got, err := io.ReadAll(c)
		if err != nil {
			return "error " + err.Error()
		}
		if len(got) == 0 {
			return "closed"
		}
		return fmt.Sprintf("got %q", got)
	case "direct":
		c, err := net.DialTimeout("tcp", arg, 10*time.Second)
		if err != nil {
			return "refused"
		}
		defer c.Close()
		io.WriteString(c, payload)
		got, _ := io.ReadAll(c)
		if len(got) == 0 {
			return "refused"
		}
		return fmt.Sprintf("got %q", got)
	case "bench":
		parts := strings.Split(arg, ",")
		if len(parts) != 3 {
			return "error want MODE,ADDR,N"
		}
		var n int
		fmt.Sscan(parts[2], &n)
		start := time.Now()
		for range n {
			if err := benchConn(parts[0], parts[1]); err != nil {
				return "error " + err.Error()
			}
		}
		return fmt.Sprintf("ns=%d", time.Since(start).Nanoseconds())
	case "local":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "error " + err.Error()
		}
		defer l.Close()
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			io.WriteString(c, "local echo: "+line)
		}()
		return runAction("direct", l.Addr().String())
	case "caps":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return "error " + err.Error()
		}
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "Cap") || strings.HasPrefix(line, "NoNewPrivs") {
				out = append(out, strings.Join(strings.Fields(line), ""))
			}
		}
		return strings.Join(out, " ")
	case "exit":
		var n int
		fmt.Sscan(arg, &n)
		os.Exit(n)
	case "term-handled":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		syscall.Kill(os.Getppid(), syscall.SIGTERM)
		<-sigs
		os.Exit(42)
	case "term-unhandled":
		syscall.Kill(os.Getppid(), syscall.SIGTERM)
		select {}
	}
	return "unknown action " + action
}

// benchConn is one connection of the bench action.
func benchConn(mode, addr string) error {
	target := addr
	if mode == "proxy" {
		u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
		if err != nil {
			return err
		}
		target = u.Host
	}
	c, err := net.Dial("tcp", target)
	if err != nil {
		return err
	}
	defer c.Close()
	r := io.Reader(c)
	if mode == "proxy" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		r = br
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	got, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if string(got) != "echo: ping\n" {
		return fmt.Errorf("got %q", got)
	}
	return nil
}

func requireBwrap(t testing.TB) string {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		t.Skip("bwrap not installed")
	}
	return p
}

// sandboxArgs are the arguments a sandbox gives bwrap before a session's.
var sandboxArgs = []string{
	"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
	"--tmpfs", "/tmp", "--tmpfs", "/run",
	"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
}

// runSandboxed runs the test binary as the agent with args, in a bwrap
// sandbox through s, and returns its output and exit status.
func runSandboxed(t testing.TB, bwrap string, s *Session, args ...string) (string, int) {
	t.Helper()
	argv := append(append(append([]string{}, sandboxArgs...), s.BwrapArgs...), "--")
	argv = append(argv, s.Command(append([]string{BridgeBinary}, args...))...)
	cmd := exec.Command(bwrap, argv...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", testAgentVar + "=1"}, s.Env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), code
}

// lineServer is a TCP server on the host's loopback. Each connection
// sends either one line, answered with "echo: LINE", or an HTTP request
// head, answered with a small response; it records the bytes it read and
// wrote on each.
type lineServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns [][2]int64 // bytes read, bytes written
}

func newLineServer(t testing.TB) *lineServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.handle(c) }()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *lineServer) addr() string { return s.ln.Addr().String() }

func (s *lineServer) stop() { s.ln.Close(); s.wg.Wait() }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (s *lineServer) handle(c net.Conn) {
	defer c.Close()
	cr := &countingReader{r: c}
	br := bufio.NewReader(cr)
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	reply := "echo: " + line
	if strings.HasPrefix(line, "GET ") {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if l == "\r\n" {
				break
			}
		}
		body := "hello over http\n"
		reply = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	}
	n, _ := io.WriteString(c, reply)
	s.mu.Lock()
	s.conns = append(s.conns, [2]int64{cr.n, int64(n)})
	s.mu.Unlock()
}

func (s *lineServer) seen() [][2]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.conns)
}

// collector gathers a session's connection reports.
type collector struct {
	mu    sync.Mutex
	conns []Connection
}

func (c *collector) add(conn Connection) { c.mu.Lock(); c.conns = append(c.conns, conn); c.mu.Unlock() }

// TestBridgeEgress runs an agent in a bwrap sandbox with an allowlist: it
// reaches an allowed port through the proxy variables (CONNECT and plain
// HTTP) and through the plain forward, and an allowed name through the
// hosts file on port 443; a second loopback port is refused both ways and
// through the proxy's socket itself; nothing else is reachable; every
// connection through the proxy is reported with the bytes the servers
// counted; and the agent has no capabilities.
func TestBridgeEgress(t *testing.T) {
	bwrap := requireBwrap(t)
	allowed, denied := newLineServer(t), newLineServer(t)
	rules, err := ParseAllow(allowed.addr() + ",Model.Example")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(rules, t.TempDir())
	var d net.Dialer
	p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "model.example:443" {
			addr = allowed.addr()
		}
		return d.DialContext(ctx, network, addr)
	}
	var got collector
	s, err := p.NewSession(got.add)
	if err != nil {
		t.Fatal(err)
	}
	out, code := runSandboxed(t, bwrap, s,
		"connect="+allowed.addr(),
		"dial="+allowed.addr(),
		"get=http://"+allowed.addr()+"/x",
		"dial=model.example:443",
		"connect=MODEL.example:443",
		"connect="+denied.addr(),
		"dial="+denied.addr(),
		"forge="+denied.addr(),
		"get=http://"+denied.addr()+"/x",
		"dial=192.0.2.1:80",
		"caps")
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(s.SocketDir); !os.IsNotExist(err) {
		t.Errorf("session directory left behind: %v", err)
	}
	allowed.stop()
	denied.stop()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	a, dn := allowed.addr(), denied.addr()
	want := []string{
		fmt.Sprintf("connect %s -> status 200 got %q", a, "echo: hello connect "+a+"\n"),
		fmt.Sprintf("dial %s -> got %q", a, "echo: hello dial "+a+"\n"),
		fmt.Sprintf("get http://%s/x -> status 200 got %q", a, "hello over http\n"),
		fmt.Sprintf("dial model.example:443 -> got %q", "echo: hello dial model.example:443\n"),
		fmt.Sprintf("connect MODEL.example:443 -> status 200 got %q", "echo: hello connect MODEL.example:443\n"),
		fmt.Sprintf("connect %s -> status 403", dn),
		fmt.Sprintf("dial %s -> error connection refused", dn),
		fmt.Sprintf("forge %s -> status 403", dn),
		fmt.Sprintf("get http://%s/x -> status 403 got %q", dn, "harness sandbox proxy: "+dn+" is not on the egress allowlist\n"),
		"dial 192.0.2.1:80 -> error network is unreachable",
		"caps  -> CapInh:0000000000000000 CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 CapAmb:0000000000000000 NoNewPrivs:1",
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(lines, want) {
		t.Errorf("agent output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if n := len(denied.seen()); n != 0 {
		t.Errorf("the denied server saw %d connections", n)
	}

	// Every connection through the proxy is reported: the allowed ones
	// with the bytes the server counted on each (in any order).
	var targets, bytes, serverBytes, deniedReports []string
	for _, c := range got.conns {
		if c.At.IsZero() || c.Duration <= 0 {
			t.Errorf("report without time: %+v", c)
		}
		if !c.Allowed {
			deniedReports = append(deniedReports, fmt.Sprintf("%s:%d out=%d in=%d error=%q", c.Host, c.Port, c.BytesOut, c.BytesIn, c.Error))
			continue
		}
		if c.Error != "" {
			t.Errorf("allowed connection with an error: %+v", c)
		}
		targets = append(targets, fmt.Sprintf("%s:%d", c.Host, c.Port))
		bytes = append(bytes, fmt.Sprintf("out=%d in=%d", c.BytesOut, c.BytesIn))
	}
	for _, c := range allowed.seen() {
		serverBytes = append(serverBytes, fmt.Sprintf("out=%d in=%d", c[0], c[1]))
	}
	for _, l := range [][]string{targets, bytes, serverBytes, deniedReports} {
		slices.Sort(l)
	}
	if want := []string{a, a, a, "model.example:443", "model.example:443"}; !slices.Equal(targets, want) {
		t.Errorf("allowed connections reported: %v, want %v", targets, want)
	}
	if !slices.Equal(bytes, serverBytes) {
		t.Errorf("bytes reported %v, the server counted %v", bytes, serverBytes)
	}
	deniedReport := fmt.Sprintf("%s out=0 in=0 error=%q", dn, "denied by the allowlist")
	if want := []string{deniedReport, deniedReport, deniedReport}; !slices.Equal(deniedReports, want) {
		t.Errorf("denied connections reported:\n%s\nwant:\n%s", strings.Join(deniedReports, "\n"), strings.Join(want, "\n"))
	}
}

// TestBridgePassesExitAndSignals: the agent's exit status comes out of the
// sandbox as it is; a SIGTERM sent to the bridge reaches the agent; an
// agent killed by a signal makes the bridge die of the same signal.
func TestBridgePassesExitAndSignals(t *testing.T) {
	bwrap := requireBwrap(t)
	p := NewProxy([]Rule{{Host: "127.0.0.1", Port: 9}}, t.TempDir())
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"exit=7"}, 7},
		{[]string{"term-handled"}, 42},
		{[]string{"term-unhandled"}, 128 + int(syscall.SIGTERM)},
	} {
		s, err := p.NewSession(nil)
		if err != nil {
			t.Fatal(err)
		}
		out, code := runSandboxed(t, bwrap, s, tc.args...)
		s.Close()
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, out)
		}
	}
}

// TestBridgeEgressUnprivileged runs TestBridgeEgress and
// TestBridgeRedirect as an unprivileged user when the tests run as root:
// bwrap then makes user namespaces, and the bridge must still bind port
// 443, redirect connections and leave the agent nothing.
func TestBridgeEgressUnprivileged(t *testing.T) {
	requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: TestBridgeEgress itself runs unprivileged")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) not found")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parent is closed to other users.
	dir, err := os.MkdirTemp("", "egress-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "egress.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	for _, p := range []string{dir, exe} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755)
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		exe, "-test.run=^TestBridge(Egress|Redirect)$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir, "HOME=" + dir, "HARNESS_REQUIRE_AGENTS=1"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestBridgeEgress") || !strings.Contains(string(out), "--- PASS: TestBridgeRedirect") {
		t.Errorf("as an unprivileged user: %v\n%s", err, out)
	}
}

// TestBridgeRedirect: with the redirection, a connection that ignores
// the proxy variables to an address no forward listens on goes to the
// proxy too: a denied loopback port and an outside address are refused
// and reported, where without it they were refused in the sandbox
// without a trace; the allowed port still connects (through its
// forward) and is reported; a server of the agent's own on the
// sandbox's loopback is reached as before and is not the proxy's; the
// agent has no capabilities (CAP_NET_ADMIN, which the bridge needs to
// redirect, included).
func TestBridgeRedirect(t *testing.T) {
	bwrap := requireBwrap(t)
	allowed, denied := newLineServer(t), newLineServer(t)
	rules, err := ParseAllow(allowed.addr())
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(rules, t.TempDir())
	if err := p.ProbeRedirect(bwrap); err != nil {
		t.Fatalf("the redirection does not work here: %v", err)
	}
	p.Redirect = true
	var got collector
	s, err := p.NewSession(got.add)
	if err != nil {
		t.Fatal(err)
	}
	a, dn := allowed.addr(), denied.addr()
	out, code := runSandboxed(t, bwrap, s,
		"direct="+a,
		"direct="+dn,
		"direct=192.0.2.1:80",
		"local",
		"connect="+a,
		"caps")
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	allowed.stop()
	denied.stop()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		fmt.Sprintf("direct %s -> got %q", a, "echo: hello direct "+a+"\n"),
		fmt.Sprintf("direct %s -> refused", dn),
		"direct 192.0.2.1:80 -> refused",
		"",
		fmt.Sprintf("connect %s -> status 200 got %q", a, "echo: hello connect "+a+"\n"),
		"caps  -> CapInh:0000000000000000 CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 CapAmb:0000000000000000 NoNewPrivs:1",
	}
	if len(lines) == len(want) {
		// The agent's own server listens on a port of the kernel's choice.
		if strings.HasPrefix(lines[3], "local  -> got \"local echo: hello direct 127.0.0.1:") {
			want[3] = lines[3]
		}
	}
	if !slices.Equal(lines, want) {
		t.Errorf("agent output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if n := len(denied.seen()); n != 0 {
		t.Errorf("the denied server saw %d connections", n)
	}
	var reports []string
	for _, c := range got.conns {
		r := fmt.Sprintf("%s:%d allowed=%v error=%q", c.Host, c.Port, c.Allowed, c.Error)
		if c.Allowed && (c.BytesOut == 0 || c.BytesIn == 0) {
			r += " without bytes"
		}
		reports = append(reports, r)
	}
	slices.Sort(reports)
	wantReports := []string{
		a + ` allowed=true error=""`,
		a + ` allowed=true error=""`,
		dn + ` allowed=false error="denied by the allowlist"`,
		`192.0.2.1:80 allowed=false error="denied by the allowlist"`,
	}
	slices.Sort(wantReports)
	if !slices.Equal(reports, wantReports) {
		t.Errorf("reported:\n%s\nwant:\n%s", strings.Join(reports, "\n"), strings.Join(wantReports, "\n"))
	}
}
