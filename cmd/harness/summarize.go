package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newSummarizeCmd() *command {
	c := &command{
		name:  "summarize",
		usage: "summarize",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("summarize", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("summarize is not available in this build")
	}
	return c
}
