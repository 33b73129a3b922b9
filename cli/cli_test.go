package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestDurationFlags: every duration flag takes Go syntax or a bare number
// of milliseconds, refuses a negative one, and shows its default as a user
// would write it.
func TestDurationFlags(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
		err  bool
	}{
		{"90s", 90 * time.Second, false},
		{"2m", 2 * time.Minute, false},
		{"250", 250 * time.Millisecond, false},
		{"1.5", 1500 * time.Microsecond, false},
		{"-1", 0, true},
		{"-2s", 0, true},
		{"soon", 0, true},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		var d time.Duration
		DurationVarP(fs, &d, "timeout", "t", time.Minute, "")
		err := fs.Parse([]string{"--timeout", tc.arg})
		if (err != nil) != tc.err {
			t.Errorf("--timeout %s: error %v, want error %v", tc.arg, err, tc.err)
			continue
		}
		if !tc.err && d != tc.want {
			t.Errorf("--timeout %s = %v, want %v", tc.arg, d, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0", 60 * time.Second: "60s", 5 * time.Minute: "5m",
		250 * time.Millisecond: "250ms", 90 * time.Second: "90s", 1500 * time.Microsecond: "1.5ms"} {
		v := durationValue(d)
		if got := v.String(); got != want {
			t.Errorf("%v shows as %q, want %q", d, got, want)
		}
	}
}

// TestExitStatuses: an error's exit status is the one it was given, 1 for
// any other error, and the report prints every line of it after the
// command's name.
func TestExitStatuses(t *testing.T) {
	wrapped := fmt.Errorf("reading: %w", Usagef("bad %s", "flag"))
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("plain"), 1},
		{Usagef("x"), ExitUsage},
		{Input(errors.New("x")), ExitUsage},
		{WithCode(ExitBudget, errors.New("x")), ExitBudget},
		{wrapped, ExitUsage},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if Input(nil) != nil {
		t.Error("Input(nil) is not nil")
	}
	var out bytes.Buffer
	code := Report(&out, "grade", WithCode(ExitForeign, errors.New("line one\nline two")))
	if code != ExitForeign || out.String() != "harness grade: line one\nharness grade: line two\n" {
		t.Errorf("Report: exit %d, printed %q", code, out.String())
	}
}

// TestOperands: the arguments before -- are the command's; after it, the
// agent command, which a command that takes no agent reads as arguments.
func TestOperands(t *testing.T) {
	parse := func(c *Command, args ...string) {
		c.Flags = pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
		c.Flags.BoolP("quiet", "q", false, "")
		if err := c.Flags.Parse(args); err != nil {
			t.Fatal(err)
		}
	}
	capture := &Command{Name: "capture", Agent: true}
	parse(capture, "p.jsonl", "-q", "--", "agent", "-q")
	pos, agent, ok := capture.Operands()
	if !ok || strings.Join(pos, " ") != "p.jsonl" || strings.Join(agent, " ") != "agent -q" {
		t.Errorf("capture: %q %q %v", pos, agent, ok)
	}
	parse(capture, "p.jsonl")
	if _, _, ok := capture.Operands(); ok {
		t.Error("capture without an agent command was accepted")
	}
	grade := &Command{Name: "grade"}
	parse(grade, "a.jsonl", "--", "-b.jsonl")
	if pos, _, ok := grade.Operands(); !ok || strings.Join(pos, " ") != "a.jsonl -b.jsonl" {
		t.Errorf("grade: %q %v", pos, ok)
	}
}

// TestHelpGroupsManyFlags: a command with many flags lists the common ones
// first, then each topic, then the rest; one with few lists them as
// defined; hidden and deprecated spellings are left out.
func TestHelpGroupsManyFlags(t *testing.T) {
	fs := pflag.NewFlagSet("many", pflag.ContinueOnError)
	fs.String("zeta", "", "a flag of no topic")
	fs.String("sandbox-home", "", "a sandbox flag")
	fs.String("env", "", "an agent flag")
	fs.StringP("output", "o", "", "the output")
	for i := range groupedAbove {
		fs.Bool(fmt.Sprintf("seed%d", i), false, "filler")
	}
	fs.String("max-cost", "", "a run control flag")
	DeprecatedAlias(fs, "old-output", "", "output")
	var out bytes.Buffer
	PrintFlags(&out, fs)
	got := out.String()
	order := []string{"Common flags:", "--output", "Agent flags:", "--env", "Workspace and sandbox flags:", "--sandbox-home",
		"Run control flags:", "--max-cost", "Other flags:", "--zeta"}
	at := 0
	for _, s := range order {
		i := strings.Index(got[at:], s)
		if i < 0 {
			t.Fatalf("help has no %q after offset %d:\n%s", s, at, got)
		}
		at += i
	}
	if strings.Contains(got, "old-output") {
		t.Errorf("help lists a deprecated spelling:\n%s", got)
	}

	few := pflag.NewFlagSet("few", pflag.ContinueOnError)
	few.String("zeta", "", "z")
	few.String("alpha", "", "a")
	out.Reset()
	PrintFlags(&out, few)
	if s := out.String(); !strings.HasPrefix(s, "\nFlags:\n") || strings.Index(s, "--zeta") > strings.Index(s, "--alpha") {
		t.Errorf("few flags, listed as defined:\n%s", s)
	}
}

// TestDeprecatedSpellings: an old spelling sets the same value and its use
// is warned of, naming the spelling to use.
func TestDeprecatedSpellings(t *testing.T) {
	c := &Command{Name: "grade", Flags: pflag.NewFlagSet("grade", pflag.ContinueOnError)}
	c.Flags.SetOutput(new(bytes.Buffer))
	var d time.Duration
	GraderTimeoutVar(c.Flags, &d)
	DeprecatedAlias(c.Flags, "timeout", "t", "grader-timeout")
	args := []string{"-t", "3s", "--", "-t"}
	if err := c.Flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	if d != 3*time.Second {
		t.Errorf("-t 3s set %v", d)
	}
	var w bytes.Buffer
	WarnDeprecated(&w, c, args)
	if got := w.String(); got != "harness grade: -t is deprecated: use --grader-timeout\n" {
		t.Errorf("warning %q", got)
	}
}
