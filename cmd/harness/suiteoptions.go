package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/internal/suggest"
	"harness/schemas"
	"harness/suite"
	"harness/suiterun"
)

// runFlagsSetByRun are the run flags harness run decides itself.
var runFlagsSetByRun = []string{"output", "resume", "force", "summary", "shard", "junit", "markdown", "k", "rerun-changed"}

// trialsCmd is the trials command of agent a of the suite, writing to out
// ("" to check the flags only): its flags are the agent's trials options
// (suiterun.AgentTrials), then the suite's run flags, then the agent's,
// then those given to harness run, each over the one before.
func (r *suiteRun) trialsCmd(a *suite.Agent, out string, quiet bool) (*cli.Command, *trialsFlags, error) {
	t := suiterun.AgentTrials(r.s, a, out, r.budget, r.spent, r.sharing(a))
	f := &runFlags{moreGraders: suiterun.Graders(r.s, r.cases), prices: r.prices, budgetName: r.budgetName(a)}
	tc, tf := newTrialsCmdWith(f)
	onSlurm := out != "" && (suiterun.OnSlurm(r.s, a) || r.f.flags.Changed("slurm"))
	if onSlurm {
		// The tasks run harness trials with these options as arguments.
		if err := r.slurmTrialsFlags(tc, f, t, quiet); err != nil {
			return nil, nil, err
		}
	} else {
		setTrialsOptions(tf, t, quiet)
		tf.saidNoGrader = r.sayNoGrader
		f.rerunChanged = t.Resume && r.f.rerunChanged
	}
	if err := applySuiteFlags(tc, r.s, a); err != nil {
		return nil, nil, err
	}
	if !onSlurm {
		// The options' lists come before the suite's additions to them.
		f.env = append(slices.Clone(t.Env), f.env...)
		f.sandbox.Protect = append(slices.Clone(t.Protect), f.sandbox.Protect...)
	}
	if err := r.f.image.passOn(tc.Flags, r.f.flags); err != nil {
		return nil, nil, err
	}
	return tc, tf, nil
}

// setTrialsOptions sets the trials flags t holds (but its lists, Env and
// Protect, which go before the suite's).
func setTrialsOptions(tf *trialsFlags, t suiterun.Trials, quiet bool) {
	f := tf.run
	tf.k = t.K
	f.output, f.resume = t.Output, t.Resume
	f.workspace, f.wsSetup, f.wsPrepare = t.Workspace.Template, t.Workspace.Setup, t.Workspace.Prepare
	if t.Sandbox != "" {
		f.sandbox.Backend = t.Sandbox
	}
	f.adapter, f.agentModel = t.Adapter, t.Model
	f.maxCost, f.maxTokens = t.Budget.Cost, t.Budget.Tokens
	f.quiet = quiet
}

// applySuiteFlags sets the suite's run flags on the trials command, then
// the agent's; an error names the suite line.
func applySuiteFlags(tc *cli.Command, s *suite.Suite, a *suite.Agent) error {
	problem := suiteFlagProblem(tc)
	set := func(f suite.Flag, where string) error {
		if msg := problem(f); msg != "" {
			return cli.Input(&schemas.InputError{File: s.File, Line: f.Line, Field: where + f.Name, Msg: msg})
		}
		return nil
	}
	for _, f := range s.Flags {
		if err := set(f, ""); err != nil {
			return err
		}
	}
	for _, f := range a.Flags {
		if err := set(f, "agents."+a.Name+".flags."); err != nil {
			return err
		}
	}
	return flagConflict(tc, s, a)
}

// flagConflict says, naming the suite lines, when the suite (or the
// agent's flags) sets working-limit with a flag it cannot go with, as the
// command line refuses --working-limit with --timeout or
// --no-model-gateway, before anything runs.
func flagConflict(tc *cli.Command, s *suite.Suite, a *suite.Agent) error {
	// find is the last setting of a flag: the agent's over the suite's.
	find := func(name string) (suite.Flag, string, bool) {
		for i := len(a.Flags) - 1; i >= 0; i-- {
			if a.Flags[i].Name == name {
				return a.Flags[i], "agents." + a.Name + ".flags.", true
			}
		}
		for i := len(s.Flags) - 1; i >= 0; i-- {
			if s.Flags[i].Name == name {
				return s.Flags[i], "", true
			}
		}
		return suite.Flag{}, "", false
	}
	wl, where, ok := find("working-limit")
	if fl := tc.Flags.Lookup("working-limit"); !ok || fl == nil || fl.Value.String() == "0" {
		return nil
	}
	fail := func(msg string) error {
		return cli.Input(&schemas.InputError{File: s.File, Line: wl.Line, Field: where + wl.Name, Msg: msg})
	}
	if t, twhere, ok := find("timeout"); ok {
		return fail(fmt.Sprintf("takes the place of timeout (%s, line %d): choose one", twhere+t.Name, t.Line))
	}
	if g, gwhere, ok := find("no-model-gateway"); ok && tc.Flags.Lookup("no-model-gateway").Value.String() == "true" {
		return fail(fmt.Sprintf("needs the model gateway to see the provider's failures: drop %s (line %d)", gwhere+g.Name, g.Line))
	}
	return nil
}

// suiteFlagProblem sets the run flags a suite sets on tc, the trials
// command, and says what is wrong with one ("" when nothing is): a key that
// is no suite key or run flag (with the one probably meant), a flag harness
// run decides, a list for a flag of one value, a value the flag refuses.
func suiteFlagProblem(tc *cli.Command) suite.FlagCheck {
	return func(f suite.Flag) string {
		if f.Name == "max-cost" || f.Name == "max-tokens" {
			return "" // the run's budget, handed out by harness run
		}
		if slices.Contains(runFlagsSetByRun, f.Name) {
			return "harness run sets this itself"
		}
		if f.Name == "grader" {
			// The run flag would take paths from the current directory:
			// a suite's graders are relative to the suite.
			return "did you mean graders? (a list of grader files relative to the suite, or grader configs)"
		}
		fl := tc.Flags.Lookup(f.Name)
		if fl == nil {
			msg := "not a suite key or a run flag (keys: " + strings.Join(suite.RootKeys, ", ") + ")"
			var names []string
			tc.Flags.VisitAll(func(fl *pflag.Flag) { names = append(names, fl.Name) })
			if best := suggest.Nearest(f.Name, append(slices.Clone(suite.RootKeys), names...)); best != "" {
				msg += "; did you mean " + best + "?"
			}
			return msg
		}
		if len(f.Values) > 1 && !strings.Contains(fl.Value.Type(), "Array") && !strings.Contains(fl.Value.Type(), "Slice") {
			return "takes one value, not a list"
		}
		for _, v := range f.Values {
			if err := tc.Flags.Set(f.Name, v); err != nil {
				return flagValueProblem(fl, v, err)
			}
			if slices.Contains(durationFlags, f.Name) && v != "" {
				if _, err := schemas.ParseDuration(v); err != nil {
					return fmt.Sprintf("want a duration (90s, 2m; a bare number is milliseconds), got %q", v)
				}
			}
		}
		return ""
	}
}

// durationFlags are the run flags that take a duration as text.
var durationFlags = []string{"timeout", "working-limit", "startup-timeout", "cancel-grace", "settle", "terminal-timeout", "request-timeout", "grader-timeout"}

// flagValueProblem says what a flag wants of a value it refused, in words
// (not the parser's: "strconv.ParseInt: parsing ...").
func flagValueProblem(fl *pflag.Flag, v string, err error) string {
	switch fl.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return fmt.Sprintf("want a whole number, got %q", v)
	case "float32", "float64":
		return fmt.Sprintf("want a number, got %q", v)
	case "bool":
		return fmt.Sprintf("want true or false, got %q", v)
	case "duration":
		return fmt.Sprintf("want a duration (90s, 2m; a bare number is milliseconds), got %q", v)
	}
	// pflag says: invalid argument "v" for "-j, --name" flag: why.
	msg := err.Error()
	if _, why, ok := strings.Cut(msg, " flag: "); ok && strings.HasPrefix(msg, "invalid argument ") {
		return why
	}
	return msg
}

// imageRunFlags are the flags of harness run given to every agent's
// trials run over the suite's: concurrency, turn timeout, sandbox and the
// image flags.
type imageRunFlags struct {
	timeoutScale float64
	cacheDir     string
}

func (f *imageRunFlags) add(fs *pflag.FlagSet) {
	fs.IntP("concurrency", "j", 1, "run `n` agent processes at once, for every agent (over the suite's concurrency)")
	cli.DurationVarP(fs, new(time.Duration), "timeout", "t", 60*time.Second, "per-turn `timeout` of every agent (over the suite's timeout); a case's timeout field overrides it")
	fs.String("sandbox", "none", "run every agent in a `sandbox`: none or bwrap (over the suite's and the agents' sandbox)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "where task images are unpacked, once each, and a task directory's suite is written (default $XDG_CACHE_HOME/harness/images)")
	fs.Bool("keep-layers", false, "leave each trial's image layer (its changes) on disk")
	fs.Bool("agent-in-image", false, "run the agent command as the image has it instead of binding the host's program in")
	fs.Bool("image-no-network", false, "give the agents in images loopback only")
	fs.Float64Var(&f.timeoutScale, "task-timeout-scale", 1, "multiply each task's agent and verifier timeouts by `factor` (a slower machine, a slower agent)")
	fs.Bool("force-build", false, "build each task's environment/Dockerfile even when its task.toml names a prebuilt docker_image")
	fs.Int("slurm", 0, "run every agent's trials as a Slurm array job of `n` tasks (over the suite's slurm)")
}

// passOn sets the image flags given to harness run on a trials run's
// flags, over what the suite set.
func (f *imageRunFlags) passOn(trials, run *pflag.FlagSet) error {
	if f.timeoutScale <= 0 {
		return cli.Usagef("--task-timeout-scale must be positive")
	}
	for _, name := range []string{"concurrency", "timeout", "sandbox", "cache-dir", "keep-layers", "agent-in-image", "image-no-network", "task-timeout-scale", "force-build", "slurm"} {
		fl := run.Lookup(name)
		if fl == nil || !fl.Changed {
			continue
		}
		if err := trials.Set(name, fl.Value.String()); err != nil {
			return cli.Usagef("--%s: %v", name, err)
		}
	}
	return nil
}
