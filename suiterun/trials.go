package suiterun

import (
	"os"
	"path/filepath"

	"harness/schemas"
	"harness/suite"
)

// Trials are the options of one agent's trials in a run of a suite, from
// the suite's fields and the agent's; the suite's run flags (Suite.Flags,
// Agent.Flags) are the caller's to apply over them.
type Trials struct {
	// K is the number of trials per case.
	K int
	// Output is the agent's records file; Resume says it exists, from an
	// earlier run to continue.
	Output string
	Resume bool
	// Workspace is the suite's workspace template and hooks.
	Workspace suite.Workspace
	// Sandbox is the agent's sandbox ("" when its sandbox key is not set).
	Sandbox string
	// Protect are paths kept read-only for an agent that runs in a bwrap
	// sandbox (by its sandbox key or the suite's run flags): the run
	// directory, the suite file and the prompts file it names.
	Protect []string
	// Adapter and Model are the agent's adapter and price row.
	Adapter, Model string
	// Env holds the agent's KEY=VALUE pairs.
	Env []string
	// Budget is this agent's share of what is left of the run's budget
	// (none for a replayed agent).
	Budget Budget
}

// AgentTrials is the options of agent a's trials into out, given what the
// agents before it spent of the run's budget b and the number of agents
// still to run that share it, this one among them (Budget.Share).
func AgentTrials(s *suite.Suite, a *suite.Agent, out string, b Budget, spent *schemas.Cost, sharing int) Trials {
	t := Trials{
		K: s.K, Output: out, Workspace: s.Workspace, Sandbox: a.Sandbox,
		Adapter: a.Adapter, Model: a.Model, Env: a.Env,
	}
	if !Replayed(a) {
		t.Budget = b.Share(spent, sharing)
	}
	if out != "" {
		if _, err := os.Stat(out); err == nil {
			t.Resume = true // the earlier run of a resumed one
		}
	}
	if Sandbox(s, a) == "bwrap" {
		// The run directory and the suite file stay out of the agent's
		// reach, as the run's own outputs do; so does the prompts file
		// the suite names (the trials read the run directory's copy of
		// the cases, not this file).
		if out != "" {
			t.Protect = append(t.Protect, filepath.Dir(out))
		}
		for _, p := range []string{s.File, s.PromptsFile} {
			if p != "" {
				t.Protect = append(t.Protect, p)
			}
		}
	}
	return t
}

// Sandbox is the sandbox agent a ends up in: its sandbox key, then the
// suite's run flags, then the agent's own, each overriding the one before.
func Sandbox(s *suite.Suite, a *suite.Agent) string {
	backend := a.Sandbox
	for _, flags := range [][]suite.Flag{s.Flags, a.Flags} {
		for _, f := range flags {
			if f.Name == "sandbox" && len(f.Values) > 0 {
				backend = f.Values[len(f.Values)-1]
			}
		}
	}
	return backend
}

// OnSlurm reports whether agent a of the suite runs on Slurm (the suite
// or the agent sets the slurm run flag).
func OnSlurm(s *suite.Suite, a *suite.Agent) bool {
	for _, flags := range [][]suite.Flag{s.Flags, a.Flags} {
		for _, f := range flags {
			if f.Name == "slurm" {
				return true
			}
		}
	}
	return false
}
