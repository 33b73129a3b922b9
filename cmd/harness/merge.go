package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newMergeCmd() *command {
	c := &command{
		name:  "merge",
		usage: "merge",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("merge", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("merge is not available in this build")
	}
	return c
}
