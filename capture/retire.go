package capture

import (
	"sync"
	"time"
)

// retireGrace is how long a retiring agent gets to exit by itself after its
// stdin closed, and again after SIGTERM, before its process group (or
// sandbox) is killed. Its records are complete before it retires, so this
// only bounds how long it lingers.
const retireGrace = 500 * time.Millisecond

// retirer shuts agents down in the background, off the path of the next
// unit: stdin closed, SIGTERM to the process group after a short grace,
// then SIGKILL. At most max agents linger at once (each holds memory);
// one more waits for a slot.
type retirer struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

func newRetirer(max int) *retirer {
	return &retirer{slots: make(chan struct{}, max)}
}

// start runs shut in the background once a slot is free, and then done.
func (rt *retirer) start(shut func(), done func()) {
	rt.wg.Add(1) // before waiting for a slot: wait sees it at once
	rt.slots <- struct{}{}
	go func() {
		defer rt.wg.Done()
		defer func() { <-rt.slots }()
		shut()
		if done != nil {
			done()
		}
	}()
}

// after runs fn in the background once gone is closed; wait waits for it.
func (rt *retirer) after(gone <-chan struct{}, fn func()) {
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		<-gone
		fn()
	}()
}

// wait returns once every retiring agent is gone and every task queued
// with after has run.
func (rt *retirer) wait() { rt.wg.Wait() }
