package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"harness/schemas"
)

func newSchemasCmd() *command {
	var (
		output           string
		list, all, split bool
		force, strict    bool
	)
	c := &command{
		name:  "schemas",
		usage: "schemas [NAME] [--list | --json | --split -o DIR]",
		short: "JSON Schema (2020-12) of every data format",
		long: `Prints the JSON Schema (draft 2020-12) of harness's data formats. Each
schema stands alone: the schemas it refers to are bundled under $defs.
acp-harness's names CaptureResult and TrialResult are accepted too.

Examples:

  harness schemas                  list the names
  harness schemas --list           names with what each describes
  harness schemas TrialsRecord     one schema (--json too, as acp-harness takes it)
  harness schemas --json           every schema, one object keyed by name
  harness schemas --strict NAME    NAME with additionalProperties: false on every
                                   object: fails on any field this build does not write
  harness schemas --split -o DIR   one DIR/<Name>.json per schema`,
		flags: pflag.NewFlagSet("schemas", pflag.ContinueOnError),
	}
	c.flags.BoolVarP(&list, "list", "l", false, "list the names with a description")
	c.flags.BoolVarP(&all, "json", "j", false, "print every schema as one JSON object keyed by name")
	// -j is the concurrency elsewhere.
	deprecatedShorthand(c.flags, "json")
	c.flags.BoolVarP(&split, "split", "s", false, "write one <Name>.json per schema into the directory -o names")
	c.flags.StringVarP(&output, "output", "o", "", "write to `file` (directory with --split; default stdout)")
	c.flags.BoolVar(&force, "force", false, "overwrite existing files")
	c.flags.BoolVar(&strict, "strict", false, "close every object (additionalProperties: false) to catch undeclared fields")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if len(args) > 1 {
			return usageErrorf("want at most one schema name, got %d", len(args))
		}
		schemaOf := schemas.Schema
		if strict {
			schemaOf = schemas.StrictSchema
		}
		if len(args) == 1 {
			all = false // acp-harness prints the one schema for NAME --json
		}
		modes := 0
		for _, b := range []bool{list, all, split, len(args) == 1} {
			if b {
				modes++
			}
		}
		if modes > 1 {
			return usageErrorf("NAME, --list, --json and --split are different outputs: choose one")
		}
		names := schemas.SchemaNames()
		if split {
			return writeSplitSchemas(output, names, force, schemaOf)
		}
		out, err := reviewOutput(e, output, force)
		if err != nil {
			return err
		}
		err = func() error {
			switch {
			case len(args) == 1:
				b, err := schemaOf(args[0])
				if err != nil {
					return inputError(err)
				}
				_, err = out.Write(b)
				return err
			case all:
				obj := map[string]json.RawMessage{}
				for _, n := range names {
					b, err := schemaOf(n)
					if err != nil {
						return err
					}
					obj[n] = b
				}
				return writePrettyJSON(out, obj)
			case list:
				width := 0
				for _, n := range names {
					width = max(width, len(n))
				}
				for _, n := range names {
					fmt.Fprintf(out, "%-*s  %s\n", width, n, schemaSummary(n))
				}
				aliases := schemas.SchemaAliases()
				for _, alias := range slices.Sorted(maps.Keys(aliases)) {
					fmt.Fprintf(out, "%-*s  acp-harness name of %s\n", width, alias, aliases[alias])
				}
				return nil
			}
			for _, n := range names {
				fmt.Fprintln(out, n)
			}
			return nil
		}()
		if err != nil {
			out.Abort()
			return err
		}
		return out.Commit()
	}
	return c
}

// schemaSummary is the first sentence of a schema's description.
func schemaSummary(name string) string {
	b, err := schemas.SchemaDoc(name)
	if err != nil {
		return ""
	}
	var d struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(b, &d)
	s, _, _ := strings.Cut(d.Description, ". ")
	return strings.TrimSuffix(s, ".")
}

func writeSplitSchemas(dir string, names []string, force bool, schemaOf func(string) ([]byte, error)) error {
	if dir == "" || dir == "-" {
		return usageErrorf("--split needs a directory: -o DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return inputError(fmt.Errorf("--split: %w", err))
	}
	for _, n := range names {
		p := filepath.Join(dir, n+".json")
		if _, err := os.Stat(p); err == nil && !force {
			return usageErrorf("%s already exists; use --force to overwrite it", p)
		}
	}
	for _, n := range names {
		b, err := schemaOf(n)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n+".json"), b, 0o644); err != nil {
			return fmt.Errorf("--split: %w", err)
		}
	}
	return nil
}
