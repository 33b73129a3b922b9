package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newCheckCmd() *command {
	c := &command{
		name:  "check",
		usage: "check",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("check", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("check is not available in this build")
	}
	return c
}
