package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newValidateRefsCmd() *command {
	c := &command{
		name:  "validate-refs",
		usage: "validate-refs",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("validate-refs", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("validate-refs is not available in this build")
	}
	return c
}
