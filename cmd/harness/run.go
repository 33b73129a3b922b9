package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/cost"
	"harness/evaluation"
	"harness/graders"
	"harness/internal/buildinfo"
	"harness/internal/suggest"
	"harness/report"
	"harness/results"
	"harness/rundir"
	"harness/schemas"
	"harness/suite"
	"harness/trials"
)

// runFlagsSetByRun are the run flags harness run decides itself.
var runFlagsSetByRun = []string{"output", "resume", "force", "summary", "shard", "junit", "markdown", "k"}

// runCmdFlags are the flags of harness run.
type runCmdFlags struct {
	runsDir, outDir, pricesFile string
	resume                      resumeValue
	only                        []string
	maxCost                     float64
	maxTokens                   int64
	k                           int
	suiteChanged, quiet         bool
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
	deprecatedAlias(fs, "force", "", "allow-suite-change")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors on stderr")
	f.image.add(fs)
}

func newRunCmd() *command {
	var f runCmdFlags
	c := &command{
		name:  "run",
		usage: "run SUITE [--runs DIR | -o DIR] [--agent NAME] [-- AGENT...] | run --resume RUNDIR",
		short: "run a suite file: every agent x case x k trial, into a run directory",
		long: `Reads a suite file (YAML or JSON: prompts or agentv tests, agents, graders,
k, prices, workspace, gates and run flags by their long names; see
docs/suite.md and 'harness schemas Suite') and runs every agent on every case
k times, as 'harness trials' would, into a new directory
RUNS/<time>-<name>/:

  run.json          the manifest: suite file and hash, harness version,
                    start and end, each agent's status, pass rate and cost
  cases.jsonl       the cases run
  <agent>.jsonl     each agent's trials records (and <agent>.summary.json)
  compare.json      with several agents: the ranking (mean pass rate with
                    intervals, pairwise McNemar with Holm correction)
  report.html       the agents side by side (up to 8; with more, one
                    report-<agent>.html each), and summary.md

A suite that names no agents takes the agent command after --. agentv's
eval YAML runs as written: workspace.template, tests[].id/input/assert,
plain-string asserts judged by an LLM against the rubric, type: script
asserts, target.

--resume RUNDIR continues a run where it stopped (the suite must be
unchanged, or --allow-suite-change). -j, -t and --sandbox apply to every
agent, over the suite's run flags. --max-cost and --max-tokens (or the suite's gates) bound the
whole run: once spent, no new work starts, and the exit status is 4.

Examples:
  harness run examples/suite/suite.yaml
  harness run suite.yaml --agent fast -- ./my-agent
  harness run --resume runs/20261123T101500Z-nightly`,
		agent:         true,
		optionalAgent: true,
		flags:         pflag.NewFlagSet("run", pflag.ContinueOnError),
	}
	f.addFlags(c.flags)
	c.run = func(ctx context.Context, e *env, args, agentCmd []string) error {
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
		r.logf("run %s: %s, %s, k=%d, into %s\n", r.s.Name, plural(len(r.agents), "agent"), plural(len(r.cases), "case"), r.s.K, r.dir)
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
	e           *env
	f           *runCmdFlags
	s           *suite.Suite
	suiteFile   string
	m           *rundir.Manifest // nil until the directory is made, unless resumed
	dir         string
	agents      []suite.Agent
	cases       []schemas.PromptCase
	asserts     map[string]any
	assertLines map[string]int
	prices      cost.Table
	budget      budget
	spent       *schemas.Cost
	errs        []error
	stopped     bool
}

func (r *suiteRun) logf(format string, a ...any) {
	if !r.f.quiet {
		fmt.Fprintf(r.e.stderr, format, a...)
	}
}

// load reads the suite (of the run to resume, or args[0]) and what it
// runs: agents, cases, prices and budget.
func (f *runCmdFlags) load(e *env, args, agentCmd []string) (*suiteRun, error) {
	r := &suiteRun{e: e, f: f}
	if err := r.locate(args); err != nil {
		return nil, err
	}
	tc, _ := newTrialsCmdWith(&runFlags{})
	s, err := suite.Load(r.suiteFile, suiteFlagProblem(tc))
	if err != nil {
		return nil, inputError(err)
	}
	r.s = s
	if r.m != nil && r.m.Suite.Hash != s.Hash && !f.suiteChanged {
		return nil, usageErrorf("%s changed since the run in %s began (sha256 %.12s, now %.12s): start a new run, or continue with the new suite with --allow-suite-change",
			r.suiteFile, r.dir, r.m.Suite.Hash, s.Hash)
	}
	if r.agents, err = suiteAgents(s, agentCmd, f.only); err != nil {
		return nil, err
	}
	if f.k > 0 {
		s.K = f.k
	}
	if s.K == 0 {
		s.K = 1
	}
	r.prices = maps.Clone(s.Prices)
	if f.pricesFile != "" {
		t, err := cost.LoadTable(f.pricesFile)
		if err != nil {
			return nil, inputError(err)
		}
		if r.prices == nil {
			r.prices = cost.Table{}
		}
		maps.Copy(r.prices, t)
	}
	if r.cases, r.asserts, r.assertLines, err = suiteCases(s); err != nil {
		return nil, inputError(err)
	}
	if r.budget, err = suiteBudget(s, f.maxCost, f.maxTokens); err != nil {
		return nil, err
	}
	return r, nil
}

// locate finds the suite file: the one of the run directory to resume, a
// task directory's, or the argument.
func (r *suiteRun) locate(args []string) error {
	f := r.f
	switch {
	case f.resume.on:
		resumeDir := f.resume.dir
		if resumeDir == "" && len(args) == 1 {
			resumeDir, args = args[0], nil
		}
		if len(args) > 0 || resumeDir == "" {
			return usageErrorf("--resume takes the run directory; the suite is the one it was made from")
		}
		if f.outDir != "" {
			return usageErrorf("--resume continues the run in its directory: drop -o")
		}
		m, err := readManifest(resumeDir)
		if err != nil {
			return inputError(err)
		}
		r.m, r.dir, r.suiteFile = m, resumeDir, m.Suite.Path
	case len(args) == 1 && isTaskDir(args[0]):
		// A Harbor task directory or dataset: its tasks are the cases,
		// each in its image (docs/tasks.md).
		p, err := taskSuite(r.e, args[0], f.image.timeoutScale, f.image.cacheDir)
		if err != nil {
			return err
		}
		r.suiteFile = p
	case len(args) == 1:
		if err := notTaskDir(args[0]); err != nil {
			return err
		}
		r.suiteFile = args[0]
	default:
		return usageErrorf("want one suite file, got %d arguments", len(args))
	}
	return nil
}

// check loads the graders and every agent's flags before anything is
// made.
func (r *suiteRun) check() error {
	if build := suiteGraders(r.s, r.asserts, r.assertLines); build != nil {
		if _, err := build(graders.Options{Getenv: r.e.getenv, Dir: r.s.Dir}); err != nil {
			return inputError(err)
		}
	}
	for i := range r.agents {
		argv := trialsArgs(r.s, &r.agents[i], "", r.budget, nil, true)
		tc, _ := newTrialsCmdWith(&runFlags{})
		if err := applySuiteFlags(tc, r.s, &r.agents[i], argv); err != nil {
			return err
		}
		if err := r.f.image.passOn(tc.flags, r.f.flags); err != nil {
			return err
		}
	}
	return nil
}

// makeDir makes the run directory (unless resumed), its manifest and the
// cases file.
func (r *suiteRun) makeDir() error {
	if r.m == nil {
		dir, err := newRunDir(r.f.runsDir, r.f.outDir, r.s.Name)
		if err != nil {
			return inputError(err)
		}
		abs, _ := filepath.Abs(r.suiteFile)
		bi := buildinfo.Read(version)
		r.dir = dir
		r.m = &rundir.Manifest{
			Suite:   rundir.Suite{Name: r.s.Name, File: r.suiteFile, Path: abs, Hash: r.s.Hash},
			Harness: rundir.Harness{Version: bi.Version, Revision: bi.Revision, Dirty: bi.Dirty},
			Started: time.Now().UTC().Format(time.RFC3339),
		}
	}
	m := r.m
	m.Status, m.Ended, m.K, m.Cases = "running", "", r.s.K, len(r.cases)
	m.Agents = m.Agents[:0]
	for _, a := range r.agents {
		m.Agents = append(m.Agents, rundir.Agent{Name: a.Name, Command: a.Command, Output: a.Name + ".jsonl", Summary: a.Name + ".summary.json", Status: "pending"})
	}
	if err := writeCases(r.casesPath(), r.cases); err != nil {
		return err
	}
	return rundir.Write(r.dir, m)
}

func (r *suiteRun) casesPath() string { return filepath.Join(r.dir, "cases.jsonl") }

// runAgent runs the trials of agent i, unless the run stopped or its
// budget is spent, and records how they ended in the manifest.
func (r *suiteRun) runAgent(ctx context.Context, i int) error {
	a, ma := &r.agents[i], &r.m.Agents[i]
	if r.stopped {
		return nil
	}
	if limit := r.budget.spentBy(r.spent); limit != "" {
		// The agents before this one spent the run's budget: it does
		// not start.
		err := withCode(exitBudget, fmt.Errorf("budget spent (%s; %s) before it started; continue with --resume and a larger budget", cost.Format(r.spent), limit))
		ma.Status, ma.Message = statusBudget, err.Error()
		r.errs = append(r.errs, fmt.Errorf("agent %s: %w", a.Name, err))
		r.logf("harness run: agent %s: %v\n", a.Name, err)
		r.stopped = true
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
		r.spent = r.spent.Add(sum.Cost)
	}
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("agent %s: %w", a.Name, err))
		r.logf("harness run: agent %s: %v\n", a.Name, err)
	}
	if ma.Status == statusInterrupted || ma.Status == statusBudget {
		r.stopped = true
	}
	return rundir.Write(r.dir, r.m)
}

// trials runs the trials of one agent into out, with the suite's graders,
// prices and run flags and what is left of the budget.
func (r *suiteRun) trials(ctx context.Context, a *suite.Agent, out string) (*evaluation.Result, string, error) {
	f := &runFlags{moreGraders: suiteGraders(r.s, r.asserts, r.assertLines), prices: r.prices}
	tc, tf := newTrialsCmdWith(f)
	argv := trialsArgs(r.s, a, out, r.budget, r.spent, r.f.quiet)
	if onSlurm(r.s, a) {
		// The tasks get the suite's graders and prices as files.
		more, err := writeForTasks(r.dir, r.s, r.asserts, r.prices)
		if err != nil {
			return nil, statusError, err
		}
		argv = append(argv, more...)
		f.moreGraders, f.prices = nil, nil
	}
	if err := applySuiteFlags(tc, r.s, a, argv); err != nil {
		return nil, statusError, err
	}
	if err := r.f.image.passOn(tc.flags, r.f.flags); err != nil {
		return nil, statusError, err
	}
	return tf.execute(ctx, r.e, tc, []string{r.casesPath()}, a.Command)
}

// finish compares the agents and writes the reports (unless the run
// stopped), ends the manifest and says how the run went.
func (r *suiteRun) finish() error {
	m := r.m
	m.Cost = r.spent
	if !r.stopped {
		m.Compare, m.Report = compareAndReport(r.e, r.dir, r.s.Name, m, r.f.quiet)
	}
	m.Ended = time.Now().UTC().Format(time.RFC3339)
	m.Status = "done"
	switch {
	case r.stopped:
		m.Status = "stopped"
	case slices.ContainsFunc(m.Agents, func(a rundir.Agent) bool { return a.Status == statusError }):
		m.Status = "failed"
	}
	if err := rundir.Write(r.dir, m); err != nil {
		return err
	}
	r.logf("\nrun %s: %s in %s\n", m.Status, runLine(m), r.dir)
	if r.stopped {
		r.logf("continue with: harness run --resume %s\n", r.dir)
	}
	// The agents' errors were told as they happened, their stderr with
	// them; the run ends with one line for each.
	return runExit(r.errs, !r.f.quiet)
}

// suiteAgents picks the agents to run: the suite's (its target, or those
// --agent names), or the command after -- when the suite names none.
func suiteAgents(s *suite.Suite, cmd, only []string) ([]suite.Agent, error) {
	if len(s.Agents) == 0 {
		if len(cmd) == 0 {
			return nil, usageErrorf("%s names no agents: give the agent command after --, as in: harness run %s -- ./my-agent", s.File, s.File)
		}
		name := s.Target
		if name == "" {
			name = "agent"
		}
		return []suite.Agent{{Name: fileSafe(name), Command: cmd}}, nil
	}
	if len(cmd) > 0 {
		return nil, usageErrorf("%s names its agents (%s): drop the command after --, or pick agents with --agent", s.File, agentNames(s.Agents))
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
			return nil, usageErrorf("%s has no agent %q (agents: %s)", s.File, name, agentNames(s.Agents))
		}
		out = append(out, s.Agents[i])
	}
	return out, nil
}

func agentNames(as []suite.Agent) string {
	var names []string
	for _, a := range as {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// suiteCases gathers the cases: the prompts file's, then the inline ones;
// asserts are the suite's per-case asserts and those of prompts lines
// carrying an "assert" key, whose line numbers assertLines holds by case id.
func suiteCases(s *suite.Suite) (cases []schemas.PromptCase, asserts map[string]any, assertLines map[string]int, err error) {
	asserts = maps.Clone(s.Asserts)
	assertLines = map[string]int{}
	if s.PromptsFile != "" {
		r, err := results.Open(s.PromptsFile, nil)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: prompts: %w", s.File, err)
		}
		defer r.Close()
		err = schemas.ScanPrompts(s.PromptsFile, r, func(line int, c schemas.PromptCase) error {
			if raw, ok := c.Extra["assert"]; ok {
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return &schemas.InputError{File: s.PromptsFile, Line: line, Field: "assert", Msg: err.Error()}
				}
				asserts[c.ID] = v
				assertLines[c.ID] = line
				delete(c.Extra, "assert")
			}
			cases = append(cases, c)
			return nil
		})
		if err != nil {
			return nil, nil, nil, err
		}
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.ID] = true
	}
	for _, c := range s.Cases {
		if seen[c.ID] {
			field := s.CaseFields[c.ID]
			return nil, nil, nil, &schemas.InputError{File: s.File, Line: s.Line(field), Field: field + ".id", Msg: fmt.Sprintf("case %q is in %s too", c.ID, s.PromptsFile)}
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, nil, nil, fmt.Errorf("%s: no cases to run", s.File)
	}
	return cases, asserts, assertLines, nil
}

// suiteGraderConfig is the grader config of a suite: a per-case config
// holding, for each case, the suite-wide graders and the case's asserts
// (nil when the suite grades nothing).
func suiteGraderConfig(s *suite.Suite, asserts map[string]any) map[string]any {
	if len(s.Graders) == 0 && len(asserts) == 0 {
		return nil
	}
	var common []any
	for _, g := range s.Graders {
		if p, ok := g.(string); ok {
			common = append(common, map[string]any{"type": "file", "path": p})
		} else {
			common = append(common, g)
		}
	}
	cases := map[string]any{}
	for id, a := range asserts {
		list, ok := a.([]any)
		if !ok {
			list = []any{a}
		}
		cases[id] = append(slices.Clone(common), list...)
	}
	cfg := map[string]any{"type": "cases", "cases": cases, "dir": s.Dir}
	if len(common) > 0 {
		cfg["default"] = common
	}
	if s.Judge != nil {
		cfg["judge"] = s.Judge
	}
	return cfg
}

// suiteGraders builds the suite's graders with the options of each trials
// run (nil when the suite grades nothing).
func suiteGraders(s *suite.Suite, asserts map[string]any, assertLines map[string]int) func(graders.Options) ([]graders.Grader, error) {
	cfg := suiteGraderConfig(s, asserts)
	if cfg == nil {
		return nil
	}
	return func(opts graders.Options) ([]graders.Grader, error) {
		g, err := graders.FromConfig(cfg, s.File, s.Dir, opts)
		if err != nil {
			return nil, suiteGraderError(s, err, asserts, assertLines)
		}
		return []graders.Grader{g}, nil
	}
}

// onSlurm reports whether an agent of the suite runs on Slurm.
func onSlurm(s *suite.Suite, a *suite.Agent) bool {
	for _, f := range append(slices.Clone(s.Flags), a.Flags...) {
		if f.Name == "slurm" {
			return true
		}
	}
	return false
}

// writeForTasks writes the suite's graders and prices as files in the run
// directory, for Slurm tasks (which get them as -g and --prices), and
// returns the flags that name them.
func writeForTasks(dir string, s *suite.Suite, asserts map[string]any, prices cost.Table) ([]string, error) {
	var flags []string
	write := func(name string, v any) (string, error) {
		p, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		return p, results.ReplaceFile(p, 0o644, func(w io.Writer) error { return writePrettyJSON(w, v) })
	}
	if cfg := suiteGraderConfig(s, asserts); cfg != nil {
		p, err := write("graders.json", cfg)
		if err != nil {
			return nil, err
		}
		flags = append(flags, "--grader="+p)
	}
	if len(prices) > 0 {
		p, err := write("prices.json", prices)
		if err != nil {
			return nil, err
		}
		flags = append(flags, "--prices="+p)
	}
	return flags, nil
}

// suiteGraderError says where a grader of the suite is wrong: the file
// (the suite, or the prompts file for an assert on a prompts line), the
// line and the field. The config suiteGraderConfig builds gives each case
// the suite-wide graders first, then its own asserts; the error's field is
// mapped back to where the user wrote it.
func suiteGraderError(s *suite.Suite, err error, asserts map[string]any, assertLines map[string]int) error {
	var ce *graders.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	field := ce.Field
	if rest, ok := strings.CutPrefix(field, "default"); ok {
		field = "graders" + rest
	}
	if rest, ok := strings.CutPrefix(field, "cases."); ok {
		id, sub, hasIndex := strings.Cut(rest, "[")
		assertField, line := "", 0
		switch caseField, inline := s.CaseFields[id]; {
		case inline:
			assertField = caseField + ".assert"
		case assertLines[id] > 0:
			assertField, line = "assert", assertLines[id]
		}
		if assertField != "" {
			field = assertField
			if hasIndex {
				field = assertIndexField(len(s.Graders), asserts[id], assertField, sub)
			}
			if line > 0 {
				return &schemas.InputError{File: s.PromptsFile, Line: line, Field: field, Msg: ce.Msg}
			}
		}
	}
	return &schemas.InputError{File: s.File, Line: s.Line(field), Field: field, Msg: ce.Msg}
}

// assertIndexField maps "J]REST", the index J of a case's grader list in
// the suite's config and what follows, to the field the user wrote: one
// of the suite-wide graders (graders[J]REST), or the case's assert
// (assertField[J-n]REST, n being the number of suite-wide graders; without
// the index when the assert is a single grader, not a list).
func assertIndexField(n int, assert any, assertField, sub string) string {
	idx, rest, _ := strings.Cut(sub, "]")
	j, err := strconv.Atoi(idx)
	if err != nil {
		return assertField + "[" + sub
	}
	if j < n {
		return fmt.Sprintf("graders[%d]%s", j, rest)
	}
	if _, isList := assert.([]any); !isList {
		return assertField + rest
	}
	return fmt.Sprintf("%s[%d]%s", assertField, j-n, rest)
}

// budget is the run's spending limit.
type budget struct {
	cost   float64
	tokens int64
}

// spentBy names the limit spent reaches ("--max-tokens 30"), or "".
func (b budget) spentBy(spent *schemas.Cost) string {
	switch {
	case b.cost > 0 && spent != nil && spent.USD != nil && *spent.USD >= b.cost:
		return fmt.Sprintf("--max-cost %g", b.cost)
	case b.tokens > 0 && spent.Tokens() >= b.tokens:
		return fmt.Sprintf("--max-tokens %d", b.tokens)
	}
	return ""
}

// suiteBudget takes the budget from the flags, else from the suite.
func suiteBudget(s *suite.Suite, maxCost float64, maxTokens int64) (budget, error) {
	b := budget{cost: maxCost, tokens: maxTokens}
	for _, f := range s.Flags {
		var err error
		switch {
		case f.Name == "max-cost" && b.cost == 0:
			b.cost, err = strconv.ParseFloat(f.Values[len(f.Values)-1], 64)
		case f.Name == "max-tokens" && b.tokens == 0:
			b.tokens, err = strconv.ParseInt(f.Values[len(f.Values)-1], 10, 64)
		}
		if err != nil || b.cost < 0 || b.tokens < 0 {
			return b, inputError(&schemas.InputError{File: s.File, Line: f.Line, Field: f.Name, Msg: "must be a number ≥ 0"})
		}
	}
	if maxCost < 0 || maxTokens < 0 {
		return b, usageErrorf("--max-cost and --max-tokens must not be negative")
	}
	return b, nil
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
	durationVarP(fs, new(time.Duration), "timeout", "t", 60*time.Second, "per-turn `timeout` of every agent (over the suite's timeout); a case's timeout field overrides it")
	fs.String("sandbox", "none", "run every agent in a `sandbox`: none or bwrap (over the suite's and the agents' sandbox)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "where task images are unpacked, once each, and a task directory's suite is written (default $XDG_CACHE_HOME/harness/images)")
	fs.Bool("keep-layers", false, "leave each trial's image layer (its changes) on disk")
	fs.Bool("agent-in-image", false, "run the agent command as the image has it instead of binding the host's program in")
	fs.Bool("image-no-network", false, "give the agents in images loopback only")
	fs.Float64Var(&f.timeoutScale, "task-timeout-scale", 1, "multiply each task's agent and verifier timeouts by `factor` (a slower machine, a slower agent)")
	fs.Bool("force-build", false, "build each task's environment/Dockerfile even when its task.toml names a prebuilt docker_image")
}

// passOn sets the image flags given to harness run on a trials run's
// flags, over what the suite set.
func (f *imageRunFlags) passOn(trials, run *pflag.FlagSet) error {
	if f.timeoutScale <= 0 {
		return usageErrorf("--task-timeout-scale must be positive")
	}
	for _, name := range []string{"concurrency", "timeout", "sandbox", "cache-dir", "keep-layers", "agent-in-image", "image-no-network", "task-timeout-scale", "force-build"} {
		fl := run.Lookup(name)
		if fl == nil || !fl.Changed {
			continue
		}
		if err := trials.Set(name, fl.Value.String()); err != nil {
			return usageErrorf("--%s: %v", name, err)
		}
	}
	return nil
}

// trialsArgs are the flags harness run gives each agent's trials run.
func trialsArgs(s *suite.Suite, a *suite.Agent, out string, b budget, spent *schemas.Cost, quiet bool) []string {
	argv := []string{"-k", strconv.Itoa(s.K), "-o", out}
	if _, err := os.Stat(out); err == nil {
		argv = append(argv, "--resume") // the earlier run of a resumed one
	}
	if w := s.Workspace; w.Template != "" {
		argv = append(argv, "--workspace", w.Template)
		if w.Setup != "" {
			argv = append(argv, "--workspace-setup", w.Setup)
		}
		if w.Prepare != "" {
			argv = append(argv, "--workspace-prepare", w.Prepare)
		}
	}
	if a.Sandbox != "" {
		argv = append(argv, "--sandbox", a.Sandbox)
	}
	// The sandbox the agent ends up in: its sandbox key, then the suite's
	// run flags, then the agent's own flags, each overriding the one
	// before (the order applySuiteFlags sets them in).
	backend := a.Sandbox
	for _, flags := range [][]suite.Flag{s.Flags, a.Flags} {
		for _, f := range flags {
			if f.Name == "sandbox" && len(f.Values) > 0 {
				backend = f.Values[len(f.Values)-1]
			}
		}
	}
	if backend == "bwrap" {
		// The run directory and the suite file stay out of the agent's
		// reach, as the run's own outputs do.
		if out != "" {
			argv = append(argv, "--sandbox-protect", filepath.Dir(out))
		}
		if s.File != "" {
			argv = append(argv, "--sandbox-protect", s.File)
		}
		// So does the prompts file the suite names (the trials run reads
		// the run directory's copy of the cases, not this file).
		if s.PromptsFile != "" {
			argv = append(argv, "--sandbox-protect", s.PromptsFile)
		}
	}
	if a.Adapter != "" {
		argv = append(argv, "--adapter", a.Adapter)
	}
	if a.Model != "" {
		argv = append(argv, "--agent-model", a.Model)
	}
	for _, kv := range a.Env {
		argv = append(argv, "--env", kv)
	}
	if b.cost > 0 {
		left := b.cost
		if spent != nil && spent.USD != nil {
			left -= *spent.USD
		}
		if left <= 0 {
			left = 1e-12
		}
		argv = append(argv, "--max-cost", strconv.FormatFloat(left, 'g', -1, 64))
	}
	if b.tokens > 0 {
		argv = append(argv, "--max-tokens", strconv.FormatInt(max(b.tokens-spent.Tokens(), 1), 10))
	}
	if quiet {
		argv = append(argv, "-q")
	}
	return argv
}

// applySuiteFlags sets the trials flags: harness run's own, then the
// suite's run flags, then the agent's; an error names the suite line.
func applySuiteFlags(tc *command, s *suite.Suite, a *suite.Agent, argv []string) error {
	if err := tc.flags.Parse(argv); err != nil {
		return usageErrorf("%v", err)
	}
	problem := suiteFlagProblem(tc)
	set := func(f suite.Flag, where string) error {
		if msg := problem(f); msg != "" {
			return inputError(&schemas.InputError{File: s.File, Line: f.Line, Field: where + f.Name, Msg: msg})
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
	return nil
}

// suiteFlagProblem sets the run flags a suite sets on tc, the trials
// command, and says what is wrong with one ("" when nothing is): a key that
// is no suite key or run flag (with the one probably meant), a flag harness
// run decides, a list for a flag of one value, a value the flag refuses.
func suiteFlagProblem(tc *command) suite.FlagCheck {
	return func(f suite.Flag) string {
		if f.Name == "max-cost" || f.Name == "max-tokens" {
			return "" // the run's budget, handed out by harness run
		}
		if slices.Contains(runFlagsSetByRun, f.Name) {
			return "harness run sets this itself"
		}
		fl := tc.flags.Lookup(f.Name)
		if fl == nil {
			msg := "not a suite key or a run flag (keys: " + strings.Join(suite.RootKeys, ", ") + ")"
			var names []string
			tc.flags.VisitAll(func(fl *pflag.Flag) { names = append(names, fl.Name) })
			if best := suggest.Nearest(f.Name, append(slices.Clone(suite.RootKeys), names...)); best != "" {
				msg += "; did you mean " + best + "?"
			}
			return msg
		}
		if len(f.Values) > 1 && !strings.Contains(fl.Value.Type(), "Array") && !strings.Contains(fl.Value.Type(), "Slice") {
			return "takes one value, not a list"
		}
		for _, v := range f.Values {
			if err := tc.flags.Set(f.Name, v); err != nil {
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
var durationFlags = []string{"timeout", "startup-timeout", "cancel-grace", "settle", "terminal-timeout", "request-timeout", "grader-timeout"}

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

// runExit is the exit status of a run from its agents' errors: an
// interrupt first, then a usage or input error, a spent budget, a failed
// gate, infrastructure errors. With brief, its message holds the first
// line of each error only.
func runExit(errs []error, brief bool) error {
	if len(errs) == 0 {
		return nil
	}
	rank := map[int]int{exitInterrupted: 5, exitUsage: 4, exitBudget: 3, exitGateFailed: 2, exitInfraErrors: 1}
	best, bestRank := exitGateFailed, -1
	for _, err := range errs {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if rank[code] > bestRank {
			best, bestRank = code, rank[code]
		}
	}
	if brief {
		var lines []string
		for _, err := range errs {
			lines = append(lines, firstLine(err.Error()))
		}
		return withCode(best, errors.New(strings.Join(lines, "\n")))
	}
	return withCode(best, errors.Join(errs...))
}

// runLine is a run's outcome in one line: each agent's pass rate and cost.
func runLine(m *rundir.Manifest) string {
	var parts []string
	for _, a := range m.Agents {
		p := a.Name + " " + a.Status
		if a.PassRate != nil {
			p += fmt.Sprintf(" pass rate %.3f", *a.PassRate)
		}
		if a.Cost != nil {
			p += " (" + cost.Format(a.Cost) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// compareAndReport writes compare.json (several agents) and the HTML report
// and markdown of the run's outputs; it returns their names ("" when not
// made). Problems are reported, never fatal: the records are safe.
func compareAndReport(e *env, dir, title string, m *rundir.Manifest, quiet bool) (compareName, reportName string) {
	logf := func(format string, a ...any) {
		if !quiet {
			fmt.Fprintf(e.stderr, format, a...)
		}
	}
	var outs []string
	for _, a := range m.Agents {
		p := filepath.Join(dir, a.Output)
		if st, err := os.Stat(p); err == nil && st.Size() > 0 {
			outs = append(outs, p)
		}
	}
	if len(outs) == 0 {
		return "", ""
	}
	if len(outs) >= 2 {
		text := e.stderr
		if quiet {
			text = io.Discard
		}
		logf("\n")
		if err := compareRuns(outs, filepath.Join(dir, "compare.json"), text); err != nil {
			logf("harness run: compare: %v\n", err)
		} else {
			compareName = "compare.json"
		}
	}
	if len(outs) <= report.MaxRuns {
		if err := writeRunReport(e, outs, filepath.Join(dir, "report.html"), filepath.Join(dir, "summary.md"), title); err != nil {
			logf("harness run: report: %v\n", err)
			return compareName, ""
		}
		return compareName, "report.html"
	}
	for _, o := range outs {
		name := "report-" + strings.TrimSuffix(filepath.Base(o), ".jsonl") + ".html"
		if err := writeRunReport(e, []string{o}, filepath.Join(dir, name), "", title); err != nil {
			logf("harness run: report: %v\n", err)
		}
	}
	return compareName, ""
}

// writeRunReport writes the HTML report of the outputs side by side to
// html and, unless "", their markdown summary to markdown, as harness
// report would with its defaults.
func writeRunReport(e *env, outs []string, html, markdown, title string) error {
	var runs []*report.Run
	defer func() {
		for _, r := range runs {
			r.Close()
		}
	}()
	for _, name := range outs {
		in, err := results.Open(name, nil)
		if err != nil {
			return err
		}
		r, err := report.ReadRun(name, in, report.RunOptions{Details: true})
		in.Close()
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		out, err := reviewOutput(e, path, true)
		if err != nil {
			return err
		}
		if err := fn(out); err != nil {
			out.Abort()
			return fmt.Errorf("%s: %w", path, err)
		}
		return out.Commit()
	}
	return errors.Join(
		write(html, func(w io.Writer) error {
			return report.WriteHTML(w, report.Options{Title: title, Seed: 1, Resamples: trials.DefaultResamples}, runs...)
		}),
		write(markdown, func(w io.Writer) error {
			return report.WriteMarkdownSummary(w, report.MarkdownOptions{Title: title, Rule: report.RuleAll, Seed: 1, Resamples: trials.DefaultResamples}, runs...)
		}),
	)
}

// compareRuns reads the agents' outputs once and writes their comparison
// (two runs: per case and McNemar; more: the ranking, as harness compare
// does) as JSON to jsonPath and as text to text.
func compareRuns(outs []string, jsonPath string, text io.Writer) error {
	runs := make([]*trials.Run, len(outs))
	for i, name := range outs {
		in, err := results.Open(name, nil)
		if err != nil {
			return err
		}
		runs[i], err = trials.ReadRun(name, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	opt := trials.CompareOptions{K: 1, Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples}
	var v any
	var writeText func(io.Writer) error
	if len(runs) > 2 {
		rk := trials.Rank(runs, opt)
		v, writeText = rk, func(w io.Writer) error { return trials.WriteRankingText(w, rk) }
	} else {
		rep := trials.Compare(runs[0], runs[1], opt)
		v, writeText = rep, func(w io.Writer) error { return trials.WriteCompareText(w, rep) }
	}
	if err := results.ReplaceFile(jsonPath, 0o644, func(w io.Writer) error { return writePrettyJSON(w, v) }); err != nil {
		return err
	}
	return writeText(text)
}

// newRunDir makes the run directory: dir, which must not exist, or
// RUNS/<time>-<name>, a fresh directory.
func newRunDir(runs, dir, name string) (string, error) {
	if dir != "" {
		if err := os.MkdirAll(filepath.Dir(dir), 0o777); err != nil {
			return "", fmt.Errorf("-o: %w", err)
		}
		if err := os.Mkdir(dir, 0o777); err != nil {
			if errors.Is(err, os.ErrExist) {
				return "", fmt.Errorf("-o %s: exists; continue a run in it with --resume %s", dir, dir)
			}
			return "", fmt.Errorf("-o: %w", err)
		}
		return dir, nil
	}
	if err := os.MkdirAll(runs, 0o777); err != nil {
		return "", fmt.Errorf("--runs: %w", err)
	}
	base := filepath.Join(runs, time.Now().UTC().Format("20060102T150405Z")+"-"+fileSafe(name))
	dir = base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o777)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
		dir = base + "-" + strconv.Itoa(i)
	}
}

func writeCases(path string, cases []schemas.PromptCase) error {
	return results.ReplaceFile(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, c := range cases {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	})
}

func readManifest(dir string) (*rundir.Manifest, error) {
	m, err := rundir.Read(dir)
	if err != nil {
		return nil, fmt.Errorf("--resume %s: not a run directory: %w", dir, err)
	}
	if m.Suite.Path == "" {
		return nil, fmt.Errorf("%s: names no suite file", filepath.Join(dir, rundir.ManifestName))
	}
	return m, nil
}

func readSummary(path string) (*schemas.TrialsSummary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s schemas.TrialsSummary
	return &s, json.Unmarshal(b, &s)
}

// resumeValue is run's --resume: a switch (the run directory is the
// argument) that also takes the directory as its value (--resume=DIR).
type resumeValue struct {
	on  bool
	dir string
}

func (r *resumeValue) Set(s string) error {
	switch s {
	case "true":
		r.on = true
	case "false":
		r.on, r.dir = false, ""
	default:
		r.on, r.dir = true, s
	}
	return nil
}

func (r *resumeValue) String() string {
	if r.dir != "" {
		return r.dir
	}
	return strconv.FormatBool(r.on)
}

func (r *resumeValue) Type() string { return "bool" }
