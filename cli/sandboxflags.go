package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"harness/results"
	"harness/sandbox"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
)

// SandboxFlags are the --sandbox flags of the commands that run agents or
// graders.
type SandboxFlags struct {
	Backend string
	Home    string
	Network string
	RO, RW  []string
	Protect []string
	Memory  string
	Pids    string
	CPUs    string
	Disk    string
	Cgroup  string
	// Set is the flag set the flags were added to, for what was changed.
	Set *pflag.FlagSet
	// imageRun says the agents run in images, where the network and caps
	// flags apply without --sandbox bwrap.
	ImageRun bool
	// ModelEndpoint, when set, is the run's model gateway (http://HOST:PORT):
	// the one model endpoint the agent may reach by default, and reachable
	// beside an explicit allowlist.
	ModelEndpoint string
}

// AddFlags defines the flags on fs; usage is --sandbox's help.
func (f *SandboxFlags) AddFlags(fs *pflag.FlagSet, usage string) {
	fs.StringVar(&f.Backend, "sandbox", "none", usage)
	fs.StringVar(&f.Home, "sandbox-home", "", "with --sandbox bwrap, copy `dir` into each fresh HOME (agent config such as ~/.claude)")
	fs.StringVar(&f.Network, "sandbox-network", "", "with --sandbox bwrap or in an image, the agent's `network`: allow:HOST[:PORT],... (only those, through a proxy; default: the run's model gateway, else the hosts of its model endpoints), none, or host")
	fs.StringArrayVar(&f.RO, "sandbox-ro", nil, "with --sandbox bwrap, also bind `path` read-only; repeatable")
	fs.StringArrayVar(&f.RW, "sandbox-rw", nil, "with --sandbox bwrap, also bind `path` read-write; repeatable")
	f.Set = fs
	defaults := limits.DefaultCaps()
	fs.StringVar(&f.Memory, "sandbox-memory", limits.FormatSize(defaults.MemoryBytes), "with --sandbox bwrap or in an image, cap each agent's memory at `size` (512M, 4G; 0: no cap)")
	fs.StringVar(&f.Pids, "sandbox-pids", strconv.Itoa(defaults.Pids), "with --sandbox bwrap or in an image, cap each agent's processes and threads at `n` (0: no cap)")
	fs.StringVar(&f.CPUs, "sandbox-cpus", "0", "with --sandbox bwrap or in an image, cap each agent's CPU use at `n` cores (1.5; 0: no cap)")
	fs.StringVar(&f.Disk, "sandbox-disk", limits.FormatSize(defaults.DiskBytes), "with --sandbox bwrap or in an image, cap what each agent writes in its workspace copy and private /tmp at `size` (0: no cap)")
	fs.StringVar(&f.Cgroup, "sandbox-cgroup", "", "with --sandbox bwrap or in an image, make the caps' cgroups under this delegated cgroup v2 `dir` (default: found)")
	fs.StringArrayVar(&f.Protect, "sandbox-protect", nil, "with --sandbox bwrap, keep `path` read-only even inside a writable directory (the run's outputs, graders and prompts are kept so anyway); repeatable")
}

// Runner builds the sandbox of --sandbox (nil for none), checking that it
// works here. The agent's --env (KEY=VALUE) and --secret-env variables are
// passed into it beyond the usual ones.
func (f *SandboxFlags) Runner(env, secretEnv, agent []string) (sandbox.Runner, error) {
	backend, err := sandbox.ParseBackend(f.Backend)
	if err != nil {
		return nil, Usagef("--sandbox %v", err)
	}
	if backend == sandbox.BackendNone {
		return nil, f.CheckUnsandboxed()
	}
	spec := sandbox.Spec{Backend: backend, Agent: agent, Environ: os.Environ(), AgentEnv: env, SecretEnv: secretEnv,
		RO: f.RO, RW: f.RW, HomeTemplate: f.Home, CgroupParent: f.Cgroup}
	if spec.Caps, err = f.Caps(); err != nil {
		return nil, err
	}
	if spec.Network, spec.Allow, err = f.ParseNetwork(); err != nil {
		return nil, err
	}
	if f.ModelEndpoint != "" && (spec.Network == "" || spec.Network == "allow") {
		rule, err := egress.ParseAllow(strings.TrimPrefix(f.ModelEndpoint, "http://"))
		if err != nil {
			return nil, fmt.Errorf("model gateway %s: %w", f.ModelEndpoint, err)
		}
		spec.Network, spec.Allow = "allow", append(spec.Allow, rule...)
	}
	if key, err := results.KeyPath(os.Getenv); err == nil {
		spec.Secrets = append(spec.Secrets, key) // what would let the agent sign a record
	}
	sb, err := sandbox.New(spec)
	if err != nil {
		return nil, Usagef("--sandbox bwrap: %v", err)
	}
	return sb, nil
}

// CheckUnsandboxed refuses the sandbox flags without a sandbox, but for the
// network and the caps, which apply to the agents in images.
func (f *SandboxFlags) CheckUnsandboxed() error {
	for _, name := range []string{"sandbox-home", "sandbox-network", "sandbox-ro", "sandbox-rw", "sandbox-protect",
		"sandbox-memory", "sandbox-pids", "sandbox-cpus", "sandbox-disk", "sandbox-cgroup"} {
		if f.ImageRun && name != "sandbox-home" && name != "sandbox-ro" && name != "sandbox-rw" && name != "sandbox-protect" {
			continue // the network and the caps apply to the agents in images
		}
		if f.Set != nil && f.Set.Changed(name) {
			return Usagef("--%s needs --sandbox bwrap", name)
		}
	}
	return nil
}

// ParseNetwork reads --sandbox-network: host, none, or
// allow:HOST[:PORT],... ("": the default, the hosts of the agent's model
// endpoints).
func (f *SandboxFlags) ParseNetwork() (string, []egress.Rule, error) {
	mode, rules, err := sandbox.ParseNetwork(f.Network)
	if err != nil {
		return "", nil, Usagef("--sandbox-network %v", err)
	}
	return mode, rules, nil
}

// Egress reads --sandbox-network; by default the hosts of the agent's
// model endpoints (its base-URL variables, in harness's environment or
// --env, or the known API hosts).
func (f *SandboxFlags) Egress(env, agent []string) (string, []egress.Rule, error) {
	mode, rules, err := f.ParseNetwork()
	if err != nil || mode != "" {
		return mode, rules, err
	}
	return "allow", egress.DefaultRules(append(os.Environ(), env...), agent), nil
}

// Caps reads the --sandbox-memory, -pids, -cpus and -disk flags.
func (f *SandboxFlags) Caps() (limits.Caps, error) {
	var c limits.Caps
	var err error
	if c.MemoryBytes, err = limits.ParseSize(f.Memory); err != nil {
		return c, Usagef("--sandbox-memory %q: %v", f.Memory, err)
	}
	if c.Pids, err = limits.ParsePids(f.Pids); err != nil {
		return c, Usagef("--sandbox-pids %q: %v", f.Pids, err)
	}
	if c.CPUs, err = limits.ParseCPUs(f.CPUs); err != nil {
		return c, Usagef("--sandbox-cpus %q: %v", f.CPUs, err)
	}
	if c.DiskBytes, err = limits.ParseSize(f.Disk); err != nil {
		return c, Usagef("--sandbox-disk %q: %v", f.Disk, err)
	}
	c.Names = limits.Names{Memory: "--sandbox-memory", Pids: "--sandbox-pids", CPUs: "--sandbox-cpus", Disk: "--sandbox-disk", CgroupParent: "--sandbox-cgroup"}
	return c, nil
}
