package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit statuses, documented in the help text and the README.
const (
	ExitOK          = 0
	ExitGateFailed  = 1
	ExitUsage       = 2
	ExitInfraErrors = 3
	ExitBudget      = 4
	ExitForeign     = 5
	ExitInterrupted = 130
)

// ExitCodesHelp is the exit status section every help page ends with.
const ExitCodesHelp = `Exit status:
  0    success
  1    the run completed but a declared gate failed (--min-pass-rate, a misjudged reference)
  2    usage or input error (nothing run, no output touched), or the output could not be written
  3    the run completed with failures not the agent's, left out of n after their retries (the provider, sandbox or machine, a grader); the agent's own crashes and timeouts are failures in n, not exit 3
  4    the budget (--max-cost, --max-tokens) was spent: no new work started; --resume continues
  5    an output, partial or shard file holds lines harness did not write (named FILE:LINE); its records cannot be trusted
  130  interrupted; the output holds every finished record
`

// ExitError carries the process exit status of a failed command.
type ExitError struct {
	Code int
	Err  error
}

// Error is the error's text.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap is the error the exit status was given to.
func (e *ExitError) Unwrap() error { return e.Err }

// Usagef reports bad flags, arguments or input: exit 2.
func Usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Input marks err as bad input (exit 2); nil stays nil.
func Input(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// WithCode returns err with the given exit status.
func WithCode(code int, err error) error { return &ExitError{Code: code, Err: err} }

// ExitCode is the exit status of err: its ExitError's, 1 for any other
// error, 0 for nil.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// Report prints err (if any), each line after "harness NAME: ", and
// returns its exit status.
func Report(w io.Writer, name string, err error) int {
	if err == nil {
		return ExitOK
	}
	if msg := err.Error(); msg != "" {
		for _, line := range strings.Split(msg, "\n") {
			fmt.Fprintf(w, "harness %s: %s\n", name, line)
		}
	}
	return ExitCode(err)
}

// RedactError takes the invocation's secrets out of an error's text,
// keeping its exit status.
func (e *Env) RedactError(err error) error {
	if err == nil || e.Redact == nil || !e.Redact.Active() {
		return err
	}
	return WithCode(ExitCode(err), errors.New(e.Redact.String(err.Error())))
}

// WorstExit is the exit status of a run from its parts' errors: an
// interrupt first, then a usage or input error, a spent budget, a failed
// gate, infrastructure errors. With brief, its message holds the first
// line of each error only.
func WorstExit(errs []error, brief bool) error {
	if len(errs) == 0 {
		return nil
	}
	rank := map[int]int{ExitInterrupted: 5, ExitUsage: 4, ExitBudget: 3, ExitGateFailed: 2, ExitInfraErrors: 1}
	best, bestRank := ExitGateFailed, -1
	for _, err := range errs {
		code := 1
		var ee *ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		}
		if rank[code] > bestRank {
			best, bestRank = code, rank[code]
		}
	}
	if brief {
		var lines []string
		for _, err := range errs {
			lines = append(lines, FirstLine(err.Error()))
		}
		return WithCode(best, errors.New(strings.Join(lines, "\n")))
	}
	return WithCode(best, errors.Join(errs...))
}
