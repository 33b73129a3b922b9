package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newTrialsCmd() *command {
	c := &command{
		name:  "trials",
		usage: "trials",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("trials", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("trials is not available in this build")
	}
	return c
}
