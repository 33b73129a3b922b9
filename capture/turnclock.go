package capture

import (
	"fmt"
	"time"

	"harness/ledger"
	"harness/modelgateway"
)

// turnClock is a prompt turn's time limit. Counting working time only
// (route set), its deadline moves out by the time the agent spends in the
// turn on the provider's failures (ledger.Waited), read from the
// gateway's ledger each time the deadline comes: a failed call, and the
// agent's wait after it until its next call, do not count. A wait still
// open (no call after the failure yet) counts at most the limit itself, so
// an agent that stops calling after a failure still times out.
type turnClock struct {
	timer  *time.Timer
	start  time.Time
	limit  time.Duration
	route  *modelgateway.Route
	waited time.Duration
}

// newTurnClock starts a turn's clock: wall time with route nil, working
// time through route otherwise.
func newTurnClock(limit time.Duration, route *modelgateway.Route) *turnClock {
	return &turnClock{timer: time.NewTimer(limit), start: time.Now(), limit: limit, route: route}
}

// C fires at the deadline; then call expired.
func (c *turnClock) C() <-chan time.Time { return c.timer.C }

// expired says, once C fired, that the turn has used its limit; when it
// has not (provider waits moved the deadline), the timer is set again.
func (c *turnClock) expired(now time.Time) bool {
	if c.route == nil {
		return true
	}
	ms := ledger.Waited(c.route.Peek(), c.start.UnixMilli(), now.UnixMilli(), c.limit.Milliseconds())
	c.waited = time.Duration(ms) * time.Millisecond
	left := c.start.Add(c.limit + c.waited).Sub(now)
	if left <= 0 {
		return true
	}
	c.timer.Reset(left)
	return false
}

// stop stops the timer.
func (c *turnClock) stop() { c.timer.Stop() }

// exceeded words a turn's timeout.
func (c *turnClock) exceeded(n int) string {
	if c.route == nil {
		return fmt.Sprintf("turn %d exceeded its %s timeout", n, c.limit)
	}
	return fmt.Sprintf("turn %d exceeded its %s working-time limit (and %s on the provider's failures)", n, c.limit, c.waited.Round(time.Millisecond))
}

// clock starts the clock of a unit's turn.
func (w *worker) clock(run *caseRun, limit time.Duration) *turnClock {
	if !w.r.cfg.WorkingTime {
		return newTurnClock(limit, nil)
	}
	return newTurnClock(limit, run.modelRoute())
}
