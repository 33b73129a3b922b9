package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newReportCmd() *command {
	c := &command{
		name:  "report",
		usage: "report",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("report", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("report is not available in this build")
	}
	return c
}
