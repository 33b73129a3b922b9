package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"harness/evaluation"
	"harness/graders"
	"harness/judgecache"
	"harness/results"
	"harness/review"
	"harness/rundir"
	"harness/schemas"
)

// ReviewInput opens an input file ("-" for stdin), decompressing by name.
// A missing file is an input error (exit 2).
func ReviewInput(e *Env, name string) (io.ReadCloser, error) {
	r, err := results.Open(name, e.Stdin)
	if err != nil {
		return nil, Input(err)
	}
	return r, nil
}

// WriteOutput writes a command's whole output through write to path (""
// or "-" is stdout): on success the file appears, on failure nothing does.
func WriteOutput(e *Env, path string, force bool, write func(io.Writer) error) error {
	out, err := ReviewOutput(e, path, force)
	if err != nil {
		return err
	}
	if err := write(out); err != nil {
		out.Abort()
		return err
	}
	return out.Commit()
}

// WriteRecords writes a whole output of records (see ReviewOutput): write
// is given the output's writer; the file is renamed into place only when
// write and the writer's close succeed, else nothing is left.
func WriteRecords(e *Env, path string, force bool, write func(w *results.Writer) error) error {
	return WriteOutput(e, path, force, func(out io.Writer) error {
		w, err := results.NewWriter(path, out)
		if err != nil {
			return err
		}
		err = write(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// WritePrettyJSON writes v as indented JSON (2 spaces, no HTML escaping)
// with a final newline.
func WritePrettyJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ReviewInputErr marks schema-level input errors (bad lines, mixed formats)
// as exit 2 and leaves other errors alone.
func ReviewInputErr(err error) error {
	if err == nil {
		return nil
	}
	var ie *schemas.InputError
	if errors.As(err, &ie) {
		return Input(err)
	}
	return err
}

// ProgressTo is where progress and warnings go: stderr, or nowhere when
// quiet.
func ProgressTo(e *Env, quiet bool) io.Writer {
	if quiet {
		return nil
	}
	return e.Stderr
}

// ReviewOutput opens path for writing a whole output ("" or "-" is stdout):
// a file written under a temporary name and renamed into place by Commit,
// so a failed command leaves no partial file and never touches an existing
// one without --force.
func ReviewOutput(e *Env, path string, force bool) (*results.File, error) {
	f, err := results.CreateFile(path, e.Stdout, force)
	if err != nil {
		return nil, OutputOpenError(err)
	}
	if e.Redact.Active() {
		f.Redact(e.Redact.JSON)
	}
	return f, nil
}

// LoadReviewGrader loads -g for calibrate and validate-refs (cmd), with
// the --threshold given (nil: each grader's own).
func LoadReviewGrader(e *Env, cmd, spec string, to time.Duration, threshold *float64, cache *judgecache.Cache) (graders.Grader, review.GradeFunc, error) {
	wd, _ := os.Getwd()
	g, err := graders.Load(spec, graders.Options{Timeout: to, Getenv: e.Getenv, Dir: wd, JudgeCache: cache, Warn: e.GraderWarn(cmd), Threshold: threshold})
	if err != nil {
		return nil, nil, Input(err)
	}
	fn := func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) schemas.GraderResult {
		return g.Grade(ctx, &graders.Input{Record: rec, Case: c})
	}
	return g, fn, nil
}

// ParseSeed reads a --seed value (any unsigned 64-bit integer).
func ParseSeed(s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, Usagef("--seed %q: want a whole number ≥ 0", s)
	}
	return v, nil
}

// SummaryBeside is where a run's summary goes by default: beside the
// output file, named after it with its .jsonl (or .json) and compression
// suffixes dropped (trials.jsonl.zst: trials.summary.json), or "" for
// standard output, where it is the last line.
func SummaryBeside(output string) string {
	if output == "" || output == "-" {
		return ""
	}
	if st, err := os.Stat(output); err == nil && !st.Mode().IsRegular() {
		return "" // a FIFO or device: the summary follows the records
	}
	base := output
	for _, ext := range []string{".zst", ".gz", ".jsonl", ".json"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base + ".summary.json"
}

// AgentEnvironment is the agent's environment: harness's own plus the
// --env KEY=VALUE entries; secrets are the values of the --secret-env
// variables, from either.
func AgentEnvironment(env, secretEnv []string, getenv func(string) string) (agentEnv, secrets []string, err error) {
	agentEnv, secrets, err = evaluation.AgentEnvironment(evaluation.EnvOptions{Environ: os.Environ(), Set: env,
		SecretNames: secretEnv, Getenv: getenv})
	if err != nil {
		return nil, nil, Usagef("--env %v", err)
	}
	return agentEnv, secrets, nil
}

// ResultsArgs resolves a command's results arguments: a run directory
// stands for its agents' outputs, RUNDIR:AGENT for one of them
// (rundir.Expand). What cannot be resolved is an input error.
func ResultsArgs(args []string) ([]string, error) {
	in, err := rundir.ExpandAll(args)
	if err != nil {
		return nil, Input(err)
	}
	return rundir.Files(in), nil
}

// OneResults is the one results file arg names for a command that reads
// one: a run directory of several agents must be narrowed to one of them.
func OneResults(arg string) (string, error) {
	in, err := rundir.Expand(arg)
	if err != nil {
		return "", Input(err)
	}
	if len(in) > 1 {
		var names []string
		for _, x := range in {
			names = append(names, x.Agent)
		}
		return "", Usagef("%s holds the outputs of %d agents (%s): name one, as in %s:%s", arg, len(in), strings.Join(names, ", "), arg, names[0])
	}
	return in[0].File, nil
}
