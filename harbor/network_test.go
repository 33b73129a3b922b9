package harbor

import (
	"fmt"
	"testing"

	"harness/sandbox/egress"
)

// A phase's step gets its network: the host's with the internet, the
// phase's hosts alone through the proxy with an allowlist, loopback only
// without the network or without a proxy.
func TestPhaseStepNetwork(t *testing.T) {
	model, err := egress.ParseAllow("api.anthropic.com:443")
	if err != nil {
		t.Fatal(err)
	}
	proxy := egress.NewProxy(model, "")
	for _, tc := range []struct {
		toml, phase string
		proxy       *egress.Proxy
		want        string
	}{
		{"[environment]\nnetwork_mode = \"public\"\n", PhaseVerifier, proxy, "host"},
		{"[environment]\nnetwork_mode = \"no-network\"\n", PhaseVerifier, proxy, "none"},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org:8080\"]\n", PhaseVerifier, proxy, "allow [a.org:8080]"},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org:8080\"]\n", PhaseSolution, proxy, "allow [a.org:8080]"},
		{"[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org:8080\"]\n", PhaseVerifier, nil, "none"},
		{"[agent]\nnetwork_mode = \"public\"\n[environment]\nnetwork_mode = \"no-network\"\n", PhaseSolution, proxy, "host"},
		{"[agent]\nnetwork_mode = \"public\"\n[environment]\nnetwork_mode = \"no-network\"\n", PhaseVerifier, proxy, "none"},
	} {
		task, err := Load(writeTask(t, tc.toml))
		if err != nil {
			t.Fatal(err)
		}
		s := task.PhaseStep(Step{}, tc.phase, tc.proxy, nil)
		got := "host"
		switch {
		case s.Egress != nil && s.NoNetwork:
			got = "both"
		case s.Egress != nil:
			got = fmt.Sprintf("allow %v", s.Egress.Rules())
		case s.NoNetwork:
			got = "none"
		}
		if got != tc.want {
			t.Errorf("%q, %s: %s, want %s", tc.toml, tc.phase, got, tc.want)
		}
	}
	// Loopback only asked for stays so.
	task, err := Load(writeTask(t, "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := task.PhaseStep(Step{NoNetwork: true}, PhaseVerifier, proxy, nil); s.Egress != nil || !s.NoNetwork {
		t.Errorf("no network asked: %+v", s)
	}
}
