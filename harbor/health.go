package harbor

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"harness/image"
)

// Defaults of a healthcheck table's fields.
const (
	DefaultHealthInterval      = 5 * time.Second
	DefaultHealthTimeout       = 30 * time.Second
	DefaultHealthStartInterval = 5 * time.Second
	DefaultHealthRetries       = 3
)

// Healthcheck is an [environment.healthcheck] or [steps.healthcheck]
// table: a command that must pass in the trial's layer before the agent
// starts (before the step's prompt).
type Healthcheck struct {
	// Command runs with sh -c.
	Command string
	// Interval is the wait between two checks (interval_sec); Timeout
	// bounds one check (timeout_sec); Retries is how many failed checks
	// in a row make it unhealthy (retries).
	Interval, Timeout time.Duration
	Retries           int
	// StartPeriod (start_period_sec) is a grace period: checks that fail
	// within it do not count, and are StartInterval apart
	// (start_interval_sec).
	StartPeriod, StartInterval time.Duration
	// Field is the table's name as the user wrote it
	// (environment.healthcheck, steps[2].healthcheck); Line its line.
	Field string
	Line  int
}

// healthKeys are the fields of a healthcheck table.
var healthKeys = []string{"command", "interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec", "retries"}

// readHealthcheck reads a healthcheck table v, reporting a bad value
// through fail(key, ...).
func readHealthcheck(v any, field string, line int, fail func(key, format string, args ...any)) *Healthcheck {
	m, ok := v.(map[string]any)
	if !ok {
		fail("", "must be a table")
		return nil
	}
	h := &Healthcheck{Interval: DefaultHealthInterval, Timeout: DefaultHealthTimeout, StartInterval: DefaultHealthStartInterval,
		Retries: DefaultHealthRetries, Field: field, Line: line}
	switch c := m["command"].(type) {
	case string:
		h.Command = strings.TrimSpace(c)
	case nil:
	default:
		fail("command", "must be a string (run with sh -c), not %v", c)
		return nil
	}
	if h.Command == "" {
		fail("command", "a healthcheck needs a command")
		return nil
	}
	secs := func(key string, def time.Duration, zero bool) time.Duration {
		x, ok := m[key]
		if !ok {
			return def
		}
		f := toFloat(x)
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || (f == 0 && !zero) {
			more := "more than 0"
			if zero {
				more = "0 or more"
			}
			fail(key, "must be a number of seconds, %s, not %v", more, x)
			return def
		}
		return time.Duration(f * float64(time.Second))
	}
	h.Interval = secs("interval_sec", h.Interval, true)
	h.Timeout = secs("timeout_sec", h.Timeout, false)
	h.StartPeriod = secs("start_period_sec", 0, true)
	h.StartInterval = secs("start_interval_sec", h.StartInterval, true)
	if x, ok := m["retries"]; ok {
		n, isInt := x.(int64)
		if !isInt || n < 1 {
			fail("retries", "must be a whole number, 1 or more, not %v", x)
		}
		h.Retries = int(n)
	}
	return h
}

// HealthError is a healthcheck that never passed.
type HealthError struct {
	// Check is the healthcheck; Tries how many times it ran.
	Check *Healthcheck
	Tries int
	// Last is what its last run did.
	Last Ran
}

func (e *HealthError) Error() string {
	how := fmt.Sprintf("exited %d", e.Last.ExitCode)
	if e.Last.TimedOut {
		how = fmt.Sprintf("did not finish within %s", e.Check.Timeout)
	}
	tries := "1 try"
	if e.Tries != 1 {
		tries = fmt.Sprintf("%d tries", e.Tries)
	}
	msg := fmt.Sprintf("the healthcheck (task.toml:%d %s) never passed: %s, the last %s", e.Check.Line, e.Check.Field, tries, how)
	if last := lastLines(e.Last.Output, 1); last != "" {
		msg += ": " + last
	}
	return msg
}

// CheckHealth runs the healthcheck hc in the layer until it passes, as its
// fields say: its command with sh -c, as the image's USER, in the task's
// working directory, with the environment's variables (the compose
// file's and [environment] env), each run bounded by its timeout; a check
// that fails within the start period does not count and the next comes
// after the start interval, else after the interval; Retries failed
// checks in a row end it with a *HealthError. Nothing is started before
// it (the image's CMD is not run): a check that waits for a service the
// CMD would start never passes. It returns how many times it ran.
func CheckHealth(ctx context.Context, l *image.Layer, t *Task, hc *Healthcheck, s Step) (int, error) {
	start := time.Now()
	environ := env(l.Image, mergeEnv(t.ComposeEnv, t.Config.EnvironmentEnv), s.Env)
	failed := 0
	for try := 1; ; try++ {
		ran, err := run(ctx, l, []string{"sh", "-c", hc.Command}, t.Workdir(l.Image), environ, hc.Timeout, s)
		if err != nil {
			return try, fmt.Errorf("the healthcheck (task.toml:%d %s): %w", hc.Line, hc.Field, err)
		}
		if !ran.TimedOut && ran.ExitCode == 0 {
			return try, nil
		}
		if err := ctx.Err(); err != nil {
			return try, fmt.Errorf("the healthcheck (task.toml:%d %s): %w", hc.Line, hc.Field, err)
		}
		wait := hc.StartInterval
		if time.Since(start) >= hc.StartPeriod {
			failed++
			if failed >= hc.Retries {
				return try, &HealthError{Check: hc, Tries: try, Last: ran}
			}
			wait = hc.Interval
		}
		select {
		case <-ctx.Done():
			return try, fmt.Errorf("the healthcheck (task.toml:%d %s): %w", hc.Line, hc.Field, ctx.Err())
		case <-time.After(wait):
		}
	}
}
