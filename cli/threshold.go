package cli

import (
	"github.com/spf13/pflag"

	"harness/graders"
)

// Threshold is the --threshold flag of every command that runs graders:
// the pass threshold of bare scores and composite graders.
type Threshold struct {
	v  float64
	fs *pflag.FlagSet
}

// Add defines --threshold on fs.
func (t *Threshold) Add(fs *pflag.FlagSet) {
	t.fs = fs
	fs.Float64Var(&t.v, "threshold", graders.DefaultThreshold, "pass `threshold` of bare scores and composite graders (0..1)")
}

// Value is the threshold given, or nil when the flag was not given (each
// grader keeps its own); a value outside 0..1 is a usage error.
func (t *Threshold) Value() (*float64, error) {
	if t.fs == nil || !t.fs.Changed("threshold") {
		return nil, nil
	}
	if t.v < 0 || t.v > 1 {
		return nil, Usagef("--threshold %g: want a number between 0 and 1", t.v)
	}
	v := t.v
	return &v, nil
}
