package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/schemas"
	"harness/suite"
	"harness/suiterun"
)

// The trials options harness run sets from the suite's fields come out as
// the same flags as the arguments a Slurm task gets: scalars overridden by
// the suite's run flags, then the agent's, lists extended by them in that
// order.
func TestSuiteTrialsOptionsMatchTheTaskArguments(t *testing.T) {
	dir := t.TempDir()
	suiteFile := filepath.Join(dir, "suite.yaml")
	text := `tests: [{id: a, input: x}]
workspace: {template: ., before_each: make, before_all: prep}
env: [SUITE=1]
sandbox: bwrap
concurrency: 3
agents:
  one:
    command: [agent]
    env: {AGENT: "2"}
    model: big
    adapter: codex-json
    flags: {env: [OWN=3], timeout: 5s, sandbox-protect: [/x]}
`
	if err := os.WriteFile(suiteFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	tc, _ := newTrialsCmdWith(&runFlags{})
	s, err := suite.Load(suiteFile, suiteFlagProblem(tc))
	if err != nil {
		t.Fatal(err)
	}
	s.K = 4
	cases, err := suiterun.ReadCases(s)
	if err != nil {
		t.Fatal(err)
	}
	var rf runCmdFlags
	rf.addFlags(pflag.NewFlagSet("run", pflag.ContinueOnError))
	usd := 0.25
	r := &suiteRun{e: &cli.Env{}, f: &rf, s: s, dir: dir, cases: cases, budget: suiterun.Budget{Cost: 1, Tokens: 100},
		spent: &schemas.Cost{USD: &usd, InputTokens: 40}}
	a := &s.Agents[0]
	out := filepath.Join(dir, "one.jsonl")
	if err := os.WriteFile(out, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	_, typed, err := r.trialsCmd(a, out, true)
	if err != nil {
		t.Fatal(err)
	}
	opts := suiterun.AgentTrials(s, a, out, r.budget, r.spent, r.sharing(a))
	atc, args := newTrialsCmdWith(&runFlags{})
	if err := atc.Flags.Parse(trialsArgs(opts, suiterun.TaskFiles{}, true)); err != nil {
		t.Fatal(err)
	}
	if err := applySuiteFlags(atc, s, a); err != nil {
		t.Fatal(err)
	}
	type view struct {
		K                                                  int
		Output                                             string
		Resume, Quiet                                      bool
		Workspace, Setup, Prepare, Sandbox, Adapter, Model string
		Env, Protect                                       []string
		MaxCost                                            float64
		MaxTokens                                          int64
		Concurrency                                        int
		Timeout                                            string
	}
	see := func(tf *trialsFlags) view {
		f := tf.run
		return view{tf.k, f.output, f.resume, f.quiet, f.workspace, f.wsSetup, f.wsPrepare, f.sandbox.Backend, f.adapter, f.agentModel,
			f.env, f.sandbox.Protect, f.maxCost, f.maxTokens, f.concurrency, f.timeout.String()}
	}
	got, want := see(typed), see(args)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("typed options\n%+v\ntask arguments\n%+v", got, want)
	}
	wantEnv := []string{"AGENT=2", "SUITE=1", "OWN=3"}
	wantProtect := []string{dir, suiteFile, "/x"}
	if !reflect.DeepEqual(got.Env, wantEnv) || !reflect.DeepEqual(got.Protect, wantProtect) || got.K != 4 || !got.Resume ||
		got.Concurrency != 3 || got.Timeout != "5s" || got.MaxCost != 0.75 || got.MaxTokens != 60 || got.Sandbox != "bwrap" {
		t.Errorf("options %+v, want env %v, protect %v, k 4, resume, -j 3, 5s, budget left 0.75 and 60", got, wantEnv, wantProtect)
	}
}
