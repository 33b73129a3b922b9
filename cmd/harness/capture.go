package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newCaptureCmd() *command {
	c := &command{
		name:  "capture",
		usage: "capture",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("capture", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("capture is not available in this build")
	}
	return c
}
