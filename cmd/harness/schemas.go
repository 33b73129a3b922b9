package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newSchemasCmd() *command {
	c := &command{
		name:  "schemas",
		usage: "schemas",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("schemas", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("schemas is not available in this build")
	}
	return c
}
