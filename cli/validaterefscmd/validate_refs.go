// Package validaterefscmd is harness validate-refs: check that reference answers pass and negative references fail.
package validaterefscmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/results"
	"harness/review"
	"harness/schemas"
)

// NewCmd returns the harness validate-refs command.
func NewCmd() *cli.Command {
	c := &cli.Command{
		Name:  "validate-refs",
		Usage: "validate-refs PROMPTS -g GRADER [-o FILE] | validate-refs TASKS [-o FILE]",
		Short: "check that reference answers pass and negative references fail",
		Long: `Grades each case's reference answer (it must pass) and negativeReference
(it must fail) with GRADER, exactly as if the agent had answered it: the
answer is the output, the final assistant message of the conversation
(messages, {{messages}}) and the trajectory's one message step. Cases
with neither are skipped.

Writes one JSON line per answer, a superset of acp-harness's
ValidationResult: id, reference (the answer graded), passes (the grader's
verdict), graderResult, kind (reference or negativeReference), want (pass or
fail) and correct. Progress and the list of misjudged answers go to stderr.

Exit status 1 when the grader misjudged any answer (unlike acp-harness,
which exits 0); 3 when it only failed to grade some (grader errors).

With a Harbor task directory or a dataset of them (TASKS, see
docs/tasks.md), each task runs in its image twice, as Harbor's CI does:
with solution/solve.sh as the agent (a reference: it must score 1) and
with an agent that does nothing (a negative reference: it must score 0).
No grader is given: the task's tests/test.sh is the verifier.

Examples:
  harness validate-refs prompts.jsonl -g ./grader.py -o refs.jsonl
  harness validate-refs testdata/tasks -o refs.jsonl`,
		Flags: pflag.NewFlagSet("validate-refs", pflag.ContinueOnError),
	}
	var o refsOptions
	c.Flags.StringVarP(&o.grader, "grader", "g", "", "the `grader` to check (executable, .js/.ts module, or .json/.yaml config); required with a prompts file, not given with task directories")
	cli.GraderTimeoutVar(c.Flags, &o.graderTO)
	o.threshold.Add(c.Flags)
	c.Flags.StringVarP(&o.output, "output", "o", "", "write results to `file` (default stdout); a .zst or .gz suffix compresses")
	c.Flags.BoolVar(&o.force, "force", false, "overwrite an existing output file")
	c.Flags.BoolVarP(&o.quiet, "quiet", "q", false, "no progress on stderr")
	o.jc.AddFlags(c.Flags)
	var tf cli.TaskFlags
	tf.Add(c.Flags)
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		if len(args) != 1 {
			return cli.Usagef("want one prompts file, got %d arguments", len(args))
		}
		if err := cli.Missing(args[0], "a prompts file, or a Harbor task directory or dataset"); err != nil {
			return err
		}
		if cli.IsTaskDir(args[0]) {
			if o.grader != "" {
				return cli.Usagef("--grader does not apply to task directories: their tests/test.sh is the verifier")
			}
			if c.Flags.Changed("threshold") {
				return cli.Usagef("--threshold does not apply to task directories: their tests/test.sh is the verifier")
			}
			return cli.ValidateTaskRefs(ctx, e, args[0], tf, o.output, o.force, o.quiet)
		}
		if err := cli.NotTaskDir(args[0]); err != nil {
			return err
		}
		if o.grader == "" {
			return cli.Usagef("--grader (-g) is required with a prompts file (a task directory needs none: its tests/test.sh is the verifier)")
		}
		return validatePromptRefs(ctx, e, args[0], o)
	}
	return c
}

// refsOptions are the flags of validate-refs on a prompts file.
type refsOptions struct {
	output, grader string
	graderTO       time.Duration
	force, quiet   bool
	jc             cli.JudgeCacheFlags
	threshold      cli.Threshold
}

// validatePromptRefs grades the reference and negativeReference answers of
// the cases of a prompts file with the grader, and writes one validation
// result per answer.
func validatePromptRefs(ctx context.Context, e *cli.Env, file string, o refsOptions) error {
	in, err := cli.ReviewInput(e, file)
	if err != nil {
		return err
	}
	cases, err := schemas.ReadPrompts(file, in)
	in.Close()
	if err != nil {
		return cli.Input(err)
	}
	total := 0
	for _, c := range cases {
		if c.Reference != "" {
			total++
		}
		if c.NegativeReference != "" {
			total++
		}
	}
	if total == 0 {
		return cli.Input(fmt.Errorf("%s: no case has a reference or negativeReference to validate", file))
	}
	cache, err := o.jc.Open(e)
	if err != nil {
		return err
	}
	th, err := o.threshold.Value()
	if err != nil {
		return err
	}
	_, grade, err := cli.LoadReviewGrader(e, "validate-refs", o.grader, o.graderTO, th, cache)
	if err != nil {
		return err
	}
	graderErrors := 0
	var st review.ValidateStats
	err = cli.WriteRecords(e, o.output, o.force, func(w *results.Writer) (err error) {
		if !o.quiet {
			fmt.Fprintf(e.Stderr, "Validating %d reference solutions...\n", total)
		}
		st, err = review.ValidateRefs(ctx, cases, grade, func(v schemas.ValidationResult) error {
			if v.GraderResult.Error != nil {
				graderErrors++
			}
			if !o.quiet {
				sayRefResult(e.Stderr, v)
			}
			return w.Write(v)
		})
		return err
	})
	if err != nil {
		return err
	}
	return promptRefsVerdict(e, st, graderErrors, o.quiet)
}

// sayRefResult words one graded answer for the terminal.
func sayRefResult(w io.Writer, v schemas.ValidationResult) {
	mark := "✓"
	if !v.Correct {
		mark = "✗"
	}
	note := ""
	if v.Kind == schemas.RefNegative {
		note = " (negative)"
	}
	if v.GraderResult.Error != nil {
		msg, _, _ := strings.Cut(v.GraderResult.Error.Message, "\n")
		note += fmt.Sprintf(": grader error (%s): %s", v.GraderResult.Error.Class, msg)
	}
	fmt.Fprintf(w, "  %s %s%s\n", mark, v.ID, note)
}

// promptRefsVerdict is the exit of validate-refs on a prompts file: the
// grader misjudged an answer, failed to grade one, or nil.
func promptRefsVerdict(e *cli.Env, st review.ValidateStats, graderErrors int, quiet bool) error {
	if !quiet {
		fmt.Fprintf(e.Stderr, "\nResults: %d passed, %d failed\n", st.Checked-st.Misjudged, st.Misjudged)
		if st.Skipped > 0 {
			fmt.Fprintf(e.Stderr, "Skipped %d case(s) without reference or negativeReference\n", st.Skipped)
		}
	}
	if st.Misjudged > graderErrors {
		return cli.WithCode(cli.ExitGateFailed, fmt.Errorf("%d of %d answers misjudged: %s", st.Misjudged, st.Checked, strings.Join(st.Failing, ", ")))
	}
	if graderErrors > 0 {
		return cli.WithCode(cli.ExitInfraErrors, fmt.Errorf("the grader failed on %d of %d answers: %s", graderErrors, st.Checked, strings.Join(st.Failing, ", ")))
	}
	return nil
}
