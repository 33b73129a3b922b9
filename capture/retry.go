package capture

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"harness/failure"
	"harness/schemas"
)

// Retry says which failed units run again, and how long to wait first.
type Retry struct {
	// Max is how many times a unit runs again after its first attempt;
	// 0 runs none again.
	Max int
	// On names the owners or error classes retried; empty means
	// infrastructure failures (failure.Retryable). Agent-owned failures
	// are never retried.
	On map[string]bool
	// Backoff is the wait before the first retry, doubled for each
	// further one up to MaxBackoff, with full jitter (a uniform draw
	// between half and the whole of it); a provider's Retry-After makes
	// it longer. 0 means one second.
	Backoff, MaxBackoff time.Duration
	// Jitter draws the jitter, a number in [0, 1); nil uses math/rand/v2.
	Jitter func() float64
}

// wait is the pause before attempt n+1 of a unit whose attempt n failed
// with e.
func (p *Retry) wait(n int, e *schemas.ErrorInfo) time.Duration {
	base := p.Backoff
	if base <= 0 {
		base = time.Second
	}
	ceiling := p.MaxBackoff
	if ceiling <= 0 {
		ceiling = 30 * time.Second
	}
	d := base << min(max(n-1, 0), 16)
	if d > ceiling || d <= 0 {
		d = ceiling
	}
	j := p.Jitter
	if j == nil {
		j = rand.Float64
	}
	d = d/2 + time.Duration(j()*float64(d/2))
	if e != nil {
		if after := failure.RetryAfter(e.Message + "\n" + string(e.Data) + "\n" + e.Stderr); after > d {
			d = min(after, 5*ceiling)
		}
	}
	return d
}

// retrier holds the units waiting to run again: those whose wait is over
// (ready), and those still waiting (timers). The feeder takes the ready
// ones before fresh units; once the run ends, what still waits is
// written as it failed.
type retrier struct {
	mu     sync.Mutex
	ready  []Unit
	timers map[*time.Timer]*caseRun
	closed bool
	wake   chan struct{}
	// outstanding counts the units handed to the workers whose last
	// record is not out yet (a unit waiting to run again is one).
	outstanding atomic.Int64
}

func newRetrier() *retrier {
	return &retrier{timers: map[*time.Timer]*caseRun{}, wake: make(chan struct{}, 1)}
}

func (q *retrier) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// done is told that a unit's last record is out.
func (q *retrier) done() {
	if q.outstanding.Add(-1) == 0 {
		q.signal()
	}
}

// schedule has run's unit run again after wait, its failed attempt kept;
// false when the run has ended (the record is then written as it is).
func (q *retrier) schedule(run *caseRun, wait time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	u := run.unit
	u.Record = nil
	u.Attempts = run.record.AsAttempts(wait.Milliseconds())
	var t *time.Timer
	t = time.AfterFunc(wait, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if _, ok := q.timers[t]; !ok {
			return // flushed
		}
		delete(q.timers, t)
		q.ready = append(q.ready, u)
		q.signal()
	})
	q.timers[t] = run
	return true
}

// pop takes a unit whose wait is over.
func (q *retrier) pop() (Unit, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ready) == 0 {
		return Unit{}, false
	}
	u := q.ready[0]
	q.ready = q.ready[1:]
	return u, true
}

// flush ends retrying: the units still waiting give back the records of
// their failed attempts, to be written as they are.
func (q *retrier) flush() []*caseRun {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	var runs []*caseRun
	for t, run := range q.timers {
		t.Stop()
		runs = append(runs, run)
	}
	q.timers = map[*time.Timer]*caseRun{}
	for _, u := range q.ready {
		// Its last failure is on the attempts it carries.
		last := u.Attempts[len(u.Attempts)-1]
		rec := &schemas.CaptureRecord{ID: u.Case.ID, Trial: u.Trial, Input: u.Case.Input, Trajectory: []schemas.Step{},
			Metadata: map[string]any{}, Timing: last.Timing, Error: last.Error, Usage: last.Usage, Output: last.Output,
			Attempts: u.Attempts[:len(u.Attempts)-1]}
		runs = append(runs, &caseRun{unit: u, record: rec, judged: make(chan struct{})})
	}
	q.ready = nil
	return runs
}

// retry has a failed unit run again when its failure is one to retry and
// it has attempts left; the record is then not written. ctx is the run's.
func (r *Runner) retry(ctx context.Context, run *caseRun) bool {
	p := &r.cfg.Retry
	rec := run.record
	if r.retries == nil || p.Max <= 0 || len(rec.Attempts) >= p.Max || ctx.Err() != nil || r.stopped() || !failure.Retryable(rec, p.On) {
		return false
	}
	return r.retries.schedule(run, p.wait(len(rec.Attempts)+1, rec.Error))
}

// regradeFailed grades a unit again, up to the retry bound, while its
// graders failed to judge it (never running its agent again); each failed
// grading is kept as an attempt.
func (r *Runner) regradeFailed(ctx, runCtx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) {
	p := &r.cfg.Retry
	for i := 0; i < p.Max && r.cfg.Grade != nil && graderFailed(rec) && runCtx.Err() == nil && ctx.Err() == nil && !r.stopped(); i++ {
		wait := p.wait(i+1, nil)
		start := time.Now()
		select {
		case <-time.After(wait):
		case <-runCtx.Done():
			return
		}
		if r.stopped() {
			return
		}
		failed := *rec.Score.Error
		rec.Attempts = append(rec.Attempts, schemas.Attempt{Attempt: len(rec.Attempts) + 1, Error: &failed,
			Timing: schemas.Timing{Start: start.UnixMilli(), End: start.UnixMilli(), Total: rec.Score.DurationMs}, Wait: wait.Milliseconds()})
		rec.Score, rec.Scores = nil, nil
		r.grade(ctx, rec, c)
	}
}

// graderFailed says whether the record's graders failed to judge it (and
// its agent did not fail first).
func graderFailed(rec *schemas.CaptureRecord) bool {
	return rec.Error == nil && rec.Score != nil && rec.Score.Error != nil && rec.Score.Error.Owner == schemas.OwnerGrader &&
		failure.Retryable(&schemas.CaptureRecord{Error: rec.Score.Error}, map[string]bool{schemas.OwnerGrader: true}) &&
		failure.Regradable(rec.Score.Error)
}
