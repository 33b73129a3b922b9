// Package gradecmd is harness grade: (re)grade stored trajectories without running the agent.
package gradecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/evaluation"
	"harness/graders"
	"harness/results"
	"harness/sandbox"
	"harness/schemas"
	"harness/trials"
)

// gradeFlags are the options of harness grade.
type gradeFlags struct {
	graders     []string
	output      string
	force       bool
	sample      int
	seed        uint64
	concurrency int
	prompts     string
	timeout     time.Duration
	threshold   float64
	quiet       bool
	workspace   string
	judgeCache  cli.JudgeCacheFlags
	sandbox     cli.SandboxFlags
	// single-shot mode
	agentOutput string
	input       string
	expected    string
	hint        string
}

func (f *gradeFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.graders, "grader", "g", nil, "grader: an executable, a .js/.mjs/.cjs/.ts module, or a .json/.yaml config (repeatable)")
	fs.StringVarP(&f.output, "output", "o", "", "write the graded records here (default stdout; .zst/.gz compress)")
	fs.BoolVar(&f.force, "force", false, "overwrite an existing output file")
	fs.IntVar(&f.sample, "sample", 0, "grade only N records chosen at random (with --seed)")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed for --sample")
	fs.IntVarP(&f.concurrency, "concurrency", "j", 4, "records graded at once")
	fs.StringVar(&f.prompts, "prompts", "", "prompts file (JSONL) joined by id to supply expected, hint and reference")
	cli.GraderTimeoutVar(fs, &f.timeout)
	cli.DeprecatedAlias(fs, "timeout", "t", "grader-timeout")
	fs.Float64Var(&f.threshold, "threshold", graders.DefaultThreshold, "pass threshold of composite graders and bare scores")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no summary on stderr")
	fs.StringVar(&f.workspace, "workspace", "", "rebuild each record's workspace from this template `dir` and its recorded changes when the copy is gone")
	fs.StringVar(&f.agentOutput, "agent-output", "", "single shot: grade this agent output instead of stored records")
	fs.StringVar(&f.input, "input", "", "single shot: the prompt the output answers")
	fs.StringVar(&f.expected, "expected", "", "single shot: the expected answer")
	fs.StringVar(&f.hint, "hint", "", "single shot: a grading hint")
	f.judgeCache.AddFlags(fs)
	f.sandbox.AddFlags(fs, "run executable, script, command and test graders (which may run code the agent wrote) in a `sandbox`: none or bwrap (bubblewrap)")
	// A grader needs no model endpoint: its network is none unless asked.
	fs.Lookup("sandbox-network").Usage = "with --sandbox bwrap, the graders' `network`: none (the default), allow:HOST[:PORT],... (only those, through a proxy), or host"
	for _, name := range []string{"sandbox-memory", "sandbox-pids", "sandbox-cpus", "sandbox-disk"} {
		fl := fs.Lookup(name)
		fl.Usage = strings.Replace(fl.Usage, "each agent", "each grader process", 1)
	}
	fs.Lookup("sandbox-home").Usage = "with --sandbox bwrap, copy `dir` into each grader process's fresh HOME"
	fs.Lookup("sandbox-protect").Usage = "with --sandbox bwrap, keep `path` read-only even inside a writable directory (the inputs, output, graders and prompts are kept so anyway); repeatable"
}

// NewCmd returns the harness grade command.
func NewCmd() *cli.Command {
	f := &gradeFlags{}
	c := &cli.Command{
		Name:  "grade",
		Usage: "grade RESULTS... -g GRADER [-g GRADER...] [-o OUT] [flags]",
		Short: "(re)grade stored trajectories without running the agent",
		Long: `Grade reads capture records (JSONL, .zst or .gz; "-" is stdin) and grades
each one again with the given graders, without running the agent. Every
record is written back whole with its trajectory untouched: only score,
scores and provenance.graders change. With one grader, score is its result;
with several, scores holds each result and score combines them (pass only
if all pass, score the mean). Records whose run failed (agent crash,
timeout...) are passed through ungraded, as capture does.

A grader is an executable (acp-harness stdin/stdout JSON protocol), a
JavaScript or TypeScript module exporting grade, or a JSON/YAML config
(llm-judge, agentv script command, JavaScript script, composite with
weights). See docs/graders.md.

Single shot: with --agent-output and no RESULTS, grade one synthetic record
and print the result (exit 1 when it fails), like agentv's "eval assert".

Examples:
  harness grade results.jsonl -g ./grader.py -o regraded.jsonl
  harness grade results.jsonl.zst -g judge.yaml --sample 5 --seed 7
  harness grade run1.jsonl run2.jsonl -g format.yaml -g quality.yaml -j 8 -o out.jsonl.zst
  harness grade results.jsonl -g ./check.ts --prompts prompts.jsonl -o out.jsonl
  harness grade results.jsonl -g tests.yaml --workspace repo/ --sandbox bwrap -o regraded.jsonl
  harness grade -g ./grader.py --agent-output "The answer is 42" --input "15+27?" --expected 42

Graders that run programs on the record's workspace (a test runner, a
script, a command) run code the agent wrote: for records of an untrusted
agent, give --sandbox bwrap, which runs each of them as capture and trials
do, with only the workspace writable, the user's files hidden, no network
(--sandbox-network none unless asked) and the caps of --sandbox-memory,
-pids, -cpus and -disk.`,
		Flags: pflag.NewFlagSet("grade", pflag.ContinueOnError),
	}
	f.addFlags(c.Flags)
	c.Run = func(ctx context.Context, e *cli.Env, args, _ []string) error {
		return runGrade(ctx, e, c.Flags, f, args)
	}
	return c
}

func runGrade(ctx context.Context, e *cli.Env, fs *pflag.FlagSet, f *gradeFlags, args []string) error {
	single := fs.Changed("agent-output")
	if err := f.check(fs, single, args); err != nil {
		return err
	}
	cache, err := f.judgeCache.Open(e)
	if err != nil {
		return err
	}
	opts := graders.Options{Getenv: e.Getenv, JudgeCache: cache, Timeout: f.timeout, Warn: e.GraderWarn("grade")}
	if wd, err := os.Getwd(); err == nil {
		opts.Dir = wd
	}
	if f.sandbox.Backend == "bwrap" && !fs.Changed("sandbox-network") {
		f.sandbox.Network = "none"
	}
	sb, err := f.sandbox.Runner(nil, nil, nil)
	if err != nil {
		return err
	}
	opts.Sandbox = sb
	if bw, ok := sb.(*sandbox.Bwrap); ok {
		// The graders share a build cache, removed at the end.
		bc := sandbox.NewBuildCache("", e.Getenv)
		defer bc.Remove()
		opts.Sandbox = bc.Runner(sb)
		bw.Protect(f.gradeFiles(args, opts.Dir)...)
		if !f.quiet {
			for _, w := range bw.Warnings() {
				fmt.Fprintf(e.Stderr, "warning: %s\n", w)
			}
		}
	}
	if fs.Changed("threshold") {
		th := f.threshold
		opts.Threshold = &th
	}
	var gs []graders.Grader
	var names []string
	for _, spec := range f.graders {
		g, err := graders.Load(spec, opts)
		if err != nil {
			return cli.Input(err)
		}
		gs = append(gs, g)
		names = append(names, g.Name())
	}
	if single {
		return gradeSingle(ctx, e, f, gs)
	}
	return gradeFiles(ctx, e, f, args, gs, names)
}

// check checks the flags and arguments of harness grade.
func (f *gradeFlags) check(fs *pflag.FlagSet, single bool, args []string) error {
	if len(f.graders) == 0 {
		return cli.Usagef("no grader: give one or more -g GRADER")
	}
	if single && len(args) > 0 {
		return cli.Usagef("--agent-output grades one synthetic record; do not also give RESULTS files")
	}
	if !single && len(args) == 0 {
		return cli.Usagef("no RESULTS files (give capture output files, or - for stdin; or --agent-output TEXT for a single shot)")
	}
	if !single {
		for _, name := range []string{"input", "expected", "hint"} {
			if fs.Changed(name) {
				return cli.Usagef("--%s only applies with --agent-output", name)
			}
		}
	}
	if f.concurrency < 1 {
		return cli.Usagef("-j must be at least 1")
	}
	if f.sample < 0 {
		return cli.Usagef("--sample must not be negative")
	}
	if f.threshold < 0 || f.threshold > 1 {
		return cli.Usagef("--threshold must be between 0 and 1")
	}
	return nil
}

// gradeFiles are the files of a grade run kept read-only in its sandbox:
// the records it reads, its output and summary, the prompts, every grader
// (its file and directory), the workspace template and --sandbox-protect
// paths.
func (f *gradeFlags) gradeFiles(inputs []string, dir string) []string {
	files := []string{f.prompts, f.workspace}
	for _, name := range inputs {
		if name != "-" {
			files = append(files, name)
		}
	}
	if f.output != "" && f.output != "-" {
		files = append(files, f.output, cli.SummaryBeside(f.output))
	}
	for _, spec := range f.graders {
		p := spec
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		files = append(files, p, filepath.Dir(p))
	}
	return append(files, f.sandbox.Protect...)
}

// gradeSingle grades one synthetic record and prints the result.
func gradeSingle(ctx context.Context, e *cli.Env, f *gradeFlags, gs []graders.Grader) error {
	if f.output != "" && f.output != "-" {
		return cli.Usagef("-o does not apply to a single shot; the result goes to stdout")
	}
	shot := evaluation.SingleShot{Output: f.agentOutput, Input: f.input, Expected: f.expected, Hint: f.hint}
	r := evaluation.GradeSingle(ctx, graders.Many(gs), shot, e.Provenance())
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%s\n", b)
	switch {
	case r.Error != nil:
		return cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("grader error (%s): %s", r.Error.Class, r.Error.Message))
	case !r.Pass:
		return cli.WithCode(cli.ExitGateFailed, errors.New(""))
	}
	return nil
}

// gradeFiles regrades stored records (capture, graded or trials files),
// streaming them: a first pass checks every line (and counts records for
// --sample) so bad input stops the command before any output is written;
// the second pass grades.
func gradeFiles(ctx context.Context, e *cli.Env, f *gradeFlags, files []string, gs []graders.Grader, names []string) error {
	if err := f.checkFiles(files); err != nil {
		return err
	}
	sources := cli.InputSources(e, files)
	total := 0
	for _, src := range sources {
		if src.Name == "-" {
			continue
		}
		n, err := evaluation.CountRecords(src)
		if err != nil {
			return cli.Input(err)
		}
		total += n
	}
	opts, err := f.regradeOptions(e, gs, names, total)
	if err != nil {
		return err
	}
	out, err := openGradeOutput(e, f)
	if err != nil {
		return err
	}
	st, runErr := evaluation.Regrade(ctx, sources, out, opts)
	if err := out.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if err := cli.CheckWritten(out); err != nil {
		return err
	}
	interrupted := errors.Is(runErr, evaluation.ErrInterrupted)
	if runErr != nil && !interrupted {
		return cli.OutputError(cli.ReviewInputErr(runErr))
	}
	if !f.quiet {
		msg := fmt.Sprintf("graded %s: %d passed, %d failed, %s",
			cli.Plural(st.Graded, "record"), st.Passed, st.Failed, cli.Plural(st.Errored, "grader error"))
		if st.TrialsRecords > 0 {
			msg += fmt.Sprintf(" (the trials of %s, metrics recomputed)", cli.Plural(st.TrialsRecords, "case"))
		}
		if st.Skipped > 0 {
			msg += fmt.Sprintf("; %d not graded (the run itself failed)", st.Skipped)
		}
		if opts.Chosen != nil {
			msg += fmt.Sprintf(" (sample of %d from %d, seed %d)", f.sample, total, f.seed)
		}
		fmt.Fprintln(e.Stderr, "harness grade: "+msg)
		// Each distinct grader error once, with where it happened.
		for _, ge := range st.GraderErrors {
			fmt.Fprintf(e.Stderr, "harness grade: grader error on %s: %s\n", cli.Plural(ge.Count, "record"), ge.Gist)
		}
	}
	if interrupted {
		return cli.WithCode(cli.ExitInterrupted, errors.New("interrupted; the output holds every finished record"))
	}
	if st.Errored > 0 {
		return cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("%d of %d records had grader errors", st.Errored, st.Graded))
	}
	return nil
}

// checkFiles checks the RESULTS files against -o and --sample.
func (f *gradeFlags) checkFiles(files []string) error {
	stdinUses := 0
	for _, name := range files {
		if name == "-" {
			stdinUses++
		}
		if f.output != "" && f.output != "-" && sameFile(name, f.output) {
			return cli.Usagef("output %s is also an input; write to a new file", f.output)
		}
	}
	if stdinUses > 1 {
		return cli.Usagef("stdin (-) can be read only once")
	}
	if stdinUses > 0 && f.sample > 0 {
		return cli.Usagef("--sample needs files, not stdin")
	}
	return nil
}

// regradeOptions are the options of a regrade of total records.
func (f *gradeFlags) regradeOptions(e *cli.Env, gs []graders.Grader, names []string, total int) (evaluation.RegradeOptions, error) {
	opts := evaluation.RegradeOptions{
		Grader: graders.Many(gs), Count: len(gs), Names: names, Files: cli.GraderFiles(gs), Concurrency: f.concurrency,
		Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples, Redact: e.Redact.JSON,
		WorkspaceGone: func(where string, rec *schemas.CaptureRecord) {
			fmt.Fprintf(e.Stderr, "harness grade: %s: case %q trial %d: its workspace copy %s is gone, so graders that read it cannot judge it; capture with --keep-workspaces to keep the copies\n",
				where, rec.ID, max(rec.Trial, 1), rec.Workspace.Path)
		},
	}
	if f.sample > 0 && f.sample < total {
		opts.Chosen = evaluation.Sample(total, f.sample, f.seed)
	}
	if path := cli.SummaryBeside(f.output); path != "" {
		opts.Summary = func(sum schemas.TrialsSummary) error {
			// Replaced, never written through a link planted in its place.
			return results.ReplaceFile(path, 0o644, func(w io.Writer) error { return cli.WritePrettyJSON(w, sum) })
		}
	}
	if f.workspace != "" {
		if st, err := os.Stat(f.workspace); err != nil || !st.IsDir() {
			return opts, cli.Usagef("--workspace %s: not a directory", f.workspace)
		}
		opts.Rebuild = evaluation.RebuildFrom(f.workspace)
	}
	if f.prompts != "" {
		list, err := cli.ReadPromptsFlag(e, f.prompts)
		if err != nil {
			return opts, err
		}
		opts.Cases = evaluation.CasesByID(list)
	}
	return opts, nil
}

// openGradeOutput opens and locks -o (a new file, or --force) or stdout.
func openGradeOutput(e *cli.Env, f *gradeFlags) (*results.Output, error) {
	mode := results.New
	if f.force {
		mode = results.Truncate
	}
	key, err := cli.RecordKey(e)
	if err != nil {
		return nil, err
	}
	out, err := results.OpenOutput(f.output, results.OutputOptions{Mode: mode, Stdout: e.Stdout, Redact: e.Redact.JSON, Key: key})
	if err != nil {
		return nil, cli.OutputOpenError(err)
	}
	return out, nil
}

// sameFile reports whether two paths name the same existing file.
func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	aa, _ := filepath.Abs(a)
	bb, _ := filepath.Abs(b)
	return aa == bb
}
