// Package balancecmd is harness balance: category coverage of a prompt set (and pass rate per category).
package balancecmd

import (
	"context"
	"io"
	"strconv"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/review"
	"harness/schemas"
	"harness/trials"
)

// NewCmd returns the harness balance command.
func NewCmd() *cli.Command {
	var (
		output, key, results, threshold string
		force, quiet                    bool
	)
	c := &cli.Command{
		Name:  "balance",
		Usage: "balance PROMPTS [--key KEY] [--threshold PERCENT] [--results FILE]",
		Short: "category coverage of a prompt set (and pass rate per category)",
		Long: `Counts the cases of a prompt set per value of metadata.KEY (default
category; a dotted key reaches into nested objects) and writes the
acp-harness BalanceAnalysis as JSON: totalCases, categories (name, count,
percentage), underrepresented (below PERCENT of an even share) and
suggestions. A bar chart goes to stderr (-q hides it).

With --results FILE (a capture or trials file of these prompts), each
category also gets its pass rate: trials pooled over its cases, with a
Wilson 95% interval; trials with infrastructure errors are excluded.

Examples:
  harness balance prompts.jsonl
  harness balance prompts.jsonl --key difficulty --results trials.jsonl`,
		Flags: pflag.NewFlagSet("balance", pflag.ContinueOnError),
	}
	c.Flags.StringVarP(&key, "key", "k", "category", "metadata `key` to group by")
	c.Flags.StringVarP(&threshold, "threshold", "t", "50", "underrepresented below this `percent` of an even share")
	c.Flags.StringVar(&results, "results", "", "add pass rates per category from this results `file`")
	c.Flags.StringVarP(&output, "output", "o", "", "write the JSON to `file` (default stdout)")
	c.Flags.BoolVar(&force, "force", false, "overwrite an existing output file")
	c.Flags.BoolVarP(&quiet, "quiet", "q", false, "no chart on stderr")
	// -k and -t mean trials and the turn timeout elsewhere.
	cli.DeprecatedShorthand(c.Flags, "key")
	cli.DeprecatedShorthand(c.Flags, "threshold")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		if len(args) != 1 {
			return cli.Usagef("want one prompts file, got %d arguments", len(args))
		}
		th, err := strconv.ParseFloat(threshold, 64)
		if err != nil || th < 0 || th != th {
			return cli.Usagef("--threshold %q: want a percentage ≥ 0", threshold)
		}
		in, err := cli.ReviewInput(e, args[0])
		if err != nil {
			return err
		}
		cases, err := schemas.ReadPrompts(args[0], in)
		in.Close()
		if err != nil {
			return cli.Input(err)
		}
		a := review.Balance(cases, key, th)
		if results != "" {
			rin, err := cli.ReviewInput(e, results)
			if err != nil {
				return err
			}
			run, err := trials.ReadRun(results, rin)
			rin.Close()
			if err != nil {
				return cli.ReviewInputErr(err)
			}
			review.AddResults(&a, cases, run)
		}
		if err := cli.WriteOutput(e, output, force, func(out io.Writer) error { return cli.WritePrettyJSON(out, a) }); err != nil {
			return err
		}
		if !quiet {
			return review.WriteBalanceChart(e.Stderr, a)
		}
		return nil
	}
	return c
}
