package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// commonFlags are the flags help lists first, in this order.
var commonFlags = []string{"output", "k", "grader", "concurrency", "timeout", "resume", "force", "quiet"}

// flagTopics are the sections of a command's help after the common flags,
// each with the flags it holds (a name, or a prefix ending in "*").
var flagTopics = []struct {
	title string
	names []string
}{
	{"Agent", []string{"cwd", "env", "secret-env", "mcp-server", "auth", "adapter", "agent", "agent-model", "permission", "session-mode",
		"startup-timeout", "cancel-grace", "cancel-after", "settle", "eof-grace", "fresh-process", "warm", "agent-stderr",
		"fs", "fs-max-bytes", "terminal", "terminal-timeout", "terminal-max-output", "max-agent-requests", "max-agent-bytes", "request-timeout", "no-model-gateway", "model-*", "working-limit"}},
	{"Workspace and sandbox", []string{"workspace*", "keep-workspaces", "sandbox*", "image*", "tasks", "cache-dir", "keep-layers",
		"agent-in-image", "task-timeout-scale"}},
	{"Grading", []string{"grader-timeout", "threshold", "prompts", "no-cache", "judge-cache*"}},
	{"Trials and statistics", []string{"seed", "resamples", "summary", "min-pass-*", "allow-grader-errors", "fail-on", "leave-out", "min-coverage", "adaptive",
		"min-k", "max-k", "ci-width", "pass-at"}},
	{"Output", []string{"junit", "markdown", "events", "max-record-bytes", "progress", "json", "title", "runs"}},
	{"Run control", []string{"max-cost", "max-tokens", "prices", "stop-on", "retries", "retry-on", "retry-backoff", "retry-errors", "allow-suite-change", "shard", "slurm*"}},
}

// groupedAbove is the number of flags from which help groups a command's
// flags by topic; fewer are listed as they are defined.
const groupedAbove = 20

// PrintFlags lists the flags of fs, grouped by topic when there are many.
func PrintFlags(w io.Writer, fs *pflag.FlagSet) {
	var all []*pflag.Flag
	fs.VisitAll(func(fl *pflag.Flag) {
		if !fl.Hidden {
			all = append(all, fl)
		}
	})
	if len(all) <= groupedAbove {
		fs.SortFlags = false
		fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
		return
	}
	section := func(title string, flags []*pflag.Flag) {
		if len(flags) == 0 {
			return
		}
		g := pflag.NewFlagSet(title, pflag.ContinueOnError)
		g.SortFlags = false
		for _, fl := range flags {
			g.AddFlag(fl)
		}
		fmt.Fprintf(w, "\n%s:\n%s", title, g.FlagUsages())
	}
	taken := map[string]bool{}
	var common []*pflag.Flag
	for _, name := range commonFlags {
		if fl := fs.Lookup(name); fl != nil && !fl.Hidden {
			common = append(common, fl)
			taken[name] = true
		}
	}
	section("Common flags", common)
	for _, t := range flagTopics {
		var flags []*pflag.Flag
		for _, fl := range all {
			if !taken[fl.Name] && slices.ContainsFunc(t.names, func(n string) bool { return matchFlag(n, fl.Name) }) {
				flags = append(flags, fl)
				taken[fl.Name] = true
			}
		}
		section(t.title+" flags", flags)
	}
	var rest []*pflag.Flag
	for _, fl := range all {
		if !taken[fl.Name] {
			rest = append(rest, fl)
		}
	}
	section("Other flags", rest)
}

// matchFlag says whether a topic's entry (a name, or a prefix ending in
// "*") names the flag.
func matchFlag(entry, name string) bool {
	if p, ok := strings.CutSuffix(entry, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return entry == name
}

// PrintCommandHelp writes a command's help: usage, description, flags
// (grouped by topic when there are many) and the exit statuses.
func PrintCommandHelp(w io.Writer, c *Command) {
	c.Flags.SortFlags = false
	fmt.Fprintf(w, "Usage: harness %s\n\n%s\n", c.Usage, c.Short)
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
	if c.Flags.HasFlags() {
		PrintFlags(w, c.Flags)
	}
	if c.Exits != "" {
		fmt.Fprint(w, "\n"+c.Exits)
		return
	}
	fmt.Fprint(w, "\n"+ExitCodesHelp)
}
