package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"harness/sandbox/egress"
)

// TestMain lets the test binary stand in for harness as the bridge.
func TestMain(m *testing.M) {
	if code, ok := HelperMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestBwrapRedirectsWhereTheHostCan: with the network allowlist, a
// sandbox redirects the connections that ignore the proxy variables
// where the probe says the host can, without a warning; where it cannot
// (here a bridge that fails the probe), it keeps the sandbox as it was
// without the redirection and says so once, in its warnings.
func TestBwrapRedirectsWhereTheHostCan(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		t.Skip("bwrap not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rules := []egress.Rule{{Host: "127.0.0.1", Port: 9}}
	for _, c := range []struct {
		exe      string
		redirect bool
	}{{self, true}, {"/bin/false", false}} {
		b, err := NewBwrap(Options{Network: "allow", Allow: rules, Exe: c.exe, TmpDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		warned := slices.ContainsFunc(b.Warnings(), func(w string) bool {
			return strings.Contains(w, "cannot redirect the connections that ignore the proxy variables")
		})
		if b.proxy.Redirect != c.redirect || warned == c.redirect {
			t.Errorf("bridge %s: redirect %v, warnings %q; want redirect %v and a warning only without it", c.exe, b.proxy.Redirect, b.Warnings(), c.redirect)
		}
		s, err := b.proxy.NewSession(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(s.BridgeArgs, "--redirect") && slices.Contains(s.BwrapArgs, "CAP_NET_ADMIN"); got != c.redirect {
			t.Errorf("bridge %s: session redirects %v (bridge %q, bwrap %q)", c.exe, got, s.BridgeArgs, s.BwrapArgs)
		}
		s.Close()
	}
}
