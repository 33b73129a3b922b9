// Package mergecmd is harness merge: join the shard outputs of a distributed run, checking that every unit is there once.
package mergecmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/evaluation"
	"harness/results"
	"harness/trials"
)

// Options are the options of harness merge: its flags, or what a --slurm
// run merges its shards with.
type Options struct {
	Output       string
	K            int
	Prompts      string
	AllowMissing bool
	Force        bool
	SummaryPath  string
	Seed         uint64
	Resamples    int
	Quiet        bool
	FailOn       []string
	LeaveOut     []string
}

// NewCmd returns the harness merge command.
func NewCmd() *cli.Command {
	var f Options
	c := &cli.Command{
		Name:  "merge",
		Usage: "merge SHARDS... -o OUT [-k N] [--prompts FILE] [flags]",
		Short: "join the shard outputs of a distributed run, checking that every unit is there once",
		Long: `merge joins the outputs of runs made with --shard I/N (capture records,
one per unit: a case and a trial; .zst and .gz files are read by name) and
checks that every unit is there exactly once. A unit in two files, or twice
in one, is an error naming the unit and the files. Within one file a record
with an error followed by another record of the same unit (a shard continued
with --resume or --retry-errors) counts as the later one.

With --prompts FILE merge knows the whole set of units (every case of the
file, trials 1..k) and reports the missing ones; without it, every case seen
must have trials 1..k. k is -k, or else the largest trial seen. Missing units
are an error unless --allow-missing, which writes what there is and lists the
gaps on stderr.

The output is the merged capture records in case and trial order, or with
-k N (which needs --prompts) what harness trials writes for the same run:
one trials record per case with n, c, pass@k and pass^k, then the summary
(or --summary FILE). The metrics equal those of an unsharded run.

Examples:
  harness merge shard-*.jsonl.zst -o all.jsonl.zst
  harness merge shard-*.jsonl.zst -k 5 --prompts prompts.jsonl -o trials.jsonl
  harness merge results/*.jsonl --prompts prompts.jsonl --allow-missing -o partial.jsonl`,
		Flags: pflag.NewFlagSet("merge", pflag.ContinueOnError),
	}
	fs := c.Flags
	fs.StringVarP(&f.Output, "output", "o", "", "write the merged records to `file` (- for stdout); a .zst or .gz suffix compresses")
	fs.IntVarP(&f.K, "k", "k", 0, "write trials records for `n` trials per case, and the summary (needs --prompts)")
	fs.StringVar(&f.Prompts, "prompts", "", "the prompts `file` of the run: the full set of cases, in order")
	fs.BoolVar(&f.AllowMissing, "allow-missing", false, "write what there is when units are missing, and list them")
	fs.BoolVar(&f.Force, "force", false, "overwrite an existing output file")
	fs.StringVar(&f.SummaryPath, "summary", "", "with -k, write the summary (JSON) to `file` (default: beside -o, named after it: -o merged.jsonl writes merged.summary.json; the last line when writing to stdout)")
	fs.Uint64Var(&f.Seed, "seed", trials.DefaultSeed, "seed of the bootstrap intervals")
	fs.IntVar(&f.Resamples, "resamples", trials.DefaultResamples, "bootstrap resamples")
	fs.BoolVarP(&f.Quiet, "quiet", "q", false, "print nothing but errors on stderr")
	fs.StringSliceVar(&f.FailOn, "fail-on", nil, "with -k: count trials with these error `classes` or owners as failures, as trials --fail-on does")
	fs.StringSliceVar(&f.LeaveOut, "leave-out", nil, "with -k: leave trials with these error `classes` or owners out of n, as trials --leave-out does")
	c.Run = func(ctx context.Context, e *cli.Env, args, _ []string) error {
		return f.Run(e, args)
	}
	return c
}

// Run merges the shard files into the output.
func (f *Options) Run(e *cli.Env, args []string) error {
	if err := f.check(args); err != nil {
		return err
	}
	shards, key, err := f.read(e, args)
	if err != nil {
		return err
	}
	defer shards.Close()
	if n := len(shards.Gaps); n > 0 {
		var gaps results.Problems
		for _, g := range shards.Gaps {
			if g.Interrupted {
				gaps.Addf("case %q trial %d: only an interrupted record (%s); continue that shard with --resume", g.ID, g.Trial, g.Where)
			} else {
				gaps.Addf("case %q trial %d: no record", g.ID, g.Trial)
			}
		}
		if !f.AllowMissing {
			return cli.Input(gaps.Err(fmt.Sprintf("of %d units missing (write what there is with --allow-missing)", shards.Units())))
		}
		if !f.Quiet {
			fmt.Fprintf(e.Stderr, "harness merge: %d of %d units missing:\n  %s\n", gaps.N, shards.Units(), strings.Join(gaps.List, "\n  "))
			if gaps.N > len(gaps.List) {
				fmt.Fprintf(e.Stderr, "  ... and %d more\n", gaps.N-len(gaps.List))
			}
		}
	}
	w, commit, abort, err := openMergeOutput(e, f.Output, f.Force)
	if err != nil {
		return err
	}
	w.Sign(key)
	if f.K > 0 {
		err = f.writeTrials(e, w, shards)
	} else {
		err = shards.WriteCaptures(w)
	}
	if err != nil {
		abort()
		return cli.MergeError(err)
	}
	if err := commit(); err != nil {
		return fmt.Errorf("merge: output: %w", err)
	}
	if !f.Quiet {
		fmt.Fprintf(e.Stderr, "harness merge: %s from %s, %s, k=%d\n", cli.Plural(shards.Records(), "record"), cli.Plural(len(args), "file"), cli.Plural(len(shards.IDs), "case"), shards.K)
	}
	return nil
}

// check checks the flags and arguments, and sets the default --summary.
func (f *Options) check(args []string) error {
	if len(args) == 0 {
		return cli.Usagef("no shard files: name the outputs of the --shard runs")
	}
	if f.Output == "" {
		return cli.Usagef("no output: use -o FILE (or -o - for stdout)")
	}
	if f.K < 0 {
		return cli.Usagef("-k must be at least 1")
	}
	if f.K > 0 && f.Prompts == "" {
		return cli.Usagef("-k needs --prompts FILE: a trials record carries its case's input, expected and metadata")
	}
	if f.SummaryPath != "" && f.K == 0 {
		return cli.Usagef("--summary needs -k")
	}
	if f.Output != "-" {
		if st, err := os.Stat(f.Output); err == nil && st.Mode().IsRegular() && st.Size() > 0 && !f.Force {
			return cli.Usagef("output %s already exists; use --force to overwrite it", f.Output)
		}
		for _, a := range args {
			if cli.SameFile(a, f.Output) {
				return cli.Usagef("output %s is also a shard input", f.Output)
			}
		}
	}
	explicitSummary := f.SummaryPath != ""
	if f.K > 0 && f.SummaryPath == "" {
		f.SummaryPath = cli.SummaryBeside(f.Output)
	}
	if explicitSummary && !f.Force {
		if _, err := os.Stat(f.SummaryPath); err == nil {
			return cli.Usagef("--summary %s already exists; use --force to overwrite it", f.SummaryPath)
		}
	}
	return nil
}

// read reads the prompts and the shard files and checks that every unit in
// them belongs to the run.
func (f *Options) read(e *cli.Env, args []string) (*evaluation.Shards, *results.Key, error) {
	opts := evaluation.ShardOptions{K: f.K, PromptsName: f.Prompts, Files: cli.InputSources(e, args)}
	if f.Prompts != "" {
		var err error
		if opts.Cases, err = cli.ReadPromptsFlag(e, f.Prompts); err != nil {
			return nil, nil, err
		}
	}
	key, err := cli.RecordKey(e)
	if err != nil {
		return nil, nil, err
	}
	opts.Key = key
	if !f.Quiet {
		opts.Skipped = func(file string, line int) {
			fmt.Fprintf(e.Stderr, "harness merge: %s:%d: skipped a line that is not JSON (a record cut short by a crash?)\n", file, line)
		}
		opts.Empty = func(file string) { fmt.Fprintf(e.Stderr, "harness merge: %s holds no records\n", file) }
	}
	shards, err := evaluation.ReadShards(opts)
	return shards, key, cli.MergeError(err)
}

// writeTrials writes one trials record per case, built the way harness
// trials builds them, then the summary.
func (f *Options) writeTrials(e *cli.Env, w *results.Writer, shards *evaluation.Shards) error {
	res, err := shards.WriteTrials(w, evaluation.MergeTrialsOptions{FailOn: f.FailOn, LeaveOut: f.LeaveOut, Seed: f.Seed, Resamples: f.Resamples})
	if err != nil {
		return err
	}
	if f.SummaryPath != "" {
		err := results.ReplaceFile(f.SummaryPath, 0o644, func(w io.Writer) error { return cli.WritePrettyJSON(w, res) })
		if err != nil {
			return fmt.Errorf("merge: summary: %w", err)
		}
	} else if err := w.Write(res); err != nil {
		return fmt.Errorf("merge: output: %w", err)
	}
	if !f.Quiet {
		trials.WriteSummaryTable(e.Stderr, res)
	}
	return nil
}

// openMergeOutput opens the output: stdout, or a temporary file beside
// OUT that commit renames into place, so a failed merge leaves OUT as it
// was.
func openMergeOutput(e *cli.Env, name string, force bool) (w *results.Writer, commit, abort func() error, err error) {
	f, err := results.CreateFile(name, e.Stdout, force)
	if err != nil {
		return nil, nil, nil, cli.OutputOpenError(err)
	}
	if e.Redact.Active() {
		f.Redact(e.Redact.JSON)
	}
	w, err = results.NewWriter(name, f)
	if err != nil {
		f.Abort()
		return nil, nil, nil, fmt.Errorf("merge: output: %w", err)
	}
	commit = func() error {
		if err := w.Close(); err != nil {
			f.Abort()
			return err
		}
		return f.Commit()
	}
	abort = func() error {
		f.Abort()
		return nil
	}
	return w, commit, abort, nil
}
