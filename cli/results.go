package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"harness/evaluation"
	"harness/graders"
	"harness/results"
	"harness/schemas"
)

// OutputOpenError is an error opening an output, with what to do about an
// existing one: exit 2.
func OutputOpenError(err error) error {
	var ee *results.ExistsError
	if errors.As(err, &ee) {
		if ee.Resumable {
			return Usagef("%v; use --resume to continue it or --force to overwrite it", err)
		}
		return Usagef("%v; use --force to overwrite it", err)
	}
	return Input(err)
}

// OutputError marks a failure to write the output (a full disk, an I/O
// error): the run stops and exits 2, never 1, which is the quality gate.
func OutputError(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return WithCode(ExitUsage, err)
}

// FirstLine is the first line of s.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Plural writes a count and a noun, with an s when the count is not 1.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ReadPromptsFlag reads the --prompts file.
func ReadPromptsFlag(e *Env, name string) ([]schemas.PromptCase, error) {
	r, err := results.Open(name, e.Stdin)
	if err != nil {
		return nil, Input(fmt.Errorf("--prompts: %w", err))
	}
	defer r.Close()
	cases, err := schemas.ReadPrompts(name, r)
	return cases, Input(err)
}

// MergeError words the errors of a merge and gives each its exit status.
func MergeError(err error) error {
	var stray *evaluation.StrayRecordsError
	var bad *evaluation.MergeInputError
	switch {
	case errors.As(err, &stray):
		p := stray.Problems(func(k int) string { return fmt.Sprintf("beyond -k %d", k) })
		return Input(p.Err("records that do not belong to this run"))
	case errors.As(err, &bad) && bad.Foreign:
		return WithCode(ExitForeign, err)
	case errors.As(err, &bad):
		return Input(err)
	}
	return err
}

// InputSources are the named files ("-" for stdin) as sources to read.
func InputSources(e *Env, names []string) []evaluation.Source {
	return evaluation.OpenSources(names, func(name string) (io.ReadCloser, error) {
		r, err := results.Open(name, e.Stdin)
		return r, Input(err)
	})
}

// SameFile reports whether two names are the same file.
func SameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// GraderFiles lists the files the graders run or read, with the sha256
// each had when it was loaded, for the records' provenance.
func GraderFiles(gs []graders.Grader) []schemas.GraderFile {
	var out []schemas.GraderFile
	for _, g := range gs {
		out = append(out, graders.Fingerprints(g)...)
	}
	return out
}

// RecordKey loads (creating on first use) the key harness signs the record
// lines it writes with.
func RecordKey(e *Env) (*results.Key, error) {
	path, err := results.KeyPath(e.Getenv)
	if err != nil {
		return nil, err
	}
	k, err := results.LoadKey(path)
	if err != nil {
		var bad *results.BadKeyError
		if errors.As(err, &bad) {
			err = fmt.Errorf("%w: `harness key -o FILE` makes one (point %s at it); to start over, remove this one (the records signed with it can then no longer be continued or merged)", err, results.KeyFileEnv)
		}
		return nil, WithCode(ExitUsage, err)
	}
	return k, nil
}

// ForeignError gives an error about lines harness did not write (in an
// output it continues, merges or has just written) its own exit status;
// other errors come back as they are.
func ForeignError(err error) error {
	var one *results.ForeignLineError
	var many *results.ForeignLinesError
	if errors.As(err, &one) || errors.As(err, &many) {
		return WithCode(ExitForeign, err)
	}
	return err
}

// CheckWritten reads a finished output back: every line in it must be one
// harness wrote there.
func CheckWritten(out *results.Output) error {
	if err := out.CheckWritten(); err != nil {
		var many *results.ForeignLinesError
		if errors.As(err, &many) {
			return WithCode(ExitForeign, err)
		}
		return fmt.Errorf("output: %w", err)
	}
	return nil
}
