package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/cli/mergecmd"
	"harness/evaluation"
	"harness/schemas"
	"harness/slurm"
	"harness/slurm/array"
	"harness/suiterun"
	"harness/trials"
)

// slurmFlags are the flags that run capture and trials on Slurm.
type slurmFlags struct {
	tasks   int
	opts    []string
	retries int
	detach  bool
	harness string
	shared  bool
	poll    time.Duration
}

func (s *slurmFlags) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&s.tasks, "slurm", 0, "run on Slurm as an array job of `n` tasks, each a shard; then merge into -o")
	fs.StringArrayVar(&s.opts, "slurm-opt", nil, "pass `option` to sbatch (--partition=gpu, --time=2:00:00, --mem=8G...); repeatable")
	fs.IntVar(&s.retries, "slurm-retries", 1, "resubmit a task that failed, was cancelled or lost its node up to `n` times")
	fs.BoolVar(&s.detach, "slurm-detach", false, "submit, print the job id and the merge command, and exit")
	fs.StringVar(&s.harness, "slurm-harness", "", "the harness `binary` the tasks run (default: this one; it must be on a filesystem the nodes share)")
	fs.BoolVar(&s.shared, "slurm-shared", false, "the output's filesystem is shared by the nodes, whatever it looks like")
	fs.DurationVar(&s.poll, "slurm-poll", 2*time.Second, "how often to ask Slurm how the tasks are doing")
}

// slurmOnly are the flags the tasks do not get: harness decides them per
// task, or applies them once to the merged output.
var slurmOnly = []string{"slurm", "slurm-opt", "slurm-retries", "slurm-detach", "slurm-harness", "slurm-shared", "slurm-poll",
	"output", "resume", "force", "shard", "summary", "junit", "markdown", "quiet", "progress", "retry-errors", "events",
	"image-policy", prefetchedFlag}

// pathFlags name files or directories, made absolute for the tasks.
var pathFlags = []string{"workspace", "cwd", "prices", "grader", "sandbox-home", "sandbox-ro", "sandbox-rw", "tasks", "cache-dir", "image"}

// slurmRun runs capture or trials on Slurm: one array task per shard, each
// running this harness with the same arguments and --shard i/N --resume
// (package slurm/array submits, watches and resubmits them); then it
// merges the shards into the output, ending as a local run would.
type slurmRun struct {
	e       *cli.Env
	c       *cli.Command
	f       *runFlags
	cmdName string
	k       int
	agent   []string
	// client talks to Slurm; nil is the real commands.
	client array.Client
	// finish applies a trials run's gates to the merged summary.
	finish func(sum schemas.TrialsSummary) error
}

// checkSlurm checks the flags of a --slurm run before anything else is
// read.
func (f *runFlags) checkSlurm(args []string) error {
	s := &f.slurm
	switch {
	case s.tasks == 0:
		return nil
	case s.tasks < 0:
		return cli.Usagef("--slurm wants at least 1 task")
	case f.shard != "":
		return cli.Usagef("--slurm makes the shards itself: drop --shard")
	case f.output == "" || f.output == "-":
		return cli.Usagef("--slurm needs -o FILE: the tasks write shards beside it and the merged output goes there")
	case (len(args) != 1 || args[0] == "-") && !(len(args) == 0 && f.image.tasks != ""):
		return cli.Usagef("--slurm needs the prompts as a file the nodes can read, not standard input")
	case s.retries < 0:
		return cli.Usagef("--slurm-retries must not be negative")
	case s.poll <= 0 && !s.detach:
		return cli.Usagef("--slurm-poll must be positive")
	}
	if err := slurm.Available(); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

func runSlurm(ctx context.Context, r *slurmRun, args []string) error {
	f := r.f
	if r.client == nil {
		r.client = &slurm.Client{Run: slurm.Exec}
	}
	out, err := filepath.Abs(f.output)
	if err != nil {
		return err
	}
	f.output = out
	// casesFile is the file of the tasks' cases this run wrote anew, which
	// a job that was never submitted does not leave behind.
	args, casesFile, err := r.tasksCases(args, out)
	if err != nil {
		return err
	}
	defer func() {
		if casesFile != "" {
			os.Remove(casesFile)
		}
	}()
	prompts, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	run, err := r.newArray(prompts, out)
	if err != nil {
		return err
	}
	mergeCmd := r.mergeCommand(run, prompts, out)
	id, err := run.Submit(ctx)
	if err != nil {
		return slurmExit(err, mergeCmd)
	}
	casesFile = ""
	if f.slurm.detach {
		fmt.Fprintf(r.e.Stdout, "%s\n", id)
		fmt.Fprintf(r.e.Stderr, "submitted array job %s: %d tasks writing %s\nwhen it is done: %s\n", id, f.slurm.tasks, run.Dir(), mergeCmd)
		return nil
	}
	if err := run.Wait(ctx, id); err != nil {
		return slurmExit(err, mergeCmd)
	}
	return r.mergeAndFinish(ctx, run, prompts)
}

// tasksCases are the prompts of a run of --tasks without a prompts file:
// the tasks' cases, written beside the output, where every node reads
// them; made is that file when this run made it. Other runs' args are
// their prompts as they are.
func (r *slurmRun) tasksCases(args []string, out string) (prompts []string, made string, err error) {
	if len(args) != 0 || r.f.image.tasks == "" {
		return args, "", nil
	}
	name := out + ".tasks.jsonl"
	if !fileExistsAny(name) {
		made = name
	}
	if err := cli.WriteTaskCases(r.f.image.set, name, r.f.image.timeoutScale); err != nil {
		return nil, "", err
	}
	return []string{name}, made, nil
}

// newArray sets up the array job of the run: its tasks run this harness
// (or --slurm-harness) with the run's arguments.
func (r *slurmRun) newArray(prompts, out string) (*array.Run, error) {
	f, s := r.f, &r.f.slurm
	job, err := r.job(prompts)
	if err != nil {
		return nil, err
	}
	harness, err := array.Binary(s.harness, os.Args[0])
	if errors.Is(err, array.ErrNotFile) {
		return nil, cli.Usagef("--slurm-harness %v", err)
	}
	if err != nil {
		return nil, err
	}
	var log io.Writer = r.e.Stderr
	if f.quiet {
		log = io.Discard
	}
	return array.New(array.Config{
		Job: job, Harness: harness, Prompts: prompts, Output: out, K: r.k,
		Opts: s.opts, Retries: s.retries, Poll: s.poll, Shared: s.shared,
		Resume: f.resume, Force: f.force,
		// Exit 1 (a gate) and 3 (records with infrastructure errors) are
		// runs that completed.
		Completed: []int{cli.ExitGateFailed, cli.ExitInfraErrors},
		Client:    r.client, Log: log,
	})
}

// slurmExit gives an error of the array run its exit status, and words
// its remedy with this command's flags; mergeCmd is how to merge the
// shards by hand.
func slurmExit(err error, mergeCmd string) error {
	if hint := slurmRemedy(array.RemedyOf(err), mergeCmd); hint != "" {
		err = &array.Error{Kind: array.KindOf(err), Err: fmt.Errorf("%w; %s", err, hint)}
	}
	switch array.KindOf(err) {
	case array.Input:
		return cli.Input(err)
	case array.GivenUp:
		return cli.WithCode(cli.ExitInfraErrors, err)
	case array.Interrupted:
		return cli.WithCode(cli.ExitInterrupted, err)
	case array.OutputLinked:
		return cli.WithCode(cli.ExitForeign, err)
	}
	return err
}

// slurmRemedy words what a user can do about an array run's error.
func slurmRemedy(r array.Remedy, mergeCmd string) string {
	switch r {
	case array.SharedOutput:
		return "put -o (and the prompts, graders and harness binary) on a filesystem every node mounts, or say it is shared with --slurm-shared"
	case array.RemoveOrForce:
		return "remove it, or start over with --force"
	case array.ForceOrOtherOutput:
		return "start over with --force, or use another -o"
	case array.ResumeOrForce:
		return "continue it with --resume, or start over with --force"
	case array.ResumeLater:
		return "finish later with the same command and --resume (or: " + mergeCmd + ")"
	case array.ResumeToContinue:
		return "the same command with --resume continues where the tasks stopped"
	case array.RemoveAndMerge:
		return "remove it and merge with: " + mergeCmd
	}
	return ""
}

// mergeCommand is the harness merge command line that merges the run's
// shards by hand.
func (r *slurmRun) mergeCommand(run *array.Run, prompts, out string) string {
	words := []string{"harness", "merge"}
	for _, f := range run.Shards() {
		words = append(words, slurm.Quote(f))
	}
	words = append(words, "--prompts", slurm.Quote(prompts), "-o", slurm.Quote(out))
	if r.cmdName == "trials" {
		words = append(words, "-k", strconv.Itoa(r.k))
	}
	return strings.Join(words, " ")
}

func (r *slurmRun) logf(format string, a ...any) {
	if !r.f.quiet {
		fmt.Fprintf(r.e.Stderr, format, a...)
	}
}

// job is the task command line without its per-task part: the prompts,
// then the same arguments, paths made absolute.
func (r *slurmRun) job(prompts string) (array.Job, error) {
	j := array.Job{Command: r.cmdName, Agent: r.agent, Tasks: r.f.slurm.tasks}
	var err error
	r.c.Flags.Visit(func(fl *pflag.Flag) {
		if slices.Contains(slurmOnly, fl.Name) || err != nil {
			return
		}
		vals := []string{fl.Value.String()}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			vals = sv.GetSlice()
		}
		for _, v := range vals {
			if slices.Contains(pathFlags, fl.Name) && v != "" && !((fl.Name == "grader" || fl.Name == "image") && !fileExistsAny(v)) {
				var abs string
				if abs, err = filepath.Abs(v); err != nil {
					return
				}
				v = abs
			}
			j.Args = append(j.Args, "--"+fl.Name+"="+v)
		}
	})
	// The images were fetched before submission, into the store every
	// node reads: the tasks pull nothing.
	j.Args = append(append([]string{prompts}, j.Args...), "--"+prefetchedFlag)
	return j, err
}

func fileExistsAny(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// mergeAndFinish merges the shards into the output and ends as the local
// run would: the summary table, the gates, the exit status.
func (r *slurmRun) mergeAndFinish(ctx context.Context, run *array.Run, prompts string) error {
	files := run.Written()
	if len(files) == 0 {
		return cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("the tasks wrote no records; their logs are in %s", run.Dir()))
	}
	merge := &mergecmd.Options{Output: r.f.output, Prompts: prompts, Force: true, Quiet: true, Seed: trials.DefaultSeed, Resamples: trials.DefaultResamples}
	if r.cmdName == "trials" {
		merge.K, merge.SummaryPath, merge.FailOn, merge.LeaveOut = r.k, r.f.summaryPath, r.f.failOn, r.f.leaveOut
	}
	if err := merge.Run(r.e, files); err != nil {
		return fmt.Errorf("merging %s: %w (the shards are kept in %s)", cli.Plural(len(files), "shard"), err, run.Dir())
	}
	r.logf("merged %s into %s\n", cli.Plural(len(files), "shard"), r.f.output)
	var gateErr error
	infra := 0
	if r.cmdName == "trials" {
		var err error
		if infra, gateErr, err = r.finishTrials(); err != nil {
			return err
		}
	} else {
		infra = array.CountErrored(r.f.output)
	}
	if r.f.junit != "" || r.f.markdown != "" {
		if err := evaluation.WriteReports(r.f.output, r.f.junit, r.f.markdown); err != nil {
			return err
		}
	}
	switch {
	case gateErr != nil:
		return gateErr
	case infra > 0:
		return cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("%d records are left out of n for errors not the agent's own (the infrastructure's, a grader's or the configuration's)", infra))
	}
	return nil
}

// finishTrials reads the merged summary of a trials run, prints its table
// and applies the gates: it returns the number of trials with
// infrastructure errors and the gates' error.
func (r *slurmRun) finishTrials() (infra int, gateErr error, err error) {
	summary := r.f.summaryPath
	if summary == "" {
		summary = cli.SummaryBeside(r.f.output)
	}
	sum, err := readSummary(summary)
	if err != nil {
		return 0, nil, fmt.Errorf("the merged summary: %w", err)
	}
	if !r.f.quiet {
		trials.WriteSummaryTable(r.e.Stderr, *sum)
	}
	for _, v := range sum.Errors {
		infra += v
	}
	if r.finish != nil {
		gateErr = r.finish(*sum)
	}
	return infra, gateErr, nil
}

// slurmTrialsFlags sets the flags of the trials of an agent of a suite
// that runs on Slurm: the tasks run harness trials with the flags set on
// the command line, so t's options are set as arguments, and the suite's
// graders and prices go to the tasks as files in the run directory.
func (r *suiteRun) slurmTrialsFlags(tc *cli.Command, f *runFlags, t suiterun.Trials, quiet bool) error {
	files, err := suiterun.WriteForTasks(r.dir, r.s, r.cases.Asserts, r.prices)
	if err != nil {
		return err
	}
	f.moreGraders, f.prices = nil, nil
	if err := tc.Flags.Parse(trialsArgs(t, files, quiet)); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

// trialsArgs are t's options (and the files of the suite's graders and
// prices) as trials flags.
func trialsArgs(t suiterun.Trials, files suiterun.TaskFiles, quiet bool) []string {
	argv := []string{"-k", strconv.Itoa(t.K), "-o", t.Output}
	add := func(name string, values ...string) {
		for _, v := range values {
			if v != "" {
				argv = append(argv, "--"+name+"="+v)
			}
		}
	}
	if t.Resume {
		argv = append(argv, "--resume") // the earlier run of a resumed one
	}
	if t.Workspace.Template != "" {
		add("workspace", t.Workspace.Template)
		add("workspace-setup", t.Workspace.Setup)
		add("workspace-prepare", t.Workspace.Prepare)
	}
	add("sandbox", t.Sandbox)
	add("sandbox-protect", t.Protect...)
	add("adapter", t.Adapter)
	add("agent-model", t.Model)
	add("env", t.Env...)
	if t.Budget.Cost > 0 {
		add("max-cost", strconv.FormatFloat(t.Budget.Cost, 'g', -1, 64))
	}
	if t.Budget.Tokens > 0 {
		add("max-tokens", strconv.FormatInt(t.Budget.Tokens, 10))
	}
	if quiet {
		argv = append(argv, "-q")
	}
	add("grader", files.Graders)
	add("prices", files.Prices)
	return argv
}
