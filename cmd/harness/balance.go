package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newBalanceCmd() *command {
	c := &command{
		name:  "balance",
		usage: "balance",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("balance", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("balance is not available in this build")
	}
	return c
}
