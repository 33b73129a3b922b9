package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/evaluation"
	"harness/schemas"
	"harness/trials"
)

func newTrialsCmd() *cli.Command { c, _ := newTrialsCmdWith(&runFlags{}); return c }

// trialsFlags are the flags of the trials command: the run flags it shares
// with capture and its own.
type trialsFlags struct {
	run               *runFlags
	k                 int
	seed              uint64
	resamples         int
	summaryPath       string
	minRate           string
	minAt             []string
	minExp            []string
	allowGraderErrors bool
	failOn            []string
	leaveOut          []string
	minCoverage       string
	adaptive          adaptiveFlags
	flags             *pflag.FlagSet
	// saidNoGrader, when set, says that the trials have no grader in the
	// caller's words (harness run says it once for all its agents).
	saidNoGrader func()
}

func (t *trialsFlags) addFlags(fs *pflag.FlagSet) {
	t.flags = fs
	fs.IntVarP(&t.k, "k", "k", 5, "trials per case")
	t.run.addFlags(fs)
	fs.Uint64Var(&t.seed, "seed", trials.DefaultSeed, "seed of the bootstrap intervals")
	fs.IntVar(&t.resamples, "resamples", trials.DefaultResamples, "bootstrap resamples")
	fs.StringVar(&t.summaryPath, "summary", "", "write the run summary (JSON) to `file` (default: beside -o, named after it: -o trials.jsonl writes trials.summary.json; the last line when writing to stdout)")
	fs.StringVar(&t.minRate, "min-pass-rate", "", "exit 1 unless the pass rate is at least `x` (0..1)")
	fs.StringArrayVar(&t.minAt, "min-pass-at", nil, "exit 1 unless mean pass@K is at least X (`K=X`); repeatable")
	fs.StringArrayVar(&t.minExp, "min-pass-exp", nil, "exit 1 unless mean pass^K is at least X (`K=X`); repeatable")
	fs.BoolVar(&t.allowGraderErrors, "allow-grader-errors", false, "let the gates pass although some trials hit grader errors (left out of n)")
	fs.StringSliceVar(&t.failOn, "fail-on", nil, "count trials with these error `classes` or owners (infra,grader,config,timeout,...) as failures in n and the gates, instead of leaving them out")
	fs.StringSliceVar(&t.leaveOut, "leave-out", nil, "leave trials with these error `classes` or owners (agent,timeout,...) out of n instead of counting them as failures; --leave-out agent counts as older versions did")
	fs.StringVar(&t.minCoverage, "min-coverage", "", "with a gate, fail it unless at least `x` (0..1) of the asked trials are in n (default 0.9)")
	t.adaptive.addFlags(fs)
}

// newTrialsCmdWith is the trials command with f as its run flags, which a
// caller (harness run) may have given graders and prices beforehand, and
// its flags.
func newTrialsCmdWith(f *runFlags) (*cli.Command, *trialsFlags) {
	t := &trialsFlags{run: f}
	c := &cli.Command{
		Name:  "trials",
		Usage: "trials PROMPTS -k N [flags] -- AGENT [ARGS...]",
		Short: "run each case k times, grade every trial, and compute pass@k and pass^k",
		Long: `trials runs k trials of every case, each in a fresh session (and a fresh
workspace copy with --workspace), grades them with -g, and writes one trials
record per case: n (graded trials), c (passes), passRate with its Wilson 95%
interval, the unbiased pass@k = 1 - C(n-c,k)/C(n,k) and pass^k = C(c,k)/C(n,k)
at k = 1..n (passAt, passExp), and passAtK / passExpK at the asked k. Every
failed trial has an owner: the agent's own failures (a crash, a turn past
its timeout, a cap) are failures in n (a trial a limit ended is graded as
it stands); the infrastructure's (the provider's 429/5xx or lost
connection, the sandbox) are retried (--retries) and, if still failing, left
out of n, as are a grader's; every headline says its coverage. The last line (or --summary FILE) is
the run summary: means over cases with bootstrap 95% intervals; a table of
it is printed on stderr.

-j schedules (case, trial) units over agent processes; two trials of one
case never share a session or a workspace. While cases are in progress their
finished trials are kept in OUTPUT.partial, so --resume reruns only the
trials that had not finished.

Examples:
  harness trials prompts.jsonl -k 5 -g grader.py -o trials.jsonl -- ./my-agent
  harness trials prompts.jsonl -k 10 -j 8 -g judge.yaml --min-pass-at 1=0.6 -o t.jsonl -- npx @google/gemini-cli --acp
  harness trials prompts.jsonl -k 5 -g grader.py -o t.jsonl --resume -- ./my-agent`,
		Agent: true,
		Flags: pflag.NewFlagSet("trials", pflag.ContinueOnError),
	}
	t.addFlags(c.Flags)
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		_, _, err := t.execute(ctx, e, c, args, agent)
		return err
	}
	return c, t
}

// execute runs the trials of args (the prompts file) against agent, and
// says how the run ended: its result (nil when it did not run here), its
// status for harness run's manifest, and the command's error.
func (t *trialsFlags) execute(ctx context.Context, e *cli.Env, c *cli.Command, args, agent []string) (*evaluation.Result, string, error) {
	f := t.run
	to, gates, err := t.check()
	if err != nil {
		return nil, statusError, err
	}
	if err := f.checkSlurm(args); err != nil {
		return nil, statusError, err
	}
	if t.summaryPath != "" {
		f.summaryPath = t.summaryPath // kept read-only in the sandbox
	}
	setup, err := f.prepare(ctx, e, args, agent, "trials")
	if err != nil {
		return nil, statusError, err
	}
	if f.slurm.tasks > 0 {
		setup.cleanup()
		f.failOn, f.leaveOut = t.failOn, t.leaveOut
		err := runSlurm(ctx, &slurmRun{e: e, c: c, f: f, cmdName: "trials", k: t.k, agent: agent, finish: gates}, args)
		return nil, exitStatus(err), err
	}
	if to.Adaptive != nil && len(setup.graders) == 0 && f.image.tasks == "" {
		setup.cleanup()
		return nil, statusError, cli.Usagef("--adaptive decides from the trials' verdicts: give a grader (-g)")
	}
	if setup.shard.N == 0 && len(setup.graders) == 0 && !f.quiet && f.image.tasks == "" {
		if t.saidNoGrader != nil {
			t.saidNoGrader()
		} else {
			fmt.Fprintln(e.Stderr, "harness trials: no grader (-g): trials are recorded but nothing is scored")
		}
	}
	to.CreatePartial = f.sandbox.Backend == "bwrap"
	return evaluate(ctx, e, f, setup, t.k, to, gates)
}

// check reads the trials flags into the options of the evaluation and the
// gates of its summary.
func (t *trialsFlags) check() (*evaluation.TrialsOptions, func(schemas.TrialsSummary) error, error) {
	f := t.run
	if t.k < 1 {
		return nil, nil, cli.Usagef("-k must be at least 1")
	}
	if err := cli.CheckOwnersOrClasses("--fail-on", t.failOn); err != nil {
		return nil, nil, err
	}
	if err := cli.CheckOwnersOrClasses("--leave-out", t.leaveOut); err != nil {
		return nil, nil, err
	}
	gates, err := parseGates(t.minRate, t.minAt, t.minExp)
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	if t.minCoverage != "" {
		x, err := trials.ParseFraction(t.minCoverage)
		if err != nil {
			return nil, nil, cli.Usagef("--min-coverage: %v", err)
		}
		if len(gates) > 0 {
			gates = append(gates, trials.Gate{Metric: trials.GateCoverage, Min: x})
		}
	}
	summaryPath := t.summaryPath
	if summaryPath != "" {
		if _, err := os.Stat(summaryPath); err == nil && !f.force {
			return nil, nil, cli.Usagef("--summary %s already exists; use --force to overwrite it", summaryPath)
		}
	} else {
		// The records stream holds only trials records, as the
		// TypeScript acp-harness's readers expect.
		summaryPath = cli.SummaryBeside(f.output)
	}
	policy, err := t.adaptive.policy(t.flags, t.k, f)
	if err != nil {
		return nil, nil, err
	}
	to := &evaluation.TrialsOptions{FailOn: t.failOn, LeaveOut: t.leaveOut, Adaptive: policy, SummaryPath: summaryPath, Seed: t.seed, Resamples: t.resamples}
	allow := t.allowGraderErrors
	return to, func(sum schemas.TrialsSummary) error { return checkGates(gates, sum, allow) }, nil
}

// checkGates applies the gates to a run's summary: exit 1 naming each gate
// that failed, and grader errors under gates unless they are allowed.
func checkGates(gates []trials.Gate, sum schemas.TrialsSummary, allowGraderErrors bool) error {
	failed := trials.CheckGates(gates, sum)
	if n := trials.GraderErrors(sum); n > 0 && len(gates) > 0 && !allowGraderErrors {
		failed = append(failed, fmt.Sprintf("%d trials hit grader errors, so the metrics cover only the graded ones; fix the grader, or accept that with --allow-grader-errors", n))
	}
	if len(failed) > 0 {
		return cli.WithCode(cli.ExitGateFailed, fmt.Errorf("gate failed: %s", strings.Join(failed, "; ")))
	}
	return nil
}

// parseGates reads the gate flags: minPassRate is the value of
// --min-pass-rate ("" for none), minPassAt and minPassExp the values of
// the repeatable --min-pass-at and --min-pass-exp ("K=X" each).
func parseGates(minPassRate string, minPassAt, minPassExp []string) ([]trials.Gate, error) {
	var gates []trials.Gate
	if strings.TrimSpace(minPassRate) != "" {
		x, err := trials.ParseFraction(minPassRate)
		if err != nil {
			return nil, fmt.Errorf("--min-pass-rate: %w", err)
		}
		gates = append(gates, trials.Gate{Metric: trials.GatePassRate, Min: x})
	}
	for _, spec := range []struct {
		metric string
		values []string
	}{{trials.GatePassAt, minPassAt}, {trials.GatePassExp, minPassExp}} {
		for _, v := range spec.values {
			k, x, err := trials.ParseKX(v)
			if err != nil {
				return nil, fmt.Errorf("--min-%s %q: %w", spec.metric, v, err)
			}
			gates = append(gates, trials.Gate{Metric: spec.metric, K: k, Min: x})
		}
	}
	return gates, nil
}

// adaptiveFlags are the flags of an adaptive trials run.
type adaptiveFlags struct {
	on      bool
	minK    int
	maxK    int
	ciWidth float64
}

func (a *adaptiveFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&a.on, "adaptive", false, "spend trials where the pass rate is uncertain: every case gets --min-k trials, then more until its interval is at most --ci-width wide or it has --max-k")
	fs.IntVar(&a.minK, "min-k", 0, "with --adaptive, the trials every case gets first (default: -k)")
	fs.IntVar(&a.maxK, "max-k", 50, "with --adaptive, the most trials a case gets")
	fs.Float64Var(&a.ciWidth, "ci-width", 0.3, "with --adaptive, stop giving a case trials once its Wilson 95% interval is at most this `width`")
}

// policy is the stopping rule the flags ask for, or nil without
// --adaptive; k is -k, the default of --min-k.
func (a *adaptiveFlags) policy(fs *pflag.FlagSet, k int, f *runFlags) (*trials.Policy, error) {
	if !a.on {
		for _, name := range []string{"min-k", "max-k", "ci-width"} {
			if fs.Changed(name) {
				return nil, cli.Usagef("--%s needs --adaptive", name)
			}
		}
		return nil, nil
	}
	if f.shard != "" || f.slurm.tasks > 0 {
		return nil, cli.Usagef("--adaptive decides each case's next trials from its finished ones, so it runs on one machine: drop --shard and --slurm")
	}
	p := trials.Policy{MinK: a.minK, MaxK: a.maxK, CIWidth: a.ciWidth}
	if !fs.Changed("min-k") {
		p.MinK = k
	}
	if err := p.Check(); err != nil {
		return nil, cli.Usagef("--adaptive: %v", err)
	}
	return &p, nil
}
