package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
)

func newGradeCmd() *command {
	c := &command{
		name:  "grade",
		usage: "grade",
		short: "(not available in this build)",
		flags: pflag.NewFlagSet("grade", pflag.ContinueOnError),
	}
	c.run = func(ctx context.Context, e *env, args, agent []string) error {
		return errors.New("grade is not available in this build")
	}
	return c
}
