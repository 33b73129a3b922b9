package sandbox

import (
	"slices"
	"strings"
	"testing"

	"harness/sandbox/egress"
	"harness/sandbox/limits"
)

func TestParseBackend(t *testing.T) {
	for in, want := range map[string]Backend{"": BackendNone, "none": BackendNone, "bwrap": BackendBwrap} {
		if got, err := ParseBackend(in); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseBackend("docker"); err == nil || !strings.Contains(err.Error(), `"docker": want none or bwrap`) {
		t.Errorf("ParseBackend(docker): %v", err)
	}
}

func TestParseNetwork(t *testing.T) {
	for _, in := range []string{"", "host", "none"} {
		mode, rules, err := ParseNetwork(in)
		if err != nil || mode != in || rules != nil {
			t.Errorf("ParseNetwork(%q) = %q, %v, %v", in, mode, rules, err)
		}
	}
	mode, rules, err := ParseNetwork("allow:example.com:8443,api.example.org")
	if err != nil || mode != "allow" || len(rules) != 2 || rules[0] != (egress.Rule{Host: "example.com", Port: 8443}) {
		t.Errorf("allow: %q, %v, %v", mode, rules, err)
	}
	if _, _, err := ParseNetwork("allow:"); err == nil || !strings.HasPrefix(err.Error(), "allow:: ") {
		t.Errorf("an empty allowlist: %v", err)
	}
	if _, _, err := ParseNetwork("open"); err == nil || !strings.Contains(err.Error(), `"open": want allow:`) {
		t.Errorf("an unknown mode: %v", err)
	}
}

func TestSpecOptions(t *testing.T) {
	s := Spec{
		Backend:   BackendBwrap,
		Agent:     []string{"agent", "--acp"},
		Environ:   []string{"PATH=/bin", "OPENAI_BASE_URL=http://models.internal:8080/v1"},
		AgentEnv:  []string{"MODE=fast", "ANTHROPIC_BASE_URL=https://gateway.example:9443"},
		SecretEnv: []string{"MY_TOKEN"},
		RO:        []string{"/ro"},
		Caps:      limits.Caps{Pids: 64},
		Secrets:   []string{"/key"},
	}
	o := s.Options()
	if want := []string{"MY_TOKEN", "MODE", "ANTHROPIC_BASE_URL"}; !slices.Equal(o.KeepEnv, want) {
		t.Errorf("KeepEnv %v, want %v", o.KeepEnv, want)
	}
	wantRules := []egress.Rule{{Host: "models.internal", Port: 8080}, {Host: "gateway.example", Port: 9443}}
	if o.Network != "allow" || !slices.Equal(o.Allow, wantRules) {
		t.Errorf("default network %q %v, want allow %v", o.Network, o.Allow, wantRules)
	}
	if o.Caps == nil || o.Caps.Pids != 64 || !slices.Equal(o.RO, s.RO) || !slices.Equal(o.Secrets, s.Secrets) {
		t.Errorf("options %+v", o)
	}
	s.Network, s.Allow = "none", nil
	if o := s.Options(); o.Network != "none" || o.Allow != nil {
		t.Errorf("network none became %q %v", o.Network, o.Allow)
	}
}

func TestNewSelectsTheBackend(t *testing.T) {
	r, err := New(Spec{Backend: BackendNone, RO: []string{"/no/such/path"}})
	if r != nil || err != nil {
		t.Fatalf("BackendNone: %v, %v; want no sandbox", r, err)
	}
	if _, err := New(Spec{Backend: "docker"}); err == nil {
		t.Fatal("an unknown backend made a sandbox")
	}
	// Bwrap checks its binds before it runs anything: with no such path,
	// there is an error whether bubblewrap is installed or not.
	if r, err := New(Spec{Backend: BackendBwrap, Network: "host", RO: []string{"/no/such/path"}}); err == nil || r != nil {
		t.Fatalf("a bind that does not exist: %v, %v", r, err)
	}
}
