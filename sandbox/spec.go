package sandbox

import (
	"fmt"
	"slices"
	"strings"

	"harness/sandbox/egress"
	"harness/sandbox/limits"
)

// Backend is how the commands of a run are run: as they are, or under
// bubblewrap.
type Backend string

// The backends.
const (
	BackendNone  Backend = "none"
	BackendBwrap Backend = "bwrap"
)

// ParseBackend reads a backend's name; "" is BackendNone.
func ParseBackend(s string) (Backend, error) {
	switch Backend(s) {
	case "", BackendNone:
		return BackendNone, nil
	case BackendBwrap:
		return BackendBwrap, nil
	}
	return "", fmt.Errorf("%q: want none or bwrap", s)
}

// ParseNetwork reads the network a user asks for: host, none, or
// allow:HOST[:PORT],... (mode "allow" with its rules). "" asks for the
// default, the hosts of the agent's model endpoints, and returns mode "".
func ParseNetwork(s string) (mode string, allow []egress.Rule, err error) {
	switch {
	case s == "" || s == "host" || s == "none":
		return s, nil, nil
	case strings.HasPrefix(s, "allow:"):
		rules, err := egress.ParseAllow(strings.TrimPrefix(s, "allow:"))
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", s, err)
		}
		return "allow", rules, nil
	}
	return "", nil, fmt.Errorf("%q: want allow:HOST[:PORT],..., none or host", s)
}

// Spec is the sandbox a run asks for, in typed values.
type Spec struct {
	// Backend says whether there is a sandbox at all.
	Backend Backend
	// Network is "host", "none", "allow" (only the hosts of Allow), or ""
	// for the hosts of the agent's model endpoints: egress.DefaultRules of
	// Environ and AgentEnv, and of the Agent command line.
	Network string
	Allow   []egress.Rule
	// Agent is the agent's command line.
	Agent []string
	// Environ is harness's own environment (os.Environ()); AgentEnv are
	// the KEY=VALUE settings the agent gets beyond it, passed into the
	// sandbox, and SecretEnv names more variables passed in.
	Environ, AgentEnv, SecretEnv []string
	// RO and RW are extra paths bound read-only and read-write.
	RO, RW []string
	// HomeTemplate, when set, is copied into each fresh HOME.
	HomeTemplate string
	// Caps cap the resources of each command; CgroupParent is where their
	// cgroups are made ("" = found).
	Caps         limits.Caps
	CgroupParent string
	// Secrets are files hidden over every bind (see Options.Secrets).
	Secrets []string
}

// New returns the sandbox s asks for, checked to work here: nil for
// BackendNone, a *Bwrap for BackendBwrap.
func New(s Spec) (Runner, error) {
	switch s.Backend {
	case "", BackendNone:
		return nil, nil
	case BackendBwrap:
		b, err := NewBwrap(s.Options())
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("sandbox backend %q: want none or bwrap", s.Backend)
}

// Options are the bubblewrap options of s: its network resolved (the
// default rules when it names none), the agent's variables kept.
func (s Spec) Options() Options {
	keepEnv := slices.Clone(s.SecretEnv)
	for _, kv := range s.AgentEnv {
		k, _, _ := strings.Cut(kv, "=")
		keepEnv = append(keepEnv, k)
	}
	network, allow := s.Network, s.Allow
	if network == "" {
		network, allow = "allow", egress.DefaultRules(slices.Concat(s.Environ, s.AgentEnv), s.Agent)
	}
	caps := s.Caps
	return Options{Network: network, Allow: allow, RO: s.RO, RW: s.RW, HomeTemplate: s.HomeTemplate, KeepEnv: keepEnv,
		Caps: &caps, CgroupParent: s.CgroupParent, Secrets: s.Secrets}
}
