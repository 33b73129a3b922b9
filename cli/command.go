package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/spf13/pflag"

	"harness/internal/buildinfo"
	"harness/internal/redact"
	"harness/schemas"
)

// Env is the outside world a command sees; tests replace every part of it.
type Env struct {
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	Getenv    func(string) string
	StderrTTY bool
	// StderrWidth is the width of the terminal stderr is, in columns (0:
	// not known).
	StderrWidth int
	// Signals delivers the second interrupt of a run (the first cancels
	// the context); nil means none will come.
	Signals <-chan os.Signal
	// Redact removes secrets from what an offline command writes: the
	// values of its --secret-env variables and of every variable whose
	// name looks like a credential. Set before the command runs.
	Redact *redact.Redactor
	// Said holds the notes written once per invocation (a suite's agents
	// each run the same tasks; their warnings are said once).
	Said map[string]bool
	// Version, when not empty, overrides the version read from the
	// binary's build information (set at build time).
	Version string
}

// Build is the version, VCS revision and dirty flag of this harness.
func (e *Env) Build() buildinfo.Info { return buildinfo.Read(e.Version) }

// Provenance is the harness part of a record's provenance.
func (e *Env) Provenance() schemas.Provenance {
	b := e.Build()
	return schemas.Provenance{Harness: b.Version, HarnessRevision: b.Revision, HarnessDirty: b.Dirty}
}

// Command is one subcommand: its flags, help text and what it does.
type Command struct {
	Name  string
	Usage string // after "harness ": "capture PROMPTS -- AGENT..."
	Short string
	Long  string // description, examples; exit codes are added for all
	// Exits, when set, is the exit status section of a command to which
	// not every status applies (default ExitCodesHelp).
	Exits string
	Agent bool // takes an agent command after --
	// OptionalAgent: the agent command after -- may be left out.
	OptionalAgent bool
	Flags         *pflag.FlagSet
	Run           func(ctx context.Context, e *Env, args, agent []string) error
	// SecretEnv holds the --secret-env values of a command that reads
	// results (the agent commands have their own).
	SecretEnv []string
}

// Operands splits the parsed command line into the command's arguments
// and the agent command after --; ok is false when the command needs an
// agent and none was given. A command without an agent takes what
// follows -- as arguments.
func (c *Command) Operands() (pos, agent []string, ok bool) {
	pos = c.Flags.Args()
	if dash := c.Flags.ArgsLenAtDash(); dash >= 0 {
		pos, agent = pos[:dash], pos[dash:]
	}
	if c.Agent && !c.OptionalAgent && len(agent) == 0 {
		return nil, nil, false
	}
	if !c.Agent && len(agent) > 0 {
		pos = append(pos, agent...)
	}
	return pos, agent, true
}

// SayOnce writes note to stderr unless this invocation wrote it already.
func (e *Env) SayOnce(note string) {
	if e.Said[note] {
		return
	}
	if e.Said == nil {
		e.Said = map[string]bool{}
	}
	e.Said[note] = true
	fmt.Fprint(e.Stderr, note)
}

// GraderWarn is where the graders of command cmd tell what their replies
// hold that harness does not read (graders.Options.Warn): a line on stderr
// each, safe for graders grading at the same time.
func (e *Env) GraderWarn(cmd string) func(string) {
	var mu sync.Mutex
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(e.Stderr, "harness %s: warning: grader %s\n", cmd, msg)
	}
}
