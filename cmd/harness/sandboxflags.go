package main

import (
	"harness/cli"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"harness/results"
	"harness/sandbox"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
)

// sandboxFlags are the --sandbox flags of capture, trials and check.
type sandboxFlags struct {
	backend string
	home    string
	network string
	ro, rw  []string
	protect []string
	memory  string
	pids    string
	cpus    string
	disk    string
	cgroup  string
	set     *pflag.FlagSet
	// imageRun says the agents run in images, where the network and caps
	// flags apply without --sandbox bwrap.
	imageRun bool
}

func (f *sandboxFlags) addFlags(fs *pflag.FlagSet, usage string) {
	fs.StringVar(&f.backend, "sandbox", "none", usage)
	fs.StringVar(&f.home, "sandbox-home", "", "with --sandbox bwrap, copy `dir` into each fresh HOME (agent config such as ~/.claude)")
	fs.StringVar(&f.network, "sandbox-network", "", "with --sandbox bwrap or in an image, the agent's `network`: allow:HOST[:PORT],... (only those, through a proxy; default: the hosts of its model endpoints), none, or host")
	fs.StringArrayVar(&f.ro, "sandbox-ro", nil, "with --sandbox bwrap, also bind `path` read-only; repeatable")
	fs.StringArrayVar(&f.rw, "sandbox-rw", nil, "with --sandbox bwrap, also bind `path` read-write; repeatable")
	f.set = fs
	defaults := limits.DefaultCaps()
	fs.StringVar(&f.memory, "sandbox-memory", limits.FormatSize(defaults.MemoryBytes), "with --sandbox bwrap or in an image, cap each agent's memory at `size` (512M, 4G; 0: no cap)")
	fs.StringVar(&f.pids, "sandbox-pids", strconv.Itoa(defaults.Pids), "with --sandbox bwrap or in an image, cap each agent's processes and threads at `n` (0: no cap)")
	fs.StringVar(&f.cpus, "sandbox-cpus", "0", "with --sandbox bwrap or in an image, cap each agent's CPU use at `n` cores (1.5; 0: no cap)")
	fs.StringVar(&f.disk, "sandbox-disk", limits.FormatSize(defaults.DiskBytes), "with --sandbox bwrap or in an image, cap what each agent writes in its workspace copy and private /tmp at `size` (0: no cap)")
	fs.StringVar(&f.cgroup, "sandbox-cgroup", "", "with --sandbox bwrap or in an image, make the caps' cgroups under this delegated cgroup v2 `dir` (default: found)")
	fs.StringArrayVar(&f.protect, "sandbox-protect", nil, "with --sandbox bwrap, keep `path` read-only even inside a writable directory (the run's outputs, graders and prompts are kept so anyway); repeatable")
}

// runner builds the sandbox of --sandbox (nil for none), checking that it
// works here. The agent's --env (KEY=VALUE) and --secret-env variables are
// passed into it beyond the usual ones.
func (f *sandboxFlags) runner(env, secretEnv, agent []string) (sandbox.Runner, error) {
	backend, err := sandbox.ParseBackend(f.backend)
	if err != nil {
		return nil, cli.Usagef("--sandbox %v", err)
	}
	if backend == sandbox.BackendNone {
		return nil, f.checkUnsandboxed()
	}
	spec := sandbox.Spec{Backend: backend, Agent: agent, Environ: os.Environ(), AgentEnv: env, SecretEnv: secretEnv,
		RO: f.ro, RW: f.rw, HomeTemplate: f.home, CgroupParent: f.cgroup}
	if spec.Caps, err = f.caps(); err != nil {
		return nil, err
	}
	if spec.Network, spec.Allow, err = f.parseNetwork(); err != nil {
		return nil, err
	}
	if key, err := results.KeyPath(os.Getenv); err == nil {
		spec.Secrets = append(spec.Secrets, key) // what would let the agent sign a record
	}
	sb, err := sandbox.New(spec)
	if err != nil {
		return nil, cli.Usagef("--sandbox bwrap: %v", err)
	}
	return sb, nil
}

// checkUnsandboxed refuses the sandbox flags without a sandbox, but for the
// network and the caps, which apply to the agents in images.
func (f *sandboxFlags) checkUnsandboxed() error {
	for _, name := range []string{"sandbox-home", "sandbox-network", "sandbox-ro", "sandbox-rw", "sandbox-protect",
		"sandbox-memory", "sandbox-pids", "sandbox-cpus", "sandbox-disk", "sandbox-cgroup"} {
		if f.imageRun && name != "sandbox-home" && name != "sandbox-ro" && name != "sandbox-rw" && name != "sandbox-protect" {
			continue // the network and the caps apply to the agents in images
		}
		if f.set != nil && f.set.Changed(name) {
			return cli.Usagef("--%s needs --sandbox bwrap", name)
		}
	}
	return nil
}

// parseNetwork reads --sandbox-network: host, none, or
// allow:HOST[:PORT],... ("": the default, the hosts of the agent's model
// endpoints).
func (f *sandboxFlags) parseNetwork() (string, []egress.Rule, error) {
	mode, rules, err := sandbox.ParseNetwork(f.network)
	if err != nil {
		return "", nil, cli.Usagef("--sandbox-network %v", err)
	}
	return mode, rules, nil
}

// egress reads --sandbox-network; by default the hosts of the agent's
// model endpoints (its base-URL variables, in harness's environment or
// --env, or the known API hosts).
func (f *sandboxFlags) egress(env, agent []string) (string, []egress.Rule, error) {
	mode, rules, err := f.parseNetwork()
	if err != nil || mode != "" {
		return mode, rules, err
	}
	return "allow", egress.DefaultRules(append(os.Environ(), env...), agent), nil
}

// caps reads the --sandbox-memory, -pids, -cpus and -disk flags.
func (f *sandboxFlags) caps() (limits.Caps, error) {
	var c limits.Caps
	var err error
	if c.MemoryBytes, err = limits.ParseSize(f.memory); err != nil {
		return c, cli.Usagef("--sandbox-memory %q: %v", f.memory, err)
	}
	if c.Pids, err = limits.ParsePids(f.pids); err != nil {
		return c, cli.Usagef("--sandbox-pids %q: %v", f.pids, err)
	}
	if c.CPUs, err = limits.ParseCPUs(f.cpus); err != nil {
		return c, cli.Usagef("--sandbox-cpus %q: %v", f.cpus, err)
	}
	if c.DiskBytes, err = limits.ParseSize(f.disk); err != nil {
		return c, cli.Usagef("--sandbox-disk %q: %v", f.disk, err)
	}
	c.Names = limits.Names{Memory: "--sandbox-memory", Pids: "--sandbox-pids", CPUs: "--sandbox-cpus", Disk: "--sandbox-disk", CgroupParent: "--sandbox-cgroup"}
	return c, nil
}
