package evaluation

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"harness/capture"
	"harness/cost"
	"harness/results"
	"harness/runctl"
	"harness/schemas"
	"harness/trials"
)

// Options say what a run does. The zero value of every field but Config,
// Prompts and K is a sensible default.
type Options struct {
	// Config is how each unit runs: the agent command, its environment and
	// working directory, the workspace, timeouts, the sandbox and the
	// graders (Config.Grade). Run sets its Log and Control.
	Config capture.Config
	// Prompts is the source of the cases.
	Prompts Prompts
	// K is the number of trials of every case (1 for a capture run).
	K int
	// Shard, when set, runs only one share of the units.
	Shard Shard
	// Output is where the records go: a file ("" or "-": Stdout).
	Output string
	// Stdout is the standard output, for an Output of "" or "-".
	Stdout io.Writer
	// Resume continues an existing output, running only the units it does
	// not hold yet; RetryErrors also runs again the units whose record has
	// an error. Force empties an existing output instead.
	Resume, RetryErrors, Force bool
	// RerunChanged, with Resume, runs again the units of the cases whose
	// content changed since the output's records of them were written
	// (their records taken out); without it such records stop the resume
	// with a *ChangedCasesError.
	RerunChanged bool
	// Key signs the lines written, and checks those resumed.
	Key *results.Key
	// Redact removes secrets from every line written.
	Redact func([]byte) []byte
	// GraderFiles go into the provenance of every graded record.
	GraderFiles []schemas.GraderFile
	// Prices and AgentModel price each record's tokens.
	Prices     cost.Table
	AgentModel string
	// Limits are the budget and the stop rule.
	Limits runctl.Limits
	// Trials, when set, writes a trials record per case and the summary
	// instead of the capture records.
	Trials *TrialsOptions
	// JUnit and Markdown, when set, are files the reports of the whole
	// output are written to after the run.
	JUnit, Markdown string
	// Events receives the run's events; nil drops them.
	Events Events
}

// TrialsOptions are the options of a run that writes trials records.
type TrialsOptions struct {
	// FailOn holds error classes or owners counted in n as failures
	// instead of being left out; LeaveOut those left out of n instead of
	// counted (trials.NewCounting).
	FailOn, LeaveOut []string
	// Adaptive, when set, gives each case trials until its interval is
	// narrow enough (Options.K is then ignored for Adaptive.MinK).
	Adaptive *trials.Policy
	// SummaryPath is the file the summary goes to; "" appends it to the
	// output as its last line.
	SummaryPath string
	// Seed and Resamples drive the summary's bootstrap intervals.
	Seed      uint64
	Resamples int
	// CreatePartial makes the partial file (where the trials of cases in
	// progress wait) before any agent starts, so that a sandbox, which
	// binds only files that exist, can keep it out of the agent's reach.
	CreatePartial bool
}

// Shard is share I of N of a run's units (1-based I); the zero Shard is
// the whole run.
type Shard struct{ I, N int }

// ParseShard reads "I/N".
func ParseShard(s string) (Shard, error) {
	var sh Shard
	if _, err := fmt.Sscanf(s, "%d/%d", &sh.I, &sh.N); err != nil || sh.N < 1 || sh.I < 1 || sh.I > sh.N {
		return Shard{}, fmt.Errorf("%q: want I/N with 1 <= I <= N", s)
	}
	return sh, nil
}

// has says whether the shard holds the n-th unit of the run (1-based).
func (s Shard) has(n int) bool {
	return s.N == 0 || (n-1)%s.N == s.I-1
}

// Validate checks the options that do not depend on the outside world.
func (o *Options) Validate() error {
	var errs []error
	if o.K < 1 {
		errs = append(errs, errors.New("k must be at least 1"))
	}
	if o.Prompts.Path == "" {
		errs = append(errs, errors.New("no prompts file"))
	}
	if o.Resume && o.Force {
		errs = append(errs, errors.New("resume and force contradict each other"))
	}
	if o.RetryErrors && !o.Resume {
		errs = append(errs, errors.New("retrying errors needs resume"))
	}
	if !o.isFile() && o.Resume {
		errs = append(errs, errors.New("resume needs an output file"))
	}
	if o.Trials != nil && o.Trials.Adaptive != nil {
		if o.Shard.N > 0 {
			errs = append(errs, errors.New("an adaptive run decides each case's next trials from its finished ones: it cannot be sharded"))
		}
		if err := o.Trials.Adaptive.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (o *Options) isFile() bool { return o.Output != "" && o.Output != "-" }

// partialPath is the file where the finished trials of unfinished cases
// wait: beside the output file ("" when writing to standard output).
func (o *Options) partialPath() string {
	if !o.isFile() {
		return ""
	}
	return o.Output + ".partial"
}

// Prompts is a prompts file.
type Prompts struct {
	// Name is the file as the user named it ("-" for standard input): in
	// errors, and the directory relative workspace and image paths of its
	// cases are resolved against.
	Name string
	// Path is where to read it (a copy, for standard input).
	Path string
}

// Scan reads the prompts file, calling fn with each case, its relative
// workspace, image and simulated user paths resolved against the file's directory.
func (p Prompts) Scan(fn func(lineNo int, c *schemas.PromptCase) error) error {
	r, err := results.Open(p.Path, nil)
	if err != nil {
		return fmt.Errorf("prompts: %w", err)
	}
	defer r.Close()
	return schemas.ScanPrompts(p.Name, r, func(lineNo int, c schemas.PromptCase) error {
		if c.Workspace != "" && !filepath.IsAbs(c.Workspace) && p.Name != "-" {
			c.Workspace = filepath.Join(filepath.Dir(p.Name), c.Workspace)
		}
		if c.Image != "" && (strings.HasPrefix(c.Image, "./") || strings.HasPrefix(c.Image, "../")) && p.Name != "-" {
			c.Image = filepath.Join(filepath.Dir(p.Name), c.Image)
		}
		if c.User != nil {
			c.User = ResolveUser(c.User, p.Name)
		}
		return fn(lineNo, &c)
	})
}

// ResolveUser is a case's simulated user with its paths taken relative
// to the file that names it (name; "-" is standard input: the working
// directory): a command's ./ or ../ path, kept a path; a prompt file, read
// into the prompt (one that cannot be read stays named, its path
// resolved, for Survey to report).
func ResolveUser(user *schemas.SimUser, name string) *schemas.SimUser {
	u := *user
	dir := filepath.Dir(name)
	if name == "-" {
		dir = "."
	}
	if len(u.Command) > 0 && name != "-" {
		u.Command = slices.Clone(u.Command)
		if cmd := u.Command[0]; strings.HasPrefix(cmd, "./") || strings.HasPrefix(cmd, "../") {
			// Kept a path (never looked up in PATH).
			u.Command[0] = "./" + filepath.Join(dir, cmd)
			if filepath.IsAbs(dir) {
				u.Command[0] = filepath.Join(dir, cmd)
			}
		}
	}
	if u.PromptFile != "" {
		path := u.PromptFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		u.PromptFile = path
		if b, err := os.ReadFile(path); err == nil {
			u.Prompt, u.PromptFile = string(b), ""
		}
	}
	return &u
}

// ErrStop, returned by the function given to Scan, ends the scan early.
var ErrStop = errors.New("stop")
