package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newCompareCmd() *command {
	c := &command{
		name:  "compare",
		usage: "compare",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("compare", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("compare is not available in this build")
	}
	return c
}
