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
	"harness/graders"
	"harness/internal/buildinfo"
	"harness/report"
	"harness/results"
	"harness/rundir"
	"harness/schemas"
	"harness/suite"
	"harness/trials"
)

// runFlagsSetByRun are the run flags harness run decides itself.
var runFlagsSetByRun = []string{"output", "resume", "force", "summary", "shard", "junit", "markdown", "k"}

func newRunCmd() *command {
	var (
		runsDir, resumeDir, pricesFile string
		only                           []string
		maxCost                        float64
		maxTokens                      int64
		k                              int
		force, quiet                   bool
		image                          imageRunFlags
	)
	c := &command{
		name:  "run",
		usage: "run SUITE [--runs DIR] [--agent NAME] [-- AGENT...] | run --resume RUNDIR",
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
unchanged). --max-cost and --max-tokens (or the suite's gates) bound the
whole run: once spent, no new work starts, and the exit status is 4.

Examples:
  harness run examples/suite/suite.yaml
  harness run suite.yaml --agent fast -- ./my-agent
  harness run --resume runs/20261123T101500Z-nightly`,
		agent:         true,
		optionalAgent: true,
		flags:         pflag.NewFlagSet("run", pflag.ContinueOnError),
	}
	c.flags.StringVar(&runsDir, "runs", "runs", "make the run directory under `dir`")
	c.flags.StringVar(&resumeDir, "resume", "", "continue the run in `rundir`")
	c.flags.StringArrayVar(&only, "agent", nil, "run only the agent `name` of the suite; repeatable")
	c.flags.StringVar(&pricesFile, "prices", "", "price table `file` (added to the suite's prices)")
	c.flags.Float64Var(&maxCost, "max-cost", 0, "stop starting new work once the run has cost `usd`")
	c.flags.Int64Var(&maxTokens, "max-tokens", 0, "stop starting new work once the run has used `n` tokens")
	c.flags.IntVarP(&k, "k", "k", 0, "trials per case (overrides the suite's k)")
	c.flags.BoolVar(&force, "force", false, "with --resume: continue although the suite file changed")
	c.flags.BoolVarP(&quiet, "quiet", "q", false, "print nothing but errors on stderr")
	image.add(c.flags)
	c.run = func(ctx context.Context, e *env, args, agentCmd []string) error {
		var m *rundir.Manifest
		var dir, suiteFile string
		switch {
		case resumeDir != "":
			if len(args) > 0 {
				return usageErrorf("--resume takes the run directory; the suite is the one it was made from")
			}
			var err error
			if m, err = readManifest(resumeDir); err != nil {
				return inputError(err)
			}
			dir, suiteFile = resumeDir, m.Suite.Path
		case len(args) == 1 && isTaskDir(args[0]):
			// A Harbor task directory or dataset: its tasks are the
			// cases, each in its image (docs/tasks.md).
			var err error
			if suiteFile, err = taskSuite(e, args[0], image.timeoutScale); err != nil {
				return err
			}
		case len(args) == 1:
			if err := notTaskDir(args[0]); err != nil {
				return err
			}
			suiteFile = args[0]
		default:
			return usageErrorf("want one suite file, got %d arguments", len(args))
		}
		s, err := suite.Load(suiteFile)
		if err != nil {
			return inputError(err)
		}
		if m != nil && m.Suite.Hash != s.Hash && !force {
			return usageErrorf("%s changed since the run in %s began (sha256 %.12s, now %.12s): start a new run, or continue with the new suite with --force",
				suiteFile, dir, m.Suite.Hash, s.Hash)
		}
		agents, err := suiteAgents(s, agentCmd, only)
		if err != nil {
			return err
		}
		if k > 0 {
			s.K = k
		}
		if s.K == 0 {
			s.K = 1
		}
		prices := maps.Clone(s.Prices)
		if pricesFile != "" {
			t, err := cost.LoadTable(pricesFile)
			if err != nil {
				return inputError(err)
			}
			if prices == nil {
				prices = cost.Table{}
			}
			maps.Copy(prices, t)
		}
		cases, asserts, assertLines, err := suiteCases(s)
		if err != nil {
			return inputError(err)
		}
		budget, err := suiteBudget(s, maxCost, maxTokens)
		if err != nil {
			return err
		}
		// The graders, and every agent's flags, are checked before anything
		// is made.
		if build := suiteGraders(s, asserts, assertLines); build != nil {
			if _, err := build(graders.Options{Getenv: e.getenv, Dir: s.Dir}); err != nil {
				return inputError(err)
			}
		}
		for i := range agents {
			argv := trialsArgs(s, &agents[i], "", budget, nil, true)
			tc := newTrialsCmdWith(&runFlags{})
			if err := applySuiteFlags(tc, s, &agents[i], argv); err != nil {
				return err
			}
			if err := image.passOn(tc.flags, c.flags); err != nil {
				return err
			}
		}
		if m == nil {
			dir, err = newRunDir(runsDir, s.Name)
			if err != nil {
				return inputError(err)
			}
			abs, _ := filepath.Abs(suiteFile)
			bi := buildinfo.Read(version)
			m = &rundir.Manifest{
				Suite:   rundir.Suite{Name: s.Name, File: suiteFile, Path: abs, Hash: s.Hash},
				Harness: rundir.Harness{Version: bi.Version, Revision: bi.Revision, Dirty: bi.Dirty},
				Started: time.Now().UTC().Format(time.RFC3339),
			}
		}
		m.Status, m.Ended, m.K, m.Cases = "running", "", s.K, len(cases)
		m.Agents = m.Agents[:0]
		for _, a := range agents {
			m.Agents = append(m.Agents, rundir.Agent{Name: a.Name, Command: a.Command, Output: a.Name + ".jsonl", Summary: a.Name + ".summary.json", Status: "pending"})
		}
		casesPath := filepath.Join(dir, "cases.jsonl")
		if err := writeCases(casesPath, cases); err != nil {
			return err
		}
		if err := rundir.Write(dir, m); err != nil {
			return err
		}
		logf := func(format string, a ...any) {
			if !quiet {
				fmt.Fprintf(e.stderr, format, a...)
			}
		}
		logf("run %s: %s, %s, k=%d, into %s\n", s.Name, plural(len(agents), "agent"), plural(len(cases), "case"), s.K, dir)
		moreGraders := suiteGraders(s, asserts, assertLines)
		var spent *schemas.Cost
		var errs []error
		stopped := false
		for i := range agents {
			a := &agents[i]
			ma := &m.Agents[i]
			if stopped {
				continue
			}
			if limit := budget.spentBy(spent); limit != "" {
				// The agents before this one spent the run's budget: it
				// does not start.
				err := withCode(exitBudget, fmt.Errorf("budget spent (%s; %s) before it started; continue with --resume and a larger budget", cost.Format(spent), limit))
				ma.Status, ma.Message = agentStatus(err)
				errs = append(errs, fmt.Errorf("agent %s: %w", a.Name, err))
				logf("harness run: agent %s: %v\n", a.Name, err)
				stopped = true
				if werr := rundir.Write(dir, m); werr != nil {
					return werr
				}
				continue
			}
			logf("\n== agent %s (%d of %d): %s\n", a.Name, i+1, len(agents), strings.Join(a.Command, " "))
			out := filepath.Join(dir, ma.Output)
			f := &runFlags{moreGraders: moreGraders, prices: prices}
			tc := newTrialsCmdWith(f)
			argv := trialsArgs(s, a, out, budget, spent, quiet)
			var err error
			if onSlurm(s, a) {
				// The tasks get the suite's graders and prices as files.
				var more []string
				more, err = writeForTasks(dir, s, asserts, prices)
				argv = append(argv, more...)
				f.moreGraders, f.prices = nil, nil
			}
			if err == nil {
				err = applySuiteFlags(tc, s, a, argv)
			}
			if err == nil {
				err = image.passOn(tc.flags, c.flags)
			}
			if err == nil {
				err = tc.run(ctx, e, []string{casesPath}, a.Command)
			}
			ma.Status, ma.Message = agentStatus(err)
			if sum, serr := readSummary(filepath.Join(dir, ma.Summary)); serr == nil {
				ma.PassRate, ma.Cost = sum.PassRate, sum.Cost
				spent = spent.Add(sum.Cost)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("agent %s: %w", a.Name, err))
				logf("harness run: agent %s: %v\n", a.Name, err)
			}
			if ma.Status == "interrupted" || ma.Status == "budget" {
				stopped = true
			}
			if werr := rundir.Write(dir, m); werr != nil {
				return werr
			}
		}
		m.Cost = spent
		if !stopped {
			m.Compare, m.Report = compareAndReport(ctx, e, dir, s.Name, m, quiet)
		}
		m.Ended = time.Now().UTC().Format(time.RFC3339)
		m.Status = "done"
		switch {
		case stopped:
			m.Status = "stopped"
		case slices.ContainsFunc(m.Agents, func(a rundir.Agent) bool { return a.Status == "error" }):
			m.Status = "failed"
		}
		if err := rundir.Write(dir, m); err != nil {
			return err
		}
		logf("\nrun %s: %s in %s\n", m.Status, runLine(m), dir)
		if stopped {
			logf("continue with: harness run --resume %s\n", dir)
		}
		// The agents' errors were told as they happened, their stderr
		// with them; the run ends with one line for each.
		return runExit(errs, !quiet)
	}
	return c
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

// imageRunFlags are the image flags of harness run, given to every
// agent's trials run over the suite's.
type imageRunFlags struct {
	timeoutScale float64
}

func (f *imageRunFlags) add(fs *pflag.FlagSet) {
	fs.String("cache-dir", "", "where task images are unpacked, once each (default $XDG_CACHE_HOME/harness/images)")
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
	for _, name := range []string{"cache-dir", "keep-layers", "agent-in-image", "image-no-network", "task-timeout-scale", "force-build"} {
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
	set := func(f suite.Flag, where string) error {
		if f.Name == "max-cost" || f.Name == "max-tokens" {
			return nil // the run's budget, handed out above
		}
		bad := func(msg string) error {
			return inputError(&schemas.InputError{File: s.File, Line: f.Line, Field: where + f.Name, Msg: msg})
		}
		if slices.Contains(runFlagsSetByRun, f.Name) {
			return bad("harness run sets this itself")
		}
		fl := tc.flags.Lookup(f.Name)
		if fl == nil {
			msg := "not a suite key or a run flag (keys: " + strings.Join(suite.RootKeys, ", ") + ")"
			if best := closestFlag(tc.flags, f.Name); best != "" {
				msg += "; did you mean " + best + "?"
			}
			return bad(msg)
		}
		if len(f.Values) > 1 && !strings.Contains(fl.Value.Type(), "Array") && !strings.Contains(fl.Value.Type(), "Slice") {
			return bad("takes one value, not a list")
		}
		for _, v := range f.Values {
			if err := tc.flags.Set(f.Name, v); err != nil {
				return bad(err.Error())
			}
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

// agentStatus names how an agent's trials run ended.
func agentStatus(err error) (status, message string) {
	if err == nil {
		return "ok", ""
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	switch code {
	case exitGateFailed:
		return "gate_failed", err.Error()
	case exitInfraErrors:
		return "infra_errors", err.Error()
	case exitBudget:
		return "budget", err.Error()
	case exitInterrupted:
		return "interrupted", err.Error()
	}
	return "error", err.Error()
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
func compareAndReport(ctx context.Context, e *env, dir, title string, m *rundir.Manifest, quiet bool) (compareName, reportName string) {
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
	quietEnv := *e
	quietEnv.stdout = io.Discard
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
		argv := append(slices.Clone(outs), "-o", filepath.Join(dir, "report.html"), "--markdown", filepath.Join(dir, "summary.md"), "--title", title, "--force")
		if err := invokeCmd(ctx, &quietEnv, newReportCmd(), argv); err != nil {
			logf("harness run: report: %v\n", err)
			return compareName, ""
		}
		return compareName, "report.html"
	}
	for _, o := range outs {
		name := "report-" + strings.TrimSuffix(filepath.Base(o), ".jsonl") + ".html"
		if err := invokeCmd(ctx, &quietEnv, newReportCmd(), []string{o, "-o", filepath.Join(dir, name), "--title", title, "--force"}); err != nil {
			logf("harness run: report: %v\n", err)
		}
	}
	return compareName, ""
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

// invokeCmd runs another command in-process with its own flags.
func invokeCmd(ctx context.Context, e *env, c *command, argv []string) error {
	if err := c.flags.Parse(argv); err != nil {
		return usageErrorf("%s: %v", c.name, err)
	}
	return c.run(ctx, e, c.flags.Args(), nil)
}

// newRunDir makes RUNS/<time>-<name>, a fresh directory.
func newRunDir(runs, name string) (string, error) {
	if err := os.MkdirAll(runs, 0o777); err != nil {
		return "", fmt.Errorf("--runs: %w", err)
	}
	base := filepath.Join(runs, time.Now().UTC().Format("20060102T150405Z")+"-"+fileSafe(name))
	dir := base
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
