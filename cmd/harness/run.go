package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/cost"
	"harness/evaluation"
	"harness/export"
	"harness/graders"
	"harness/report"
	"harness/results"
	"harness/rundir"
	"harness/schemas"
	"harness/suite"
	"harness/suiterun"
	"harness/trials"
)

// runCmdFlags are the flags of harness run.
type runCmdFlags struct {
	runsDir, outDir, pricesFile string
	resume                      cli.SwitchOrValue
	only                        []string
	maxCost                     float64
	maxTokens                   int64
	k                           int
	suiteChanged, quiet         bool
	rerunChanged                bool
	image                       imageRunFlags
	flags                       *pflag.FlagSet
}

func (f *runCmdFlags) addFlags(fs *pflag.FlagSet) {
	f.flags = fs
	fs.StringVar(&f.runsDir, "runs", "runs", "make the run directory under `dir`")
	fs.StringVarP(&f.outDir, "output", "o", "", "make the run in `dir` (new) instead of a directory named after the time under --runs")
	fs.Var(&f.resume, "resume", "continue the run in the run directory given as the argument (RUNDIR)")
	fs.Lookup("resume").NoOptDefVal = "true"
	fs.StringArrayVar(&f.only, "agent", nil, "run only the agent `name` of the suite; repeatable")
	fs.StringVar(&f.pricesFile, "prices", "", "price table `file` (added to the suite's prices)")
	fs.Float64Var(&f.maxCost, "max-cost", 0, "stop starting new work once the run has cost `usd`")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, "stop starting new work once the run has used `n` tokens")
	fs.IntVarP(&f.k, "k", "k", 0, "trials per case (overrides the suite's k)")
	fs.BoolVar(&f.suiteChanged, "allow-suite-change", false, "with --resume: continue although the suite file changed")
	cli.DeprecatedAlias(fs, "force", "", "allow-suite-change")
	fs.BoolVar(&f.rerunChanged, "rerun-changed", false, "with --resume: run again the cases whose content changed since the run began (their trials are replaced), instead of refusing to resume")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors on stderr")
	f.image.add(fs)
}

func newRunCmd() *cli.Command {
	var f runCmdFlags
	c := &cli.Command{
		Name:  "run",
		Usage: "run SUITE [--runs DIR | -o DIR] [--agent NAME] [-- AGENT...] | run --resume RUNDIR",
		Short: "run a suite file: every agent x case x k trial, into a run directory",
		Long: `Reads a suite file (YAML or JSON: prompts or agentv tests, agents, graders,
k, prices, workspace, gates and run flags by their long names; see
docs/suite.md and 'harness schemas Suite') and runs every agent on every case
k times, as 'harness trials' would, into a new directory
RUNS/<time>-<name>/:

  run.json          the manifest: suite file and hash, harness version,
                    start and end, k and flags, each agent's status,
                    pass rate and cost
  cases.jsonl       the cases run
  <agent>.jsonl     each agent's trials records (and <agent>.summary.json)
  compare.json      with several agents: the ranking (mean pass rate with
                    intervals, pairwise McNemar with Holm correction)
  report.html       the agents side by side (up to 8; with more, one
                    report-<agent>.html each), and summary.md; first, the
                    comparison gate's verdicts (gates.baseline) and, for
                    a run stopped early, what did not run
  junit.xml         JUnit XML, one testsuite per agent

A run directory stands for its agents' outputs wherever a results file is
taken, RUNDIR:AGENT for one of them (compare, report, replay...).

A suite that names no agents takes the agent command after --. agentv's
eval YAML runs as written: workspace.template, tests[].id/input/assert,
plain-string asserts judged by an LLM against the rubric, type: script
asserts, target.

--resume RUNDIR continues a run where it stopped, with the k, agents and
flags it was started with (run.json); a flag that contradicts them is
refused, but -j, --keep-layers, --max-cost and --max-tokens. The suite
must be unchanged, or --allow-suite-change. -j, -t, --sandbox and --slurm
apply to every agent, over the suite's run flags. --max-cost and
--max-tokens (or the suite's gates) bound the whole run, split between the
agents (a replayed baseline takes no share): an agent that spent its share
starts no new work, and the exit status is 4. A suite's comparison gate
(gates.baseline, max-regression, significance) fails an agent
significantly worse than the baseline: exit 1.

Examples:
  harness run examples/suite/suite.yaml
  harness run suite.yaml --agent fast -- ./my-agent
  harness run --resume runs/20261123T101500Z-nightly`,
		Agent:         true,
		OptionalAgent: true,
		Flags:         pflag.NewFlagSet("run", pflag.ContinueOnError),
	}
	f.addFlags(c.Flags)
	c.Run = func(ctx context.Context, e *cli.Env, args, agentCmd []string) error {
		r, err := f.load(e, args, agentCmd)
		if err != nil {
			return err
		}
		if err := r.check(); err != nil {
			return err
		}
		if err := r.makeDir(); err != nil {
			return err
		}
		r.logf("run %s: %s, %s, k=%d, into %s\n", r.s.Name, cli.Plural(len(r.agents), "agent"), cli.Plural(len(r.cases.List), "case"), r.s.K, r.dir)
		for i := range r.agents {
			if err := r.runAgent(ctx, i); err != nil {
				return err
			}
		}
		return r.finish()
	}
	return c
}

// suiteRun is one run of a suite: its agents and cases, its directory and
// manifest, and what it has spent so far.
type suiteRun struct {
	e         *cli.Env
	f         *runCmdFlags
	s         *suite.Suite
	suiteFile string
	// tasksDir is the task directory the suite was made of ("" for a
	// suite file).
	tasksDir string
	m        *rundir.Manifest // nil until the directory is made, unless resumed
	dir      string
	agents   []suite.Agent
	cases    *suiterun.Cases
	prices   cost.Table
	budget   suiterun.Budget
	spent    *schemas.Cost
	errs     []error
	stopped  bool
	// budgetHit says an agent spent its share of the budget; notRun
	// counts, by agent, the units a budget stop left unrun.
	budgetHit bool
	notRun    map[string]int
	// saidNoGrader: the run said its trials have no grader.
	saidNoGrader bool
}

func (r *suiteRun) logf(format string, a ...any) {
	if !r.f.quiet {
		fmt.Fprintf(r.e.Stderr, format, a...)
	}
}

// load reads the suite (of the run to resume, or args[0]) and what it
// runs: agents, cases, prices and budget.
func (f *runCmdFlags) load(e *cli.Env, args, agentCmd []string) (*suiteRun, error) {
	r := &suiteRun{e: e, f: f}
	if err := r.locate(args); err != nil {
		return nil, err
	}
	tc, _ := newTrialsCmdWith(&runFlags{})
	s, err := suite.Load(r.suiteFile, suiteFlagProblem(tc))
	if err != nil {
		return nil, cli.Input(err)
	}
	r.s = s
	if r.m != nil && r.m.Suite.Hash != s.Hash && !f.suiteChanged {
		return nil, cli.Usagef("%s changed since the run in %s began (sha256 %.12s, now %.12s): start a new run, or continue with the new suite with --allow-suite-change",
			r.suiteFile, r.dir, r.m.Suite.Hash, s.Hash)
	}
	k := f.k
	if r.m != nil {
		// A resumed run is the run that was started: its agent
		// command and k.
		if agentCmd, err = resumeAgentCommand(s, agentCmd, r.m, r.dir); err != nil {
			return nil, err
		}
		if k, err = resumeK(k, r.m, r.dir); err != nil {
			return nil, err
		}
	}
	if r.agents, err = suiteAgents(s, agentCmd, f.only); err != nil {
		return nil, err
	}
	if r.m != nil && len(s.Agents) == 0 && len(r.m.Agents) == 1 {
		// A resumed run's agent keeps the name it was started with: its
		// output file's.
		r.agents[0].Name = r.m.Agents[0].Name
	}
	if g := s.Regression; g != nil && !slices.ContainsFunc(r.agents, func(a suite.Agent) bool { return a.Name == g.Baseline }) {
		// A run of the other agents alone (the main branch's run, which
		// later runs compare with) decides no comparison.
		r.logf("harness run: the comparison gate (%s line %d) is not decided: --agent leaves out its baseline %s\n", s.File, g.Line, g.Baseline)
		s.Regression = nil
	}
	if k > 0 {
		s.K = k
	}
	if s.K == 0 {
		s.K = 1
	}
	if r.prices, err = f.suitePrices(s); err != nil {
		return nil, err
	}
	if r.cases, err = suiterun.ReadCases(s); err != nil {
		return nil, cli.Input(err)
	}
	if f.maxCost < 0 || f.maxTokens < 0 {
		return nil, cli.Usagef("--max-cost and --max-tokens must not be negative")
	}
	if r.budget, err = suiterun.SuiteBudget(s, f.maxCost, f.maxTokens); err != nil {
		return nil, cli.Input(err)
	}
	if err := r.checkCases(); err != nil {
		return nil, err
	}
	return r, nil
}

// checkCases refuses to resume a run whose cases changed since it began
// (its agents' trials of the old and the new version would be mixed, and
// compared), naming them, unless they are to run again.
func (r *suiteRun) checkCases() error {
	if r.m == nil {
		if r.f.rerunChanged {
			return cli.Usagef("--rerun-changed needs --resume")
		}
		return nil
	}
	changed, err := rundir.ChangedCases(r.dir, r.cases.List)
	if err != nil {
		return cli.Input(err)
	}
	if len(changed) == 0 || r.f.rerunChanged {
		return nil
	}
	quoted := make([]string, len(changed))
	for i, id := range changed {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	what := "case "
	if len(changed) > 1 {
		what = "cases "
	}
	return cli.Input(fmt.Errorf("%s changed since the run in %s began (their content hash differs from %s's): resuming would mix two versions of a case in its trials and comparison; start a new run, or run the changed cases again with --rerun-changed",
		what+strings.Join(quoted, ", "), r.dir, rundir.CasesName))
}

// suitePrices is the suite's price table with --prices's added.
func (f *runCmdFlags) suitePrices(s *suite.Suite) (cost.Table, error) {
	prices := maps.Clone(s.Prices)
	if f.pricesFile == "" {
		return prices, nil
	}
	t, err := cost.LoadTable(f.pricesFile)
	if err != nil {
		return nil, cli.Input(err)
	}
	if prices == nil {
		prices = cost.Table{}
	}
	maps.Copy(prices, t)
	return prices, nil
}

// locate finds the suite file: the one of the run directory to resume, a
// task directory's, or the argument.
func (r *suiteRun) locate(args []string) error {
	f := r.f
	switch {
	case f.resume.On:
		return r.locateResumed(args)
	case len(args) == 1 && cli.IsTaskDir(args[0]):
		// A Harbor task directory or dataset: its tasks are the cases,
		// each in its image (docs/tasks.md).
		abs, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		p, err := cli.TaskSuite(abs, f.image.timeoutScale, f.image.cacheDir)
		if err != nil {
			return err
		}
		r.suiteFile, r.tasksDir = p, abs
	case len(args) == 1:
		if err := cli.NotTaskDir(args[0]); err != nil {
			return err
		}
		r.suiteFile = args[0]
	default:
		return cli.Usagef("want one suite file, got %d arguments", len(args))
	}
	return nil
}

// locateResumed reads the manifest of the run to resume, which names its
// suite file.
func (r *suiteRun) locateResumed(args []string) error {
	resumeDir := r.f.resume.Value
	if resumeDir == "" && len(args) == 1 {
		resumeDir, args = args[0], nil
	}
	if len(args) > 0 || resumeDir == "" {
		return cli.Usagef("--resume takes the run directory; the suite is the one it was made from")
	}
	if r.f.outDir != "" {
		return cli.Usagef("--resume continues the run in its directory: drop -o")
	}
	m, err := readManifest(resumeDir)
	if err != nil {
		return cli.Input(err)
	}
	r.m, r.dir, r.suiteFile, r.tasksDir = m, resumeDir, m.Suite.Path, m.Suite.Tasks
	// The settings the run was started with, from its manifest: its
	// image cache and timeout scale first, which its suite is made with.
	if err := resumeFlags(r.f.flags, m, resumeDir); err != nil {
		return err
	}
	if r.tasksDir != "" {
		// The suite of a task directory is made again, as at the start
		// (the cache it went to may have been cleared since).
		if r.suiteFile, err = cli.TaskSuite(r.tasksDir, r.f.image.timeoutScale, r.f.image.cacheDir); err != nil {
			return err
		}
	}
	return nil
}

// check loads the graders and every agent's flags, and checks that every
// agent's command can be found and that a cost budget can be decided,
// before anything is made.
func (r *suiteRun) check() error {
	for i := range r.agents {
		if err := r.checkCommand(&r.agents[i]); err != nil {
			return err
		}
	}
	if err := r.checkPrices(); err != nil {
		return err
	}
	if err := r.cases.MissingUserKeys(r.s, r.e.Getenv); err != nil {
		return cli.Input(err)
	}
	if build := suiterun.Graders(r.s, r.cases); build != nil {
		if _, err := build(graders.Options{Getenv: r.e.Getenv, Dir: r.s.Dir}); err != nil {
			return cli.Input(err)
		}
	}
	for i := range r.agents {
		if _, _, err := r.trialsCmd(&r.agents[i], "", true); err != nil {
			return err
		}
	}
	return nil
}

// checkCommand checks that agent a's program can be run: found on PATH,
// or an executable file. An agent whose command is the image's is left
// for the image to find.
func (r *suiteRun) checkCommand(a *suite.Agent) error {
	if len(a.Command) == 0 || setsFlag(r.s, a, "agent-in-image") || r.f.flags.Changed("agent-in-image") {
		return nil
	}
	prog := a.Command[0]
	if _, err := exec.LookPath(prog); err != nil {
		where := r.s.File
		if a.Line > 0 {
			where = fmt.Sprintf("%s:%d", r.s.File, a.Line)
		}
		why := "not found on PATH"
		if strings.Contains(prog, "/") {
			why = "no executable file there"
		}
		return cli.Usagef("%s: agent %s: command %q: %s; no agent was started", where, a.Name, prog, why)
	}
	return nil
}

// setsFlag reports whether the suite or agent a sets the run flag name.
func setsFlag(s *suite.Suite, a *suite.Agent, name string) bool {
	for _, flags := range [][]suite.Flag{s.Flags, a.Flags} {
		for _, f := range flags {
			if f.Name == name {
				return true
			}
		}
	}
	return false
}

// checkPrices refuses a cost budget that cannot be decided: an agent
// (but a replayed one, which costs nothing) whose tokens no price row
// prices would spend without counting.
func (r *suiteRun) checkPrices() error {
	if r.budget.Cost <= 0 {
		return nil
	}
	for i := range r.agents {
		a := &r.agents[i]
		if suiterun.Replayed(a) || func() bool { _, ok := r.prices.Lookup(a.Model); return ok }() {
			continue
		}
		model := "its tokens name no model (give the agent model: NAME)"
		if a.Model != "" {
			model = fmt.Sprintf("model %q has no row in prices", a.Model)
		}
		return cli.Usagef("%s: the cost budget cannot be decided: agent %s: %s, and no \"*\" row prices any model; add its price under prices: (USD per million tokens) or drop the cost budget; nothing was run",
			r.budgetText(), a.Name, model)
	}
	return nil
}

// makeDir makes the run directory (unless resumed), its manifest and the
// cases file.
func (r *suiteRun) makeDir() error {
	if r.m == nil {
		dir, err := newRunDir(r.f.runsDir, r.f.outDir, r.s.Name)
		if err != nil {
			return cli.Input(err)
		}
		abs, _ := filepath.Abs(r.suiteFile)
		bi := r.e.Build()
		r.dir = dir
		r.m = &rundir.Manifest{
			Suite:   rundir.Suite{Name: r.s.Name, File: r.suiteFile, Path: abs, Hash: r.s.Hash, Tasks: r.tasksDir},
			Harness: rundir.Harness{Version: bi.Version, Revision: bi.Revision, Dirty: bi.Dirty},
			Started: time.Now().UTC().Format(time.RFC3339),
		}
	}
	m := r.m
	m.Status, m.Ended, m.K, m.Cases = "running", "", r.s.K, len(r.cases.List)
	m.Flags = cli.GivenFlags(r.f.flags, runFlagsNotRecorded)
	m.Agents = m.Agents[:0]
	for _, a := range r.agents {
		m.Agents = append(m.Agents, rundir.Agent{Name: a.Name, Command: a.Command, Output: a.Name + ".jsonl", Summary: a.Name + ".summary.json", Status: "pending"})
	}
	if err := rundir.WriteCases(r.dir, r.cases.List); err != nil {
		return err
	}
	return rundir.Write(r.dir, m)
}

func (r *suiteRun) casesPath() string { return filepath.Join(r.dir, rundir.CasesName) }

// runAgent runs the trials of agent i, unless the run stopped or its
// budget is spent, and records how they ended in the manifest.
func (r *suiteRun) runAgent(ctx context.Context, i int) error {
	a, ma := &r.agents[i], &r.m.Agents[i]
	if r.stopped {
		return nil
	}
	if limit := r.budget.Reached(r.spent); limit != suiterun.NoLimit && !suiterun.Replayed(a) {
		// The agents before this one spent the run's budget: it does
		// not start.
		err := cli.WithCode(cli.ExitBudget, fmt.Errorf("budget spent (%s; %s) before it started; continue with --resume and a larger budget", cost.Format(r.spent), budgetLimitText(r.suiteFile, r.budget, limit)))
		ma.Status, ma.Message = statusBudget, err.Error()
		r.errs = append(r.errs, fmt.Errorf("agent %s: %w", a.Name, err))
		r.logf("harness run: agent %s: %v\n", a.Name, err)
		r.budgetHit = true
		return rundir.Write(r.dir, r.m)
	}
	r.logf("\n== agent %s (%d of %d): %s\n", a.Name, i+1, len(r.agents), strings.Join(a.Command, " "))
	res, status, err := r.trials(ctx, a, filepath.Join(r.dir, ma.Output))
	ma.Status, ma.Message = status, ""
	if err != nil {
		ma.Message = err.Error()
	}
	if sum := agentSummary(res, filepath.Join(r.dir, ma.Summary)); sum != nil {
		ma.PassRate, ma.Cost = sum.PassRate, sum.Cost
		if !suiterun.Replayed(a) {
			// A replayed agent serves recorded trials at no model
			// cost: what they cost when recorded is not spent again.
			r.spent = r.spent.Add(sum.Cost)
		}
	}
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("agent %s: %w", a.Name, err))
		if ma.Status != statusInterrupted {
			// An interrupt is told once, by the run's last line.
			r.logf("harness run: agent %s: %v\n", a.Name, err)
		}
	}
	switch ma.Status {
	case statusInterrupted:
		r.stopped = true
	case statusBudget:
		// The next agents still run on their shares of the budget.
		r.budgetHit = true
	}
	if ma.Status == statusBudget || ma.Status == statusInterrupted {
		if res != nil {
			if r.notRun == nil {
				r.notRun = map[string]int{}
			}
			r.notRun[a.Name] = res.NotRun()
		}
	}
	return rundir.Write(r.dir, r.m)
}

// budgetLimitText names the limit of b that was reached as the user set
// it: the suite's key and line ("max-cost 0.5 (suite.yaml line 12)"), or
// the flag ("--max-tokens 30").
func budgetLimitText(file string, b suiterun.Budget, l suiterun.Limit) string {
	if l == suiterun.CostLimit {
		if b.CostLine > 0 {
			return fmt.Sprintf("max-cost %g (%s line %d)", b.Cost, file, b.CostLine)
		}
		return fmt.Sprintf("--max-cost %g", b.Cost)
	}
	if b.TokensLine > 0 {
		return fmt.Sprintf("max-tokens %d (%s line %d)", b.Tokens, file, b.TokensLine)
	}
	return fmt.Sprintf("--max-tokens %d", b.Tokens)
}

// budgetText names the run's budget as the user set it: each limit it
// sets, by budgetLimitText ("" when there is none).
func (r *suiteRun) budgetText() string {
	var parts []string
	if r.budget.Cost > 0 {
		parts = append(parts, budgetLimitText(r.suiteFile, r.budget, suiterun.CostLimit))
	}
	if r.budget.Tokens > 0 {
		parts = append(parts, budgetLimitText(r.suiteFile, r.budget, suiterun.TokensLimit))
	}
	return strings.Join(parts, " and ")
}

// sharing is the number of agents, a and those after it, that share what
// is left of the budget: a replayed agent costs nothing and takes no share.
func (r *suiteRun) sharing(a *suite.Agent) int {
	n, after := 0, false
	for i := range r.agents {
		b := &r.agents[i]
		after = after || b.Name == a.Name
		if after && !suiterun.Replayed(b) {
			n++
		}
	}
	return max(n, 1)
}

// budgetName names the budget agent a runs under, in words the user
// typed: its share of the run's budget is a number nobody typed.
func (r *suiteRun) budgetName(a *suite.Agent) string {
	run := r.budgetText()
	if run == "" || suiterun.Replayed(a) {
		return ""
	}
	if n := r.sharing(a); n > 1 {
		return fmt.Sprintf("its share of the run's budget, %s, split between it and the %s after it", run, cli.Plural(n-1, "agent"))
	}
	return "what the agents before it left of the run's budget, " + run
}

// trials runs the trials of one agent into out, with the suite's graders,
// prices and run flags and what is left of the budget.
func (r *suiteRun) trials(ctx context.Context, a *suite.Agent, out string) (*evaluation.Result, string, error) {
	tc, tf, err := r.trialsCmd(a, out, r.f.quiet)
	if err != nil {
		return nil, statusError, err
	}
	return tf.execute(ctx, r.e, tc, []string{r.casesPath()}, a.Command)
}

// finish compares the agents and writes the reports (unless the run
// stopped), ends the manifest and says how the run went.
func (r *suiteRun) finish() error {
	m := r.m
	m.Cost = r.spent
	m.Stopped = r.stoppedText()
	m.Compare, m.Report, m.JUnit = r.reports()
	m.Ended = time.Now().UTC().Format(time.RFC3339)
	m.Status = "done"
	switch {
	case r.stopped || r.budgetHit:
		m.Status = "stopped"
	case slices.ContainsFunc(m.Agents, func(a rundir.Agent) bool { return a.Status == statusError }):
		m.Status = "failed"
	}
	if err := rundir.Write(r.dir, m); err != nil {
		return err
	}
	r.logf("\nrun %s: %s in %s\n", m.Status, m.OutcomeLine(), r.dir)
	if m.Stopped != "" {
		r.logf("stopped early: %s\n", m.Stopped)
	}
	if resume := "harness run --resume " + r.dir; (r.stopped || r.budgetHit) && !strings.HasSuffix(m.Stopped, resume) {
		// Said once: the stopped text ends with it when something did
		// not run.
		r.logf("continue with: %s\n", resume)
	}
	// The agents' errors were told as they happened, their stderr with
	// them; the run ends with one line for each.
	return cli.WorstExit(r.errs, !r.f.quiet)
}

// sayNoGrader says, once for the run, that its trials are not scored.
func (r *suiteRun) sayNoGrader() {
	if !r.saidNoGrader {
		r.saidNoGrader = true
		r.logf("harness run: no grader (the suite's graders, its cases' asserts or -g in its flags): trials are recorded but nothing is scored\n")
	}
}

// stoppedText says what stopped the run early (the budget, an interrupt)
// and what did not run, for the reports; "" when it ran to its end.
func (r *suiteRun) stoppedText() string {
	if !r.stopped && !r.budgetHit {
		return ""
	}
	why := "it was interrupted"
	if !r.stopped {
		why = "the budget (" + r.budgetText() + ") was spent"
	}
	perAgent := r.s.K * len(r.cases.List)
	var notRun []string
	for _, a := range r.m.Agents {
		switch n := r.notRun[a.Name]; {
		case a.Status == "pending" || (a.Status == statusBudget && a.PassRate == nil && a.Cost == nil && n == 0):
			notRun = append(notRun, fmt.Sprintf("%s (all %s)", a.Name, cli.Plural(perAgent, "trial")))
		case n > 0:
			notRun = append(notRun, fmt.Sprintf("%s (%s of %d)", a.Name, cli.Plural(n, "trial"), perAgent))
		}
	}
	if len(notRun) == 0 {
		return why + "; every agent's trials ran"
	}
	text := why + "; not run: " + strings.Join(notRun, ", ") + "."
	if len(r.m.Agents) > 1 {
		text += " The comparison covers the cases both agents ran."
	}
	return text + " Continue with harness run --resume " + r.dir
}

// reports writes compare.json (several agents), the HTML report and
// markdown of the run's outputs and their JUnit XML, and returns the names
// of the comparison, the report and the JUnit file ("" when not made). Problems are told, never fatal: the records are safe.
func (r *suiteRun) reports() (compareName, reportName, junitName string) {
	opt := report.SuiteOptions{
		Title:   r.s.Name,
		Stopped: r.m.Stopped,
		Create:  func(path string) (*results.File, error) { return cli.ReviewOutput(r.e, path, true) },
		Warn:    func(what string, err error) { r.logf("harness run: %s: %v\n", what, err) },
	}
	if !r.f.quiet {
		opt.Text = r.e.Stderr
	}
	if g := r.s.Regression; g != nil {
		opt.Regression = &trials.RegressionGate{Baseline: g.Baseline, MaxDrop: g.MaxDrop, Alpha: g.Alpha}
	}
	rep := report.WriteSuite(r.dir, r.m, opt)
	r.m.Gates = rep.Gates
	for _, v := range rep.Gates {
		if !v.Failed {
			continue
		}
		err := cli.WithCode(cli.ExitGateFailed, fmt.Errorf("comparison gate (%s line %d) failed: %s", r.suiteFile, r.s.Regression.Line, v.Reason))
		r.errs = append(r.errs, fmt.Errorf("agent %s: %w", v.Run, err))
		for i := range r.m.Agents {
			if ma := &r.m.Agents[i]; ma.Name == v.Run && (ma.Status == statusOK || ma.Status == statusInfraErrors) {
				ma.Status, ma.Message = statusGateFailed, err.Error()
			}
		}
	}
	return rep.Compare, rep.Report, rep.JUnit
}

// suiteAgents picks the agents to run: the suite's (its target, or those
// --agent names), or the command after -- when the suite names none.
func suiteAgents(s *suite.Suite, cmd, only []string) ([]suite.Agent, error) {
	if len(s.Agents) == 0 {
		if len(cmd) == 0 {
			return nil, cli.Usagef("%s names no agents: give the agent command after --, as in: harness run %s -- ./my-agent", s.File, s.File)
		}
		name := s.Target
		if name == "" {
			name = suite.CommandName(cmd)
		}
		return []suite.Agent{{Name: export.FileSafe(name), Command: cmd}}, nil
	}
	if len(cmd) > 0 {
		return nil, cli.Usagef("%s names its agents (%s): drop the command after --, or pick agents with --agent", s.File, suite.AgentNames(s.Agents))
	}
	pick := only
	if len(pick) == 0 && s.Target != "" {
		pick = []string{s.Target}
	}
	if len(pick) == 0 {
		return s.Agents, nil
	}
	var out []suite.Agent
	for _, name := range pick {
		i := slices.IndexFunc(s.Agents, func(a suite.Agent) bool { return a.Name == name })
		if i < 0 {
			return nil, cli.Usagef("%s has no agent %q (agents: %s)", s.File, name, suite.AgentNames(s.Agents))
		}
		out = append(out, s.Agents[i])
	}
	return out, nil
}

// agentSummary is the summary of an agent's run: the one it returned, or
// for a run on Slurm, which merges its shards into a file, that file.
func agentSummary(res *evaluation.Result, path string) *schemas.TrialsSummary {
	if res != nil {
		return res.Summary
	}
	sum, err := readSummary(path)
	if err != nil {
		return nil
	}
	return sum
}

// newRunDir makes the run directory: dir, which must not exist, or
// RUNS/<time>-<name>, a fresh directory.
func newRunDir(runs, dir, name string) (string, error) {
	if dir == "" {
		made, err := rundir.New(runs, export.FileSafe(name), time.Now())
		if err != nil {
			return "", fmt.Errorf("--runs: %w", err)
		}
		return made, nil
	}
	err := rundir.Create(dir)
	switch {
	case errors.Is(err, os.ErrExist):
		return "", fmt.Errorf("-o %s: exists; continue a run in it with --resume %s", dir, dir)
	case err != nil:
		return "", fmt.Errorf("-o: %w", err)
	}
	return dir, nil
}

// readManifest reads the manifest of the run directory given to --resume.
func readManifest(dir string) (*rundir.Manifest, error) {
	m, err := rundir.OpenToResume(dir)
	if errors.Is(err, rundir.ErrNotRunDir) {
		return nil, fmt.Errorf("--resume %s: %w", dir, err)
	}
	return m, err
}

func readSummary(path string) (*schemas.TrialsSummary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s schemas.TrialsSummary
	return &s, json.Unmarshal(b, &s)
}
