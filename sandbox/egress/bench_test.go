//go:build linux

package egress

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkStart measures the cost of starting a command in the sandbox:
// plain bwrap with its own network namespace, against bwrap with an egress
// session (socket, hosts file) and the bridge (listeners for the default
// allowlist, dropping capabilities, re-executing itself) before the
// command, and the same with the redirection installed. The command is
// /bin/true.
func BenchmarkStart(b *testing.B) {
	bwrap := requireBwrap(b)
	run := func(b *testing.B, argv []string) {
		if out, err := exec.Command(bwrap, argv...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	b.Run("bwrap", func(b *testing.B) {
		argv := append(append([]string{}, sandboxArgs...), "--unshare-net", "--cap-drop", "ALL", "--", "/bin/true")
		for b.Loop() {
			run(b, argv)
		}
	})
	b.Run("bwrap+bridge", func(b *testing.B) { startBridge(b, bwrap, run, false) })
	b.Run("bwrap+bridge+redirect", func(b *testing.B) { startBridge(b, bwrap, run, true) })
}

// startBridge is BenchmarkStart's case with an egress session, with or
// without the redirection.
func startBridge(b *testing.B, bwrap string, run func(*testing.B, []string), redirect bool) {
	p := NewProxy(DefaultRules(nil, nil), b.TempDir())
	if redirect {
		if err := p.ProbeRedirect(bwrap); err != nil {
			b.Fatalf("the redirection does not work here: %v", err)
		}
		p.Redirect = true
	}
	for b.Loop() {
		s, err := p.NewSession(nil)
		if err != nil {
			b.Fatal(err)
		}
		argv := append(append(append([]string{}, sandboxArgs...), s.BwrapArgs...), "--")
		run(b, append(argv, s.Command([]string{"/bin/true"})...))
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnection measures what one connection costs a sandboxed
// program, by how it leaves the sandbox: through the proxy variables (an
// HTTP CONNECT to the bridge's proxy listener), through the plain forward
// of an allowed host, and redirected (a program that ignores the proxy
// variables, to an address no forward listens on): to an outside address,
// and to a loopback address, which is first tried on a server of the
// sandbox's own. Each connection sends a line to a server on the host's
// loopback and reads its answer to the end. The sandboxed program times
// b.N connections one after the other; the metric is ns/conn (ns/op
// includes the sandbox's start).
func BenchmarkConnection(b *testing.B) {
	bwrap := requireBwrap(b)
	srv := newLineServer(b)
	outside := "192.0.2.1:80" // stands for the server: the proxy dials it there
	rules, err := ParseAllow(srv.addr() + "," + outside)
	if err != nil {
		b.Fatal(err)
	}
	p := NewProxy(rules, b.TempDir())
	if err := p.ProbeRedirect(bwrap); err != nil {
		b.Fatalf("the redirection does not work here: %v", err)
	}
	p.Redirect = true
	var d net.Dialer
	p.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == outside {
			addr = srv.addr()
		}
		return d.DialContext(ctx, network, addr)
	}
	for _, c := range []struct {
		name, mode, addr string
		forward          bool // keep the forward of the server's address
	}{
		{"proxy-variables", "proxy", srv.addr(), true},
		{"forward", "direct", srv.addr(), true},
		{"redirect-outside", "direct", outside, false},
		{"redirect-loopback", "direct", srv.addr(), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := p.NewSession(nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			// The forwards stand in for what the redirection would
			// otherwise take: drop those the case does without.
			var args []string
			for i := 0; i < len(s.BridgeArgs); i++ {
				if a := s.BridgeArgs[i]; a == "--forward" && (!c.forward || !strings.HasPrefix(s.BridgeArgs[i+1], srv.addr()+"=")) {
					i++
					continue
				}
				args = append(args, s.BridgeArgs[i])
			}
			s.BridgeArgs = args
			out, code := runSandboxed(b, bwrap, s, fmt.Sprintf("bench=%s,%s,%d", c.mode, c.addr, b.N))
			ns, ok := strings.CutPrefix(strings.TrimSpace(out[strings.LastIndex(out, "-> ")+3:]), "ns=")
			total, err := strconv.ParseFloat(ns, 64)
			if code != 0 || !ok || err != nil {
				b.Fatalf("exit %d: %s", code, out)
			}
			b.ReportMetric(total/float64(b.N), "ns/conn")
		})
	}
}
