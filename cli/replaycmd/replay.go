// Package replaycmd is harness replay: an ACP agent that serves recorded trajectories back (the agent of capture or trials).
package replaycmd

import (
	"context"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/replay"
)

// NewCmd returns the harness replay command.
func NewCmd() *cli.Command {
	var timing, applyChanges bool
	c := &cli.Command{
		Name:  "replay",
		Usage: "replay RESULTS [--timing] [--apply-changes]",
		Short: "an ACP agent that serves recorded trajectories back (the agent of capture or trials)",
		Long: `Replay is an ACP agent on stdin and stdout that plays the trials of a
capture or trials file back: for each session, its recorded trial (harness
says which case and trial a session is for, as the replay asks in
initialize; other clients get, for the n-th session with a prompt, its n-th
trial), with the same session updates in the same order, the same tool
calls, permission, fs and terminal requests, final answer and stop reason.
Run it as the agent of capture or trials to test graders, gates, reports or
the client at no model cost: a capture of the replay reproduces the recorded
trajectories. A trial or prompt the results do not hold is answered with a
JSON-RPC error naming it.

--timing sends every message at its recorded time; without it everything
goes out at once. --apply-changes makes each session's workspace copy end
as the recorded one did (for graders that read the workspace). See
docs/replay.md for what is and is not reproduced.

Examples:
  harness capture prompts.jsonl -o again.jsonl -- harness replay out.jsonl
  harness trials prompts.jsonl -k 5 -g new-grader.py -o t2.jsonl -- harness replay t.jsonl
  harness trials prompts.jsonl -k 5 --workspace repo/ -g tests.yaml -o t2.jsonl -- harness replay --apply-changes t.jsonl`,
		Flags: pflag.NewFlagSet("replay", pflag.ContinueOnError),
	}
	c.Flags.BoolVar(&timing, "timing", false, "send each message at its recorded time instead of at once")
	c.Flags.BoolVar(&applyChanges, "apply-changes", false, "before the last answer, apply each record's workspace changes to its session's cwd (a fresh copy: capture --workspace), so graders see the recorded workspace")
	c.Run = func(ctx context.Context, e *cli.Env, args, _ []string) error {
		if len(args) != 1 {
			return cli.Usagef("want one results file, got %d arguments", len(args))
		}
		if args[0] == "-" {
			return cli.Usagef("RESULTS cannot be standard input: the replay speaks ACP there")
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
		lib, err := replay.Load(args[0], in)
		in.Close()
		if err != nil {
			return cli.ReviewInputErr(err)
		}
		return replay.Serve(ctx, lib, e.Stdin, e.Stdout, replay.Options{
			Timing: timing, ApplyChanges: applyChanges, Log: e.Stderr, Version: e.Build().Version})
	}
	return c
}
