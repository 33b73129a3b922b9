// Command harness evaluates coding agents that speak the Agent Client
// Protocol: it captures trajectories, grades them, and computes pass@k and
// pass^k over repeated trials. Run "harness help" for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"harness/sandbox"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"harness/image"
	"harness/internal/buildinfo"
	"harness/internal/orphans"
	"harness/internal/redact"
	"harness/internal/suggest"
	"harness/schemas"
)

// version, when set at build time with -ldflags "-X main.version=...",
// overrides the version read from the binary's build information.
var version = ""

// provenance is the harness part of a record's provenance.
func provenance() schemas.Provenance {
	b := buildinfo.Read(version)
	return schemas.Provenance{Harness: b.Version, HarnessRevision: b.Revision, HarnessDirty: b.Dirty}
}

// Exit codes, documented in the help text and the README.
const (
	exitOK          = 0
	exitGateFailed  = 1
	exitUsage       = 2
	exitInfraErrors = 3
	exitBudget      = 4
	exitForeign     = 5
	exitInterrupted = 130
)

const exitCodesHelp = `Exit status:
  0    success
  1    the run completed but a declared gate failed (--min-pass-rate, a misjudged reference)
  2    usage or input error (nothing run, no output touched), or the output could not be written
  3    the run completed with infrastructure errors (agent crash, timeout, grader error)
  4    the budget (--max-cost, --max-tokens) was spent: no new work started; --resume continues
  5    an output, partial or shard file holds lines harness did not write (named FILE:LINE); its records cannot be trusted
  130  interrupted; the output holds every finished record
`

// env is the outside world a command sees; tests replace every part of it.
type env struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	getenv    func(string) string
	stderrTTY bool
	// signals delivers the second interrupt of a run (the first cancels the
	// context); nil means none will come.
	signals <-chan os.Signal
	// redact removes secrets from what an offline command writes: the
	// values of its --secret-env variables and of every variable whose
	// name looks like a credential. Set by runMain.
	redact *redact.Redactor
	// said holds the notes written once per invocation (a suite's agents
	// each run the same tasks; their warnings are said once).
	said map[string]bool
}

// command is one subcommand: its flags, help text and what it does.
type command struct {
	name  string
	usage string // after "harness ": "capture PROMPTS -- AGENT..."
	short string
	long  string // description, examples; exit codes are added for all
	agent bool   // takes an agent command after --
	// optionalAgent: the agent command after -- may be left out.
	optionalAgent bool
	flags         *pflag.FlagSet
	run           func(ctx context.Context, e *env, args, agent []string) error
	// secretEnv holds the --secret-env values of a command that reads
	// results (the agent commands have their own).
	secretEnv []string
}

// exitError carries the process exit status of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports bad flags, arguments or input: exit 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// inputError marks err as bad input (exit 2).
func inputError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitUsage, err: err}
}

// withCode returns err with the given exit status.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// commands returns the subcommand table, in the order help lists it.
func commands() []*command {
	cmds := []*command{
		newCaptureCmd(),
		newTrialsCmd(),
		newGradeCmd(),
		newSummarizeCmd(),
		newCalibrateCmd(),
		newValidateRefsCmd(),
		newBalanceCmd(),
		newCompareCmd(),
		newTrialsNeededCmd(),
		newReportCmd(),
		newViewCmd(),
		newMergeCmd(),
		newCheckCmd(),
		newSchemasCmd(),
		newExportCmd(),
		newReplayCmd(),
		newRunCmd(),
	}
	for _, c := range cmds {
		if !c.agent && c.name != "schemas" && c.name != "balance" {
			c.flags.StringArrayVar(&c.secretEnv, "secret-env", nil, "redact the value of environment variable `NAME` from all output; repeatable (API key variables are redacted anyway)")
		}
	}
	return cmds
}

func main() {
	if code, ok := sandbox.HelperMain(); ok {
		os.Exit(code) // harness started as a part of a sandbox
	}
	// The init of a command run in a task image (package image): the
	// binary re-executes itself in namespaces of its own.
	if len(os.Args) > 1 && os.Args[1] == image.InitArg {
		os.Exit(image.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(mainExit())
}

// mainExit runs harness with the process's arguments, streams and signals:
// the first SIGINT or SIGTERM cancels the run's context, a second one kills
// the agents at once.
func mainExit() int {
	// Descendants of agents, terminal commands and graders that leave
	// their process group are reparented to harness, which kills them
	// when what started them ends (internal/orphans).
	orphans.Enable()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	second := make(chan os.Signal, 1)
	go func() {
		<-ctx.Done()
		// The second signal's handler is in place before the first's is
		// removed: no signal in between takes the default action.
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		stop()
	}()
	e := &env{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		getenv:    os.Getenv,
		stderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		signals:   second,
	}
	return runMain(ctx, e, os.Args[1:])
}

// runMain runs the command line args and returns the exit status.
func runMain(ctx context.Context, e *env, args []string) int {
	cmds := commands()
	if code, done := helpOrVersion(e, cmds, args); done {
		return code
	}
	c := findCommand(cmds, args[0])
	if c == nil {
		fmt.Fprintf(e.stderr, "harness: unknown command %q\nRun 'harness help' for the list of commands.\n", args[0])
		return exitUsage
	}
	c.flags.SetOutput(io.Discard)
	c.flags.SortFlags = false
	if err := c.flags.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printCommandHelp(e.stdout, c)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "harness %s: %v%s\nusage: harness %s\nRun 'harness help %s' for details.\n", c.name, err, flagHint(c, err, args[1:]), c.usage, c.name)
		return exitUsage
	}
	warnDeprecated(e.stderr, c, args[1:])
	pos, agent, ok := c.operands()
	if !ok {
		fmt.Fprintf(e.stderr, "harness %s: no agent command: put it after --, as in\n  harness %s\n", c.name, c.usage)
		return exitUsage
	}
	if !c.agent {
		// The offline commands stream records through a small live heap
		// and allocate fast; collecting less often roughly doubles their
		// read speed for a few tens of MB.
		debug.SetGCPercent(400)
	}
	var values []string
	for _, name := range c.secretEnv {
		if v := e.getenv(name); v != "" {
			values = append(values, v)
		}
	}
	e.redact = redact.New(values, os.Environ())
	return reportError(e.stderr, c.name, e.redactError(c.run(ctx, e, pos, agent)))
}

// helpOrVersion answers no arguments, help and version; done says it did.
func helpOrVersion(e *env, cmds []*command, args []string) (code int, done bool) {
	if len(args) == 0 {
		printOverview(e.stderr, cmds)
		return exitUsage, true
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			if c := findCommand(cmds, args[1]); c != nil {
				printCommandHelp(e.stdout, c)
				return exitOK, true
			}
			if args[1] == "version" {
				fmt.Fprintf(e.stdout, "Usage: harness version\n\n%s\n\nAlso: harness --version, harness -v.\n", versionShort)
				return exitOK, true
			}
			fmt.Fprintf(e.stderr, "harness: unknown command %q\n", args[1])
			return exitUsage, true
		}
		printOverview(e.stdout, cmds)
		return exitOK, true
	case "-v", "--version", "version":
		fmt.Fprintf(e.stdout, "harness %s\n", buildinfo.Read(version))
		return exitOK, true
	}
	return 0, false
}

// operands splits the parsed command line into the command's arguments
// and the agent command after --; ok is false when the command needs an
// agent and none was given. A command without an agent takes what
// follows -- as arguments.
func (c *command) operands() (pos, agent []string, ok bool) {
	pos = c.flags.Args()
	if dash := c.flags.ArgsLenAtDash(); dash >= 0 {
		pos, agent = pos[:dash], pos[dash:]
	}
	if c.agent && !c.optionalAgent && len(agent) == 0 {
		return nil, nil, false
	}
	if !c.agent && len(agent) > 0 {
		pos = append(pos, agent...)
	}
	return pos, agent, true
}

// redactError takes the run's secrets out of an error's text, keeping
// its exit status.
func (e *env) redactError(err error) error {
	if err == nil || !e.redact.Active() {
		return err
	}
	var ee *exitError
	code := 1
	if errors.As(err, &ee) {
		code = ee.code
	}
	return withCode(code, errors.New(e.redact.String(err.Error())))
}

// reportError prints err (if any) and maps it to an exit status.
func reportError(w io.Writer, name string, err error) int {
	if err == nil {
		return exitOK
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		for _, line := range strings.Split(msg, "\n") {
			fmt.Fprintf(w, "harness %s: %s\n", name, line)
		}
	}
	return code
}

func findCommand(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

// versionShort describes the version command, which has no flags and so
// no entry in the command table.
const versionShort = "version, VCS revision and dirty flag of this build"

func printOverview(w io.Writer, cmds []*command) {
	fmt.Fprintf(w, "harness %s: evaluate coding agents that speak the Agent Client Protocol.\n\n", buildinfo.Read(version).Version)
	fmt.Fprintln(w, "Usage: harness <command> [flags] [args] [-- agent command...]")
	fmt.Fprintln(w, "\nCommands:")
	width := len("version")
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.short)
	}
	fmt.Fprintf(w, "  %-*s  %s\n", width, "version", versionShort)
	fmt.Fprintln(w, "\nRun 'harness help <command>' or 'harness <command> --help' for its flags and examples.")
	fmt.Fprintln(w, "Durations take Go syntax (90s, 2m); a bare number means milliseconds.")
	fmt.Fprint(w, "\n"+exitCodesHelp)
}

func printCommandHelp(w io.Writer, c *command) {
	c.flags.SortFlags = false
	fmt.Fprintf(w, "Usage: harness %s\n\n%s\n", c.usage, c.short)
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	if c.flags.HasFlags() {
		printFlags(w, c.flags)
	}
	fmt.Fprint(w, "\n"+exitCodesHelp)
}

// flagHint adds to an unknown-flag error the flag that was probably meant
// and, for a command that runs an agent, where the flag goes: the agent's
// own flags after --; for harness run, a run flag in the suite file, which
// is where harness run takes them from.
func flagHint(c *command, err error, args []string) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		if strings.HasPrefix(msg, "unknown shorthand flag: ") && c.agent {
			return "\n(agent flags go after --, as in: harness " + agentUsage(c) + " -- AGENT FLAGS...)"
		}
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	if c.name == "run" {
		// A flag of trials is a run flag, set in the suite file.
		tc, _ := newTrialsCmdWith(&runFlags{})
		tf := tc.flags
		inSuite := func(n string) bool { return tf.Lookup(n) != nil && !slices.Contains(runFlagsSetByRun, n) }
		flag := name
		if !inSuite(flag) && closestFlag(c.flags, name) == "" {
			flag = closestFlag(tf, name)
		}
		if flag != "" && inSuite(flag) {
			value := flagValue(args, name)
			if value == "" {
				value = "..."
			}
			meant := ""
			if flag != name {
				meant = fmt.Sprintf("\ndid you mean --%s?", flag)
			}
			return fmt.Sprintf("%s\n(--%s is a run flag, which harness run takes from the suite file: write %s: %s in the suite, or under an agent's flags: for that agent alone)", meant, flag, flag, value)
		}
	}
	best := closestFlag(c.flags, name)
	hint := ""
	if best != "" {
		hint = fmt.Sprintf("\ndid you mean --%s?", best)
	}
	if c.agent {
		hint += "\n(if --" + name + " is the agent's flag, put it after --: harness " + agentUsage(c) + " -- AGENT --" + name + ")"
	}
	return hint
}

// agentUsage is a command's usage up to the agent command.
func agentUsage(c *command) string {
	switch c.name {
	case "run":
		return "run SUITE [flags]"
	case "check":
		return "check [flags]"
	}
	return c.name + " PROMPTS [flags]"
}

// flagValue is the value given to --name in args (--name=V or --name V),
// or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			return args[i+1]
		}
	}
	return ""
}

// closestFlag is the flag of fs whose name is nearest to name (see
// suggest.Nearest), or "".
func closestFlag(fs *pflag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return suggest.Nearest(name, names)
}
