// Package exportcmd is harness export: trajectories in ATIF or the chat-messages format, for other tools.
package exportcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/export"
)

// exportOptions are the flags of harness export.
type exportOptions struct {
	format, output, dir string
	metadata, force     bool
	schemaOnly          bool
}

const exportLong = `Converts every record of a capture, graded or trials file (.zst/.gz too;
- for stdin) into a trajectory format other tools read:

  atif             Harbor's Agent Trajectory Interchange Format (ATIF-v1.7),
                   one document per record: a user step per turn, agent steps
                   cut where text follows a tool round, each tool result in
                   the step of its call, thoughts as reasoning_content; the
                   events ATIF has no field for (permissions, file and
                   terminal requests, plans, usage...) in the step's extra.
                   Token totals go in final_metrics. Every document is
                   checked against the ATIF schema the repository carries
                   before it is written (harness export --schema prints it).
  openai-messages  {"messages": [...]} per record, in the chat-completions
                   shape fine-tuning and RFT pipelines take: user, assistant
                   (content and tool_calls) and one tool message per call.
                   --metadata adds {"metadata": {id, trial, pass, score}}.

Output is JSON Lines, one record per line (-o FILE, default stdout; .zst or
.gz compresses), or with --dir one pretty-printed DIR/<id>-t<trial>.json per
record.

Examples:
  harness export results.jsonl --format atif --dir trajectories/
  harness export trials.jsonl --format openai-messages --metadata -o sft.jsonl`

// NewCmd returns the harness export command.
func NewCmd() *cli.Command {
	var o exportOptions
	c := &cli.Command{
		Name:  "export",
		Usage: "export RESULTS --format atif|openai-messages [-o FILE | --dir DIR]",
		Short: "trajectories in ATIF or the chat-messages format, for other tools",
		Long:  exportLong,
		Flags: pflag.NewFlagSet("export", pflag.ContinueOnError),
	}
	c.Flags.StringVarP(&o.format, "format", "f", "", "`format` to write: atif or openai-messages")
	c.Flags.StringVarP(&o.output, "output", "o", "", "write JSON Lines to `file` (default stdout)")
	c.Flags.StringVar(&o.dir, "dir", "", "write one <id>-t<trial>.json per record into `directory`")
	c.Flags.BoolVar(&o.metadata, "metadata", false, "openai-messages: add each record's id, trial, pass and score")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite existing files")
	c.Flags.BoolVar(&o.schemaOnly, "schema", false, "print the ATIF JSON Schema the exports are checked against")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return runExport(e, o, args)
	}
	return c
}

// runExport converts the records of args[0] as the options ask.
func runExport(e *cli.Env, o exportOptions, args []string) error {
	if o.schemaOnly {
		_, err := e.Stdout.Write(export.ATIFSchema())
		return err
	}
	if len(args) != 1 {
		return cli.Usagef("want one results file, got %d arguments", len(args))
	}
	convert, ok := export.Converter(o.format, o.metadata)
	switch {
	case o.format == "":
		return cli.Usagef("--format is required: atif or openai-messages")
	case !ok:
		return cli.Usagef("--format %q: want atif or openai-messages", o.format)
	}
	if o.metadata && o.format != "openai-messages" {
		return cli.Usagef("--metadata goes with --format openai-messages")
	}
	if o.dir != "" && o.output != "" {
		return cli.Usagef("-o and --dir are different outputs: choose one")
	}
	name, err := cli.OneResults(args[0])
	if err != nil {
		return err
	}
	args = []string{name}
	in, err := cli.ReviewInput(e, args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	if o.dir != "" {
		if err := os.MkdirAll(o.dir, 0o777); err != nil {
			return cli.Input(fmt.Errorf("--dir: %w", err))
		}
		return cli.ReviewInputErr(export.WriteDir(in, args[0], convert, func(file string, doc []byte) error {
			return cli.WriteOutput(e, filepath.Join(o.dir, file), o.force, func(w io.Writer) error {
				_, err := w.Write(doc)
				return err
			})
		}))
	}
	return cli.WriteOutput(e, o.output, o.force, func(out io.Writer) error {
		return cli.ReviewInputErr(export.WriteJSONL(out, o.output, in, args[0], convert))
	})
}
