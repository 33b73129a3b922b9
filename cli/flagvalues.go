package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/schemas"
)

// durationValue is a duration flag: Go syntax (90s, 2m) or a bare number
// of milliseconds, never negative; every duration flag of every command
// reads its value this way.
type durationValue time.Duration

// DurationVarP defines a duration flag with a shorthand ("" for none).
func DurationVarP(fs *pflag.FlagSet, p *time.Duration, name, shorthand string, value time.Duration, usage string) {
	*p = value
	fs.VarP((*durationValue)(p), name, shorthand, usage)
}

// DurationVar defines a duration flag.
func DurationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	DurationVarP(fs, p, name, "", value, usage)
}

func (d *durationValue) Set(s string) error {
	v, err := schemas.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) Type() string { return "duration" }

// String is the duration as a user would write it: 60s, 5m, 250ms ("0" for
// none, which help leaves out).
func (d *durationValue) String() string {
	v := time.Duration(*d)
	switch {
	case v == 0:
		return "0"
	case v%time.Minute == 0 && v >= 2*time.Minute:
		return fmt.Sprintf("%dm", v/time.Minute)
	case v%time.Second == 0:
		return fmt.Sprintf("%ds", v/time.Second)
	case v%time.Millisecond == 0:
		return fmt.Sprintf("%dms", v/time.Millisecond)
	}
	return v.String()
}

// GraderTimeoutVar defines --grader-timeout, the time limit of each
// grading call, the same in every command that grades.
func GraderTimeoutVar(fs *pflag.FlagSet, p *time.Duration) {
	DurationVar(fs, p, "grader-timeout", 0, "`timeout` for each grading call (default 60s; 5s for in-process JavaScript)")
}

// DeprecatedAlias defines old (with shorthand, "" for none) as another name
// of the flag now, kept for scripts: it sets the same value, is left out
// of help, and its use is warned of (see WarnDeprecated).
func DeprecatedAlias(fs *pflag.FlagSet, old, shorthand, now string) {
	fl := fs.Lookup(now)
	fs.VarP(fl.Value, old, shorthand, fl.Usage)
	fs.Lookup(old).NoOptDefVal = fl.NoOptDefVal
	fs.MarkDeprecated(old, "use --"+now)
}

// DeprecatedShorthand keeps the shorthand of a flag that another command
// gives another meaning, for scripts, out of help and warned of.
func DeprecatedShorthand(fs *pflag.FlagSet, name string) {
	fs.MarkShorthandDeprecated(name, "use --"+name)
}

// WarnDeprecated tells of each deprecated flag name or shorthand that args
// (a command's arguments, parsed) use.
func WarnDeprecated(w io.Writer, c *Command, args []string) {
	if dash := slices.Index(args, "--"); dash >= 0 {
		args = args[:dash]
	}
	usedShort := func(sh string) bool {
		return sh != "" && slices.ContainsFunc(args, func(a string) bool {
			return strings.HasPrefix(a, "-"+sh) && !strings.HasPrefix(a, "--")
		})
	}
	c.Flags.Visit(func(fl *pflag.Flag) {
		switch {
		case fl.Deprecated != "" && usedShort(fl.Shorthand):
			fmt.Fprintf(w, "harness %s: -%s is deprecated: %s\n", c.Name, fl.Shorthand, fl.Deprecated)
		case fl.Deprecated != "":
			fmt.Fprintf(w, "harness %s: --%s is deprecated: %s\n", c.Name, fl.Name, fl.Deprecated)
		case fl.ShorthandDeprecated != "" && usedShort(fl.Shorthand):
			fmt.Fprintf(w, "harness %s: -%s is deprecated: %s\n", c.Name, fl.Shorthand, fl.ShorthandDeprecated)
		}
	})
}

// SwitchOrValue is a flag that is a switch (--resume, its operand given
// as an argument) and also takes a value (--resume=DIR): On says it was
// given, Value the value, "" for the switch alone.
type SwitchOrValue struct {
	On    bool
	Value string
}

// Set takes "true", "false" or a value.
func (r *SwitchOrValue) Set(s string) error {
	switch s {
	case "true":
		r.On = true
	case "false":
		r.On, r.Value = false, ""
	default:
		r.On, r.Value = true, s
	}
	return nil
}

// String is the value, or whether the switch is on.
func (r *SwitchOrValue) String() string {
	if r.Value != "" {
		return r.Value
	}
	return strconv.FormatBool(r.On)
}

// Type is "bool": the flag takes no separate argument.
func (r *SwitchOrValue) Type() string { return "bool" }
