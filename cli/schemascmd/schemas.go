// Package schemascmd is harness schemas: JSON Schema (2020-12) of every data format.
package schemascmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/schemas"
)

// schemasOptions are the flags of harness schemas.
type schemasOptions struct {
	output           string
	list, all, split bool
	force, strict    bool
}

const schemasLong = `Prints the JSON Schema (draft 2020-12) of harness's data formats. Each
schema stands alone: the schemas it refers to are bundled under $defs.
acp-harness's names CaptureResult and TrialResult are accepted too.

Examples:

  harness schemas                  list the names
  harness schemas --list           names with what each describes
  harness schemas TrialsRecord     one schema (--json too, as acp-harness takes it)
  harness schemas --json           every schema, one object keyed by name
  harness schemas --strict NAME    NAME with additionalProperties: false on every
                                   object: fails on any field this build does not write
  harness schemas --split -o DIR   one DIR/<Name>.json per schema`

// NewCmd returns the harness schemas command.
func NewCmd() *cli.Command {
	var o schemasOptions
	c := &cli.Command{
		Name:  "schemas",
		Usage: "schemas [NAME] [--list | --json | --split -o DIR]",
		Short: "JSON Schema (2020-12) of every data format",
		Long:  schemasLong,
		Flags: pflag.NewFlagSet("schemas", pflag.ContinueOnError),
	}
	c.Flags.BoolVarP(&o.list, "list", "l", false, "list the names with a description")
	c.Flags.BoolVarP(&o.all, "json", "j", false, "print every schema as one JSON object keyed by name")
	// -j is the concurrency elsewhere.
	cli.DeprecatedShorthand(c.Flags, "json")
	c.Flags.BoolVarP(&o.split, "split", "s", false, "write one <Name>.json per schema into the directory -o names")
	c.Flags.StringVarP(&o.output, "output", "o", "", "write to `file` (directory with --split; default stdout)")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite existing files")
	c.Flags.BoolVar(&o.strict, "strict", false, "close every object (additionalProperties: false) to catch undeclared fields")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runSchemas(e, o, args)
	}
	return c
}

// runSchemas prints (or writes) the schemas the options ask for.
func runSchemas(e *cli.Env, o schemasOptions, args []string) error {
	if len(args) > 1 {
		return cli.Usagef("want at most one schema name, got %d", len(args))
	}
	schemaOf := schemas.Schema
	if o.strict {
		schemaOf = schemas.StrictSchema
	}
	if len(args) == 1 {
		o.all = false // acp-harness prints the one schema for NAME --json
	}
	modes := 0
	for _, b := range []bool{o.list, o.all, o.split, len(args) == 1} {
		if b {
			modes++
		}
	}
	if modes > 1 {
		return cli.Usagef("NAME, --list, --json and --split are different outputs: choose one")
	}
	names := schemas.SchemaNames()
	if o.split {
		return writeSplitSchemas(o.output, names, o.force, schemaOf)
	}
	return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
		switch {
		case len(args) == 1:
			b, err := schemaOf(args[0])
			if err != nil {
				return cli.Input(err)
			}
			_, err = out.Write(b)
			return err
		case o.all:
			obj, err := schemas.AllSchemas(names, schemaOf)
			if err != nil {
				return err
			}
			return cli.WritePrettyJSON(out, obj)
		case o.list:
			return schemas.WriteSchemaList(out)
		}
		for _, n := range names {
			fmt.Fprintln(out, n)
		}
		return nil
	})
}

func writeSplitSchemas(dir string, names []string, force bool, schemaOf func(string) ([]byte, error)) error {
	if dir == "" || dir == "-" {
		return cli.Usagef("--split needs a directory: -o DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cli.Input(fmt.Errorf("--split: %w", err))
	}
	err := schemas.WriteSchemaFiles(dir, names, force, schemaOf)
	var exists *schemas.FileExistsError
	var pathErr *os.PathError
	switch {
	case errors.As(err, &exists):
		return cli.Usagef("%v; use --force to overwrite it", err)
	case errors.As(err, &pathErr):
		return fmt.Errorf("--split: %w", err)
	}
	return err
}
