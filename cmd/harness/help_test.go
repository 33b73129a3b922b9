package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"harness/cli"
)

// TestHelpCoversOverview checks that every command the overview lists has
// help: "harness help NAME" succeeds and prints its usage line.
func TestHelpCoversOverview(t *testing.T) {
	var overview bytes.Buffer
	e := &cli.Env{Stdout: &overview, Stderr: &overview, Getenv: func(string) string { return "" }}
	if code := runMain(context.Background(), e, []string{"help"}); code != cli.ExitOK {
		t.Fatalf("harness help: exit %d", code)
	}
	_, list, ok := strings.Cut(overview.String(), "\nCommands:\n")
	if !ok {
		t.Fatalf("no command list in the overview:\n%s", overview.String())
	}
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for line := range strings.SplitSeq(list, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 {
			names = append(names, fields[0])
		}
	}
	if len(names) < 15 {
		t.Fatalf("the overview lists %d commands (%v), want every one, version included", len(names), names)
	}
	for _, name := range names {
		var out, errOut bytes.Buffer
		e := &cli.Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		if code := runMain(context.Background(), e, []string{"help", name}); code != cli.ExitOK {
			t.Errorf("harness help %s: exit %d: %s", name, code, errOut.String())
			continue
		}
		if !strings.HasPrefix(out.String(), "Usage: harness "+name) {
			t.Errorf("harness help %s: no usage line:\n%s", name, out.String())
		}
	}
}

// TestHelpGroupsFlags checks that the help of a command with many flags
// lists the common flags first, then the topics, and every flag once.
func TestHelpGroupsFlags(t *testing.T) {
	for _, name := range []string{"capture", "trials", "check", "grade"} {
		var out bytes.Buffer
		e := &cli.Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
		if code := runMain(context.Background(), e, []string{"help", name}); code != cli.ExitOK {
			t.Fatalf("harness help %s: exit %d", name, code)
		}
		help := out.String()
		common := strings.Index(help, "\nCommon flags:\n")
		agent := strings.Index(help, "\nAgent flags:\n")
		if common < 0 || agent < common || strings.Contains(help, "\nFlags:\n") {
			t.Errorf("harness help %s: no common flags before the agent's:\n%s", name, help)
		}
		c := findCommand(commands(), name)
		c.Flags.VisitAll(func(fl *pflag.Flag) {
			n := len(regexp.MustCompile(`(?m)^ +(-., )?--`+regexp.QuoteMeta(fl.Name)+`( |$)`).FindAllString(help, -1))
			switch {
			case fl.Hidden && n > 0:
				t.Errorf("harness help %s lists the deprecated --%s", name, fl.Name)
			case !fl.Hidden && n != 1:
				t.Errorf("harness help %s lists --%s %d times", name, fl.Name, n)
			}
		})
	}
}
