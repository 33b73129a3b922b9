//go:build linux

package egress

import (
	"os/exec"
	"testing"
)

// BenchmarkStart measures the cost of starting a command in the sandbox:
// plain bwrap with its own network namespace, against bwrap with an egress
// session (socket, hosts file) and the bridge (listeners for the default
// allowlist, dropping capabilities, re-executing itself) before the
// command. The command is /bin/true.
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
	b.Run("bwrap+bridge", func(b *testing.B) {
		p := NewProxy(DefaultRules(nil, nil), b.TempDir())
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
	})
}
