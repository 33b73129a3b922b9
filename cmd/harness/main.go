// Command harness evaluates coding agents that speak the Agent Client
// Protocol: it captures trajectories, grades them, and computes pass@k and
// pass^k over repeated trials. Run "harness help" for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"harness/cli"
	"harness/cli/balancecmd"
	"harness/cli/calibratecmd"
	"harness/cli/checkcmd"
	"harness/cli/comparecmd"
	"harness/cli/exportcmd"
	"harness/cli/gradecmd"
	"harness/cli/imagescmd"
	"harness/cli/keycmd"
	"harness/cli/mergecmd"
	"harness/cli/neededcmd"
	"harness/cli/replaycmd"
	"harness/cli/reportcmd"
	"harness/cli/schemascmd"
	"harness/cli/summarizecmd"
	"harness/cli/validaterefscmd"
	"harness/cli/viewcmd"
	"harness/image"
	"harness/internal/orphans"
	"harness/internal/redact"
	"harness/internal/suggest"
	"harness/sandbox"
)

// version, when set at build time with -ldflags "-X main.version=...",
// overrides the version read from the binary's build information.
var version = ""

// commands returns the subcommand table, in the order help lists it.
func commands() []*cli.Command {
	cmds := []*cli.Command{
		newCaptureCmd(),
		newTrialsCmd(),
		gradecmd.NewCmd(),
		summarizecmd.NewCmd(),
		calibratecmd.NewCmd(),
		validaterefscmd.NewCmd(),
		balancecmd.NewCmd(),
		imagescmd.NewCmd(),
		comparecmd.NewCmd(),
		neededcmd.NewCmd(),
		reportcmd.NewCmd(),
		viewcmd.NewCmd(),
		mergecmd.NewCmd(),
		checkcmd.NewCmd(),
		schemascmd.NewCmd(),
		keycmd.NewCmd(),
		exportcmd.NewCmd(),
		replaycmd.NewCmd(),
		newRunCmd(),
	}
	for _, c := range cmds {
		if !c.Agent && c.Name != "schemas" && c.Name != "balance" && c.Name != "key" {
			c.Flags.StringArrayVar(&c.SecretEnv, "secret-env", nil, "redact the value of environment variable `NAME` from all output; repeatable (API key variables are redacted anyway)")
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
	e := &cli.Env{
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		Getenv:    os.Getenv,
		StderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		Signals:   second,
		Version:   version,
	}
	if e.StderrTTY {
		e.StderrWidth, _, _ = term.GetSize(int(os.Stderr.Fd()))
	}
	return runMain(ctx, e, os.Args[1:])
}

// runMain runs the command line args and returns the exit status.
func runMain(ctx context.Context, e *cli.Env, args []string) int {
	cmds := commands()
	if code, done := helpOrVersion(e, cmds, args); done {
		return code
	}
	c := findCommand(cmds, args[0])
	if c == nil {
		meant := ""
		if best := closestCommand(cmds, args[0]); best != "" {
			meant = fmt.Sprintf("\ndid you mean harness %s?", best)
		}
		fmt.Fprintf(e.Stderr, "harness: unknown command %q%s\nRun 'harness help' for the list of commands.\n", args[0], meant)
		return cli.ExitUsage
	}
	c.Flags.SetOutput(io.Discard)
	c.Flags.SortFlags = false
	if err := c.Flags.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			cli.PrintCommandHelp(e.Stdout, c)
			return cli.ExitOK
		}
		fmt.Fprintf(e.Stderr, "harness %s: %v%s\nusage: harness %s\nRun 'harness help %s' for details.\n", c.Name, err, flagHint(c, err, args[1:]), c.Usage, c.Name)
		return cli.ExitUsage
	}
	cli.WarnDeprecated(e.Stderr, c, args[1:])
	pos, agent, ok := c.Operands()
	if !ok {
		fmt.Fprintf(e.Stderr, "harness %s: no agent command: put it after --, as in\n  harness %s\n", c.Name, c.Usage)
		return cli.ExitUsage
	}
	if !c.Agent {
		// The offline commands stream records through a small live heap
		// and allocate fast; collecting less often roughly doubles their
		// read speed for a few tens of MB.
		debug.SetGCPercent(400)
	}
	var values []string
	for _, name := range c.SecretEnv {
		if v := e.Getenv(name); v != "" {
			values = append(values, v)
		}
	}
	e.Redact = redact.New(values, os.Environ())
	return cli.Report(e.Stderr, c.Name, e.RedactError(c.Run(ctx, e, pos, agent)))
}

// helpOrVersion answers no arguments, help and version; done says it did.
func helpOrVersion(e *cli.Env, cmds []*cli.Command, args []string) (code int, done bool) {
	if len(args) == 0 {
		printOverview(e.Stderr, cmds, e.Build().Version)
		return cli.ExitUsage, true
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			if c := findCommand(cmds, args[1]); c != nil {
				cli.PrintCommandHelp(e.Stdout, c)
				return cli.ExitOK, true
			}
			if args[1] == "version" {
				fmt.Fprintf(e.Stdout, "Usage: harness version\n\n%s\n\nAlso: harness --version, harness -v.\n", versionShort)
				return cli.ExitOK, true
			}
			meant := ""
			if best := closestCommand(cmds, args[1]); best != "" {
				meant = fmt.Sprintf("\ndid you mean harness help %s?", best)
			}
			fmt.Fprintf(e.Stderr, "harness: unknown command %q%s\n", args[1], meant)
			return cli.ExitUsage, true
		}
		printOverview(e.Stdout, cmds, e.Build().Version)
		return cli.ExitOK, true
	case "-v", "--version", "version":
		fmt.Fprintf(e.Stdout, "harness %s\n", e.Build())
		return cli.ExitOK, true
	}
	return 0, false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// versionShort describes the version command, which has no flags and so
// no entry in the command table.
const versionShort = "version, VCS revision and dirty flag of this build"

func printOverview(w io.Writer, cmds []*cli.Command, build string) {
	fmt.Fprintf(w, "harness %s: evaluate coding agents that speak the Agent Client Protocol.\n\n", build)
	fmt.Fprintln(w, "Usage: harness <command> [flags] [args] [-- agent command...]")
	fmt.Fprintln(w, "\nCommands:")
	width := len("version")
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Short)
	}
	fmt.Fprintf(w, "  %-*s  %s\n", width, "version", versionShort)
	fmt.Fprintln(w, "\nRun 'harness help <command>' or 'harness <command> --help' for its flags and examples.")
	fmt.Fprintln(w, "Durations take Go syntax (90s, 2m); a bare number means milliseconds.")
	fmt.Fprint(w, "\n"+cli.ExitCodesHelp)
}

// flagHint adds to an unknown-flag error the flag that was probably meant
// and, for a command that runs an agent, where the flag goes: the agent's
// own flags after --; for harness run, a run flag in the suite file, which
// is where harness run takes them from.
func flagHint(c *cli.Command, err error, args []string) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		if strings.HasPrefix(msg, "unknown shorthand flag: ") && c.Agent {
			return "\n(agent flags go after --, as in: harness " + agentUsage(c) + " -- AGENT FLAGS...)"
		}
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	if c.Name == "run" {
		// A flag of trials is a run flag, set in the suite file.
		tc, _ := newTrialsCmdWith(&runFlags{})
		tf := tc.Flags
		inSuite := func(n string) bool { return tf.Lookup(n) != nil && !slices.Contains(runFlagsSetByRun, n) }
		flag := name
		if !inSuite(flag) && closestFlag(c.Flags, name) == "" {
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
	best := closestFlag(c.Flags, name)
	hint := ""
	if best != "" {
		hint = fmt.Sprintf("\ndid you mean --%s?", best)
	}
	if c.Agent {
		hint += "\n(if --" + name + " is the agent's flag, put it after --: harness " + agentUsage(c) + " -- AGENT --" + name + ")"
	}
	return hint
}

// agentUsage is a command's usage up to the agent command.
func agentUsage(c *cli.Command) string {
	switch c.Name {
	case "run":
		return "run SUITE [flags]"
	case "check":
		return "check [flags]"
	}
	return c.Name + " PROMPTS [flags]"
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
	return nearestOrPrefixed(name, names)
}

// nearestOrPrefixed is the known name nearest to name (suggest.Nearest),
// else the one known name that name begins (--out for --output), if it is
// three letters or more.
func nearestOrPrefixed(name string, known []string) string {
	if best := suggest.Nearest(name, known); best != "" || slices.Contains(known, name) {
		return best
	}
	if len(name) < 3 {
		return ""
	}
	found := ""
	for _, k := range known {
		if strings.HasPrefix(k, name) {
			if found != "" {
				return ""
			}
			found = k
		}
	}
	return found
}

// closestCommand is the command name nearest to a mistyped one.
func closestCommand(cmds []*cli.Command, name string) string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	return nearestOrPrefixed(name, names)
}
