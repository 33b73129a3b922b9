// Package keycmd is harness key: make a record key to share between the
// machines of one run.
package keycmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/results"
)

const keyLong = `Makes a new record key: the secret harness signs the lines of its outputs
with and checks on --resume and merge. Each user has one, made on first use
(see --path); machines whose shards are merged together must share one: make
it once, keep it as a secret of the CI or on the shared filesystem, and point
HARNESS_RECORD_KEY_FILE at it on every machine.

Examples:

  harness key                      print a new key (for a CI secret)
  harness key -o shared.key        write a new key file (mode 0600; never replaces one)
  harness key --path               where this machine's key is read from`

// NewCmd returns the harness key command.
func NewCmd() *cli.Command {
	var output string
	var path bool
	c := &cli.Command{
		Name:  "key",
		Usage: "key [-o FILE | --path]",
		Short: "make a record key to share between machines",
		Long:  keyLong,
		Flags: pflag.NewFlagSet("key", pflag.ContinueOnError),
	}
	c.Flags.StringVarP(&output, "output", "o", "", "write the new key to `file` (mode 0600), which must not exist")
	c.Flags.BoolVar(&path, "path", false, "print the file the record key is read from, and make no key")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		if len(args) > 0 {
			return cli.Usagef("key takes no arguments, got %q", args[0])
		}
		switch {
		case path && output != "":
			return cli.Usagef("--path and -o: give one")
		case path:
			p, err := results.KeyPath(e.Getenv)
			if err != nil {
				return cli.Input(err)
			}
			_, err = fmt.Fprintln(e.Stdout, p)
			return err
		case output != "":
			if err := results.CreateKeyFile(output); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return cli.Usagef("%s exists: a key file is never replaced (the records signed with it could no longer be continued or merged); remove it first to start over", output)
				}
				return cli.Input(err)
			}
			return nil
		}
		_, err := fmt.Fprint(e.Stdout, results.NewSecret())
		return err
	}
	return c
}
