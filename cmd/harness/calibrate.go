package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newCalibrateCmd() *command {
	c := &command{
		name:  "calibrate",
		usage: "calibrate",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("calibrate", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("calibrate is not available in this build")
	}
	return c
}
