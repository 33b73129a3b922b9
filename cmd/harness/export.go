package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"

	"harness/export"
	"harness/results"
	"harness/review"
	"harness/schemas"
)

func newExportCmd() *command {
	var (
		format, output, dir string
		metadata, force     bool
		schemaOnly          bool
	)
	c := &command{
		name:  "export",
		usage: "export RESULTS --format atif|openai-messages [-o FILE | --dir DIR]",
		short: "trajectories in ATIF or the chat-messages format, for other tools",
		long: `Converts every record of a capture, graded or trials file (.zst/.gz too;
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
  harness export trials.jsonl --format openai-messages --metadata -o sft.jsonl`,
		flags: pflag.NewFlagSet("export", pflag.ContinueOnError),
	}
	c.flags.StringVarP(&format, "format", "f", "", "`format` to write: atif or openai-messages")
	c.flags.StringVarP(&output, "output", "o", "", "write JSON Lines to `file` (default stdout)")
	c.flags.StringVar(&dir, "dir", "", "write one <id>-t<trial>.json per record into `directory`")
	c.flags.BoolVar(&metadata, "metadata", false, "openai-messages: add each record's id, trial, pass and score")
	c.flags.BoolVar(&force, "force", false, "overwrite existing files")
	c.flags.BoolVar(&schemaOnly, "schema", false, "print the ATIF JSON Schema the exports are checked against")
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		if schemaOnly {
			_, err := e.stdout.Write(export.ATIFSchema())
			return err
		}
		if len(args) != 1 {
			return usageErrorf("want one results file, got %d arguments", len(args))
		}
		var convert func(*schemas.CaptureRecord) (any, error)
		switch format {
		case "atif":
			convert = func(rec *schemas.CaptureRecord) (any, error) {
				t := export.ToATIF(rec)
				b, err := json.Marshal(t)
				if err != nil {
					return nil, err
				}
				if err := export.ValidateATIF(b); err != nil {
					return nil, fmt.Errorf("the ATIF document is not valid: %w", err)
				}
				return t, nil
			}
		case "openai-messages":
			convert = func(rec *schemas.CaptureRecord) (any, error) { return export.ToMessages(rec, metadata), nil }
		case "":
			return usageErrorf("--format is required: atif or openai-messages")
		default:
			return usageErrorf("--format %q: want atif or openai-messages", format)
		}
		if metadata && format != "openai-messages" {
			return usageErrorf("--metadata goes with --format openai-messages")
		}
		if dir != "" && output != "" {
			return usageErrorf("-o and --dir are different outputs: choose one")
		}
		in, err := reviewInput(e, args[0])
		if err != nil {
			return err
		}
		defer in.Close()
		if dir != "" {
			return exportDir(e, in, args[0], dir, force, convert)
		}
		return writeOutput(e, output, force, func(out io.Writer) error {
			w, err := results.NewWriter(output, out)
			if err != nil {
				return err
			}
			n, err := eachExported(in, args[0], convert, func(_ *schemas.CaptureRecord, v any) error { return w.Write(v) })
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err == nil && n == 0 {
				err = inputError(&schemas.InputError{File: args[0], Msg: "no records (the file is empty)"})
			}
			return err
		})
	}
	return c
}

// eachExported converts every record of a results file, naming the file,
// line and record of a conversion that fails.
func eachExported(in io.Reader, name string, convert func(*schemas.CaptureRecord) (any, error), fn func(*schemas.CaptureRecord, any) error) (int, error) {
	n := 0
	_, err := review.EachRecord(name, in, func(line int, rec *schemas.CaptureRecord) error {
		v, err := convert(rec)
		if err != nil {
			return fmt.Errorf("%s:%d: record %s trial %d: %w", name, line, rec.ID, rec.Trial, err)
		}
		n++
		return fn(rec, v)
	})
	return n, reviewInputErr(err)
}

// exportDir writes one pretty-printed file per record into dir; ids that
// map to the same file name get a -2, -3... suffix.
func exportDir(e *env, in io.Reader, name, dir string, force bool, convert func(*schemas.CaptureRecord) (any, error)) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return inputError(fmt.Errorf("--dir: %w", err))
	}
	used := map[string]bool{}
	n, err := eachExported(in, name, convert, func(rec *schemas.CaptureRecord, v any) error {
		base := fileSafe(rec.ID) + "-t" + strconv.Itoa(max(rec.Trial, 1))
		file := base + ".json"
		for i := 2; used[file]; i++ {
			file = base + "-" + strconv.Itoa(i) + ".json"
		}
		used[file] = true
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return writeOutput(e, filepath.Join(dir, file), force, func(w io.Writer) error {
			_, err := w.Write(append(b, '\n'))
			return err
		})
	})
	if err == nil && n == 0 {
		err = inputError(&schemas.InputError{File: name, Msg: "no records (the file is empty)"})
	}
	return err
}

// fileSafe maps an id to a file name: letters, digits, '-', '_' and '.'
// kept, anything else '_', at most 80 bytes, never empty or a dot name.
func fileSafe(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 80 {
		b = b[:80]
	}
	s := string(b)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}
