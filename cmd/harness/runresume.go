package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/rundir"
	"harness/suite"
)

// runFlagsNotRecorded are the flags of harness run that are not the run's
// settings: where it goes, how it is told, resuming itself; k is the
// manifest's own field.
var runFlagsNotRecorded = []string{"resume", "output", "runs", "quiet", "allow-suite-change", "force", "k", "rerun-changed"}

// runFlagsFreeOnResume are the settings a resumed run may change: how many
// trials run at once, what is kept on disk and what the run may spend, not
// what it measures.
var runFlagsFreeOnResume = []string{"concurrency", "keep-layers", "max-cost", "max-tokens"}

// resumeFlags sets on fs the settings the manifest of the run in dir
// recorded, and refuses a setting given now that contradicts one of them
// (or, when it was not given at the start, is not its default), naming
// both. The settings a resumed run may change are taken as given.
func resumeFlags(fs *pflag.FlagSet, m *rundir.Manifest, dir string) error {
	if m.Flags == nil {
		// The run's manifest predates recorded settings.
		return nil
	}
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if err != nil || slices.Contains(runFlagsNotRecorded, fl.Name) {
			return
		}
		rec, was := m.Flags[fl.Name]
		if fl.Changed {
			now := cli.FlagValues(fl)
			switch {
			case slices.Contains(runFlagsFreeOnResume, fl.Name),
				was && slices.Equal(now, rec),
				!was && len(now) == 1 && now[0] == fl.DefValue:
				return
			}
			started := "without --" + fl.Name
			if was {
				started = "with " + cli.FlagText(fl.Name, rec)
			}
			err = cli.Usagef("%s: the run in %s was started %s (its %s): drop the flag to continue the run as it was started, or start a new run",
				cli.FlagText(fl.Name, now), dir, started, rundir.ManifestName)
			return
		}
		for _, v := range rec {
			if serr := fs.Set(fl.Name, v); serr != nil {
				err = cli.Input(fmt.Errorf("%s: --%s %s: %w", rundir.ManifestName, fl.Name, v, serr))
				return
			}
		}
	})
	return err
}

// resumeK is the k of a resumed run: the one it was started with; a
// different -k is refused.
func resumeK(k int, m *rundir.Manifest, dir string) (int, error) {
	if m.K <= 0 {
		return k, nil
	}
	if k > 0 && k != m.K {
		return 0, cli.Usagef("-k %d: the run in %s was started with k %d (its %s): drop the flag to continue the run as it was started, or start a new run", k, dir, m.K, rundir.ManifestName)
	}
	return m.K, nil
}

// resumeAgentCommand is the agent command of a resumed run of a suite that
// names no agents: the one it was started with; a different one given
// after -- is refused.
func resumeAgentCommand(s *suite.Suite, cmd []string, m *rundir.Manifest, dir string) ([]string, error) {
	if len(s.Agents) > 0 || len(m.Agents) == 0 || len(m.Agents[0].Command) == 0 {
		return cmd, nil
	}
	started := m.Agents[0].Command
	if len(cmd) > 0 && !slices.Equal(cmd, started) {
		return nil, cli.Usagef("agent command %q: the run in %s was started with %q (its %s): drop the command after -- to continue the run as it was started, or start a new run",
			strings.Join(cmd, " "), dir, strings.Join(started, " "), rundir.ManifestName)
	}
	return started, nil
}
