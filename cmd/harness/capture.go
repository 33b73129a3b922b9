package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/cost"
	"harness/schemas"
)

func newCaptureCmd() *cli.Command {
	var f runFlags
	c := &cli.Command{
		Name:  "capture",
		Usage: "capture PROMPTS [flags] -- AGENT [ARGS...]",
		Short: "run each prompt case once against an ACP agent and record its trajectory (JSONL)",
		Long: `capture starts the agent command, initializes it (ACP v1), and runs every
case of the prompts file (JSONL: id, input, expected, hint, metadata, timeout,
workspace) in a fresh session. An input array runs several turns in one
session. Each case yields one record on the output with the merged
messages and thoughts, tool calls with their final status and output, plans,
permission decisions, fs and terminal requests, timing, stopReason and any
error, written whole as soon as the case is done.

Examples:
  harness capture prompts.jsonl -- node agent.js
  harness capture prompts.jsonl -o out.jsonl.zst -j 4 -t 2m -- npx @google/gemini-cli --acp
  harness capture prompts.jsonl --workspace repo/ --fs --terminal -g check.py -o out.jsonl -- ./my-agent
  harness capture prompts.jsonl -o out.jsonl --resume -- ./my-agent   # continue an interrupted run`,
		Agent: true,
		Flags: pflag.NewFlagSet("capture", pflag.ContinueOnError),
	}
	f.addFlags(c.Flags)
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		if err := f.checkSlurm(args); err != nil {
			return err
		}
		setup, err := f.prepare(ctx, e, args, agent, "capture")
		if err != nil {
			return err
		}
		if f.slurm.tasks > 0 {
			setup.cleanup()
			return runSlurm(ctx, &slurmRun{e: e, c: c, f: &f, cmdName: "capture", k: 1, agent: agent}, args)
		}
		_, _, err = evaluate(ctx, e, &f, setup, 1, nil, nil)
		return err
	}
	return c
}

// costLine says what a run cost, and which of its dollars are the ones the
// agent reported itself (reported), not priced from --prices.
func costLine(spent *schemas.Cost, reported float64, prices cost.Table) string {
	if spent == nil || spent.USD == nil || reported <= 0 {
		return cost.Format(spent)
	}
	tokens := *spent
	tokens.USD = nil
	source := "reported by the agent"
	if len(prices) == 0 {
		source += "; no --prices"
	}
	if reported < *spent.USD-1e-9 {
		source = fmt.Sprintf("of which $%.4f %s", reported, source)
	}
	return fmt.Sprintf("$%.4f (%s), %s", *spent.USD, source, cost.Format(&tokens))
}

// agentErrorText says why an agent could not start, with an excerpt of its
// stderr: the first lines (where an agent that rejects its command line
// says what it rejected) and the last ones.
func agentErrorText(info *schemas.ErrorInfo) string {
	msg := info.Message
	stderr := strings.TrimRight(info.Stderr, "\n")
	if strings.TrimSpace(stderr) == "" {
		return msg
	}
	const head, tail = 3, 7
	lines := strings.Split(stderr, "\n")
	if len(lines) > head+tail+1 {
		skipped := len(lines) - head - tail
		lines = slices.Concat(lines[:head], []string{fmt.Sprintf("... (%d lines)", skipped)}, lines[len(lines)-tail:])
	}
	return msg + "\nagent stderr:\n  " + strings.Join(lines, "\n  ")
}

func (s *runSetup) redactErr(err error) error {
	return fmt.Errorf("%s", s.redact.String(err.Error()))
}
