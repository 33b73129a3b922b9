package main

import (
	"errors"
	"fmt"
	"harness/cli"

	"harness/graders"
	"harness/results"
	"harness/schemas"
)

// graderFiles lists the files the graders run or read, with the sha256
// each had when it was loaded, for the records' provenance.
func graderFiles(gs []graders.Grader) []schemas.GraderFile {
	var out []schemas.GraderFile
	for _, g := range gs {
		out = append(out, graders.Fingerprints(g)...)
	}
	return out
}

// recordKey loads (creating on first use) the key harness signs the record
// lines it writes with.
func recordKey(e *cli.Env) (*results.Key, error) {
	path, err := results.KeyPath(e.Getenv)
	if err != nil {
		return nil, err
	}
	k, err := results.LoadKey(path)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, err)
	}
	return k, nil
}

// foreignError gives an error about lines harness did not write (in an
// output it continues, merges or has just written) its own exit status;
// other errors come back as they are.
func foreignError(err error) error {
	var one *results.ForeignLineError
	var many *results.ForeignLinesError
	if errors.As(err, &one) || errors.As(err, &many) {
		return cli.WithCode(cli.ExitForeign, err)
	}
	return err
}

// checkWritten reads a finished output back: every line in it must be one
// harness wrote there.
func checkWritten(out *results.Output) error {
	if err := out.CheckWritten(); err != nil {
		var many *results.ForeignLinesError
		if errors.As(err, &many) {
			return cli.WithCode(cli.ExitForeign, err)
		}
		return fmt.Errorf("output: %w", err)
	}
	return nil
}
