// Package runctl decides when a run stops early: a budget of dollars or
// tokens and error classes that end the run. A Controller is told of every
// model call as it ends and every turn's answer as it arrives, with the
// unit's usage so far, and of every finished record; the moment a limit is
// reached it closes Stopped, so the runner starts no new unit and cancels
// the turns in flight.
//
// Costs are counted once per unit: the provisional cost of a unit whose
// record is not in yet (its model calls or its turns' usage, priced) is
// replaced by its record's final cost (with late usage and the judge's
// tokens) when the record arrives.
package runctl

import (
	"slices"
	"strings"
	"sync"

	"harness/schemas"
)

// Limits are the conditions that end a run before its last unit.
type Limits struct {
	// MaxUSD stops the run once it has cost this many dollars (0: no
	// limit).
	MaxUSD float64
	// MaxTokens stops the run once it has used this many tokens, the
	// agent's and the judge's (0: no limit).
	MaxTokens int64
	// StopOn stops the run at the first record (or turn) with an error
	// of one of these classes: the agent's error, or the grader's (a
	// grader class is known once the record is graded).
	StopOn []string
	// ConfigStop stops the run once this many records failed for the
	// configuration's reasons (the agent cannot start: a missing binary,
	// no key; owner config), so a run does not fail every unit the same
	// way (0: never).
	ConfigStop int
	// SameGraderError stops the run when each of the first
	// SameGraderError graded records has the same grader error (the
	// same class and gist): a grader broken for every record would fail
	// the rest too, each after an agent run (0: never).
	SameGraderError int
}

// Stop kinds.
const (
	// KindBudget: MaxUSD or MaxTokens was reached.
	KindBudget = "budget"
	// KindStopOn: a unit failed with an error class of StopOn.
	KindStopOn = "stop-on"
	// KindConfig: ConfigStop units failed for the configuration.
	KindConfig = "config"
	// KindSameGraderError: the first SameGraderError graded records all
	// had the same grader error; ID, Trial and Error are the last's.
	KindSameGraderError = "same-grader-error"
)

// Stop says why a run stopped.
type Stop struct {
	// Kind is KindBudget, KindStopOn or KindConfig.
	Kind string
	// Limit is the one limit reached: MaxUSD, MaxTokens, or StopOn with
	// the class of the error.
	Limit Limits
	// Spent is what the run had cost when it stopped.
	Spent *schemas.Cost
	// ID, Trial and Error are the unit that stopped a KindStopOn or
	// KindConfig run and its error.
	ID    string
	Trial int
	Error *schemas.ErrorInfo
}

// Controller applies Limits to a run as it goes. Its methods may be called
// from several goroutines at once.
type Controller struct {
	limits  Limits
	price   func(*schemas.CaptureRecord) *schemas.Cost
	stopped chan struct{}

	mu      sync.Mutex
	final   *schemas.Cost          // records that are in
	pending map[unit]*schemas.Cost // units whose turns answered, record not in yet
	done    map[unit]bool          // units whose record is in
	configs int                    // records that failed for the configuration
	stop    *Stop
	// graded counts the records graded so far; sameErr is the error
	// every one of them had ("" once one differs or passed); judged holds
	// the units counted there, each once (by its first grading).
	graded  int
	sameErr string
	judged  map[unit]bool
}

type unit struct {
	id    string
	trial int
}

// New returns a controller for limits; price gives the cost of a record
// (of its usage and scores).
func New(limits Limits, price func(*schemas.CaptureRecord) *schemas.Cost) *Controller {
	return &Controller{limits: limits, price: price, stopped: make(chan struct{}), pending: map[unit]*schemas.Cost{}, done: map[unit]bool{}}
}

// Called takes a unit's spending as one of its model calls ends: a record
// with its id, trial and the calls it has made so far (priced
// provisionally, as Answered prices a turn's). Only the budget is decided
// on it. Calls end on several goroutines at once, so a report with fewer
// tokens than the unit's last one is an earlier one arriving late and is
// ignored, as is one for a unit whose record is in.
func (c *Controller) Called(rec *schemas.CaptureRecord) {
	cost := c.price(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	u := unit{rec.ID, rec.Trial}
	if c.done[u] {
		return
	}
	if old := c.pending[u]; old != nil && old.Tokens() > cost.Tokens() {
		return
	}
	c.pending[u] = cost
	c.checkBudget()
}

// Answered takes a unit's state as one of its turns answers: its usage so
// far (priced provisionally) and its error, if any.
func (c *Controller) Answered(rec *schemas.CaptureRecord) {
	cost := c.price(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[unit{rec.ID, rec.Trial}] = cost
	c.check(rec)
}

// Record takes a finished record, whose Cost is final, in place of what its
// turns reported.
func (c *Controller) Record(rec *schemas.CaptureRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, unit{rec.ID, rec.Trial})
	c.done[unit{rec.ID, rec.Trial}] = true
	c.final = c.final.Add(rec.Cost)
	// What its failed attempts spent is spent too.
	c.final = c.final.Add(rec.AttemptsCost())
	if rec.Error != nil && rec.Error.Class == schemas.ErrInterrupted {
		return // a stop is not a verdict
	}
	if rec.Error != nil && rec.Error.Owner == schemas.OwnerConfig {
		c.configs++
		if c.stop == nil && c.limits.ConfigStop > 0 && c.configs >= c.limits.ConfigStop {
			c.halt(&Stop{Kind: KindConfig, Limit: Limits{ConfigStop: c.limits.ConfigStop}, ID: rec.ID, Trial: rec.Trial, Error: rec.Error})
			return
		}
	}
	c.check(rec)
	c.checkGrader(rec)
}

// Graded takes a unit's grading as it answers, before the record is in
// (and before a grader's failure is graded again): the stop rule and the
// same grader error stop are decided on it, so a broken grader stops the
// run at once rather than after its retries.
func (c *Controller) Graded(rec *schemas.CaptureRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec.Error != nil || rec.Score == nil || rec.Score.Error == nil {
		return
	}
	c.check(rec)
	c.checkGrader(rec)
}

// checkGrader stops the run when the first graded records all had the
// same grader error; c.mu is held.
func (c *Controller) checkGrader(rec *schemas.CaptureRecord) {
	n := c.limits.SameGraderError
	if n <= 0 || c.stop != nil || rec.Error != nil || rec.Score == nil || c.graded >= n || c.judged[unit{rec.ID, rec.Trial}] {
		return
	}
	if c.judged == nil {
		c.judged = map[unit]bool{}
	}
	c.judged[unit{rec.ID, rec.Trial}] = true
	c.graded++
	e := rec.Score.Error
	key := ""
	if e != nil {
		key = e.Class + "\x00" + e.Gist()
	}
	switch {
	case key == "":
		c.sameErr = ""
	case c.graded == 1:
		c.sameErr = key
	case key != c.sameErr:
		c.sameErr = ""
	}
	if c.graded == n && c.sameErr != "" {
		c.halt(&Stop{Kind: KindSameGraderError, Limit: Limits{SameGraderError: n}, ID: rec.ID, Trial: rec.Trial, Error: e})
	}
}

// check stops the run if rec's error or the spending reach a limit; c.mu
// is held.
func (c *Controller) check(rec *schemas.CaptureRecord) {
	if c.stop != nil {
		return
	}
	if e := stopError(rec); e != nil && slices.ContainsFunc(c.limits.StopOn, func(class string) bool { return strings.TrimSpace(class) == e.Class }) {
		c.halt(&Stop{Kind: KindStopOn, Limit: Limits{StopOn: []string{e.Class}}, ID: rec.ID, Trial: rec.Trial, Error: e})
		return
	}
	c.checkBudget()
}

// checkBudget stops the run if the spending reaches a limit; c.mu is held.
func (c *Controller) checkBudget() {
	if c.stop != nil {
		return
	}
	spent := c.spentLocked()
	switch {
	case c.limits.MaxUSD > 0 && spent != nil && spent.USD != nil && *spent.USD >= c.limits.MaxUSD:
		c.halt(&Stop{Kind: KindBudget, Limit: Limits{MaxUSD: c.limits.MaxUSD}})
	case c.limits.MaxTokens > 0 && spent.Tokens() >= c.limits.MaxTokens:
		c.halt(&Stop{Kind: KindBudget, Limit: Limits{MaxTokens: c.limits.MaxTokens}})
	}
}

// stopError is the error of a record the stop rule looks at: the agent's, or
// else its grader's (class grader_error when the grader gave none).
func stopError(rec *schemas.CaptureRecord) *schemas.ErrorInfo {
	if rec.Error != nil {
		return rec.Error
	}
	if rec.Score == nil || rec.Score.Error == nil {
		return nil
	}
	e := *rec.Score.Error
	if e.Class == "" {
		e.Class = schemas.ErrGraderError
	}
	return &e
}

func (c *Controller) halt(s *Stop) {
	s.Spent = c.spentLocked()
	c.stop = s
	close(c.stopped)
}

// spentLocked is the final costs plus the provisional ones; c.mu is held.
func (c *Controller) spentLocked() *schemas.Cost {
	var sum *schemas.Cost
	sum = sum.Add(c.final)
	for _, p := range c.pending {
		sum = sum.Add(p)
	}
	return sum
}

// Spent is what the run has cost so far: every record that is in, and
// the usage the turns of the others reported.
func (c *Controller) Spent() *schemas.Cost {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spentLocked()
}

// Stopped is closed once a limit is reached.
func (c *Controller) Stopped() <-chan struct{} { return c.stopped }

// Stop says why the run stopped (nil while it has not).
func (c *Controller) Stop() *Stop {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stop
}

// Reset forgets a budget stop that stopped nothing (every unit had run
// when it was reached); a stop-on stop stays.
func (c *Controller) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil && c.stop.Kind == KindBudget {
		c.stop = nil
	}
}
