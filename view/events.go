package view

import (
	"encoding/json"
	"sync"
)

// Event is one change pushed to the pages: new or changed rows of a
// source, a source read again from the start, or a change in the runs
// list. IDs increase by one from 1, so a page that reconnects with the
// last id it saw gets exactly the events after it.
type Event struct {
	ID   uint64
	Type string // "rows", "reset" or "runs"
	Data []byte // JSON
}

// rowsEvent is the data of a "rows" event: which trials of a source are
// new or changed (the page fetches what it shows of them).
type rowsEvent struct {
	Source string   `json:"src"`
	Rows   []rowKey `json:"rows"`
	Total  int      `json:"total"`
}

type rowKey struct {
	ID    string `json:"id"`
	Trial int    `json:"trial"`
}

func keysOf(rows []*Row) []rowKey {
	out := make([]rowKey, len(rows))
	for i, r := range rows {
		out[i] = rowKey{r.ID, r.Trial}
	}
	return out
}

// sourceEvent is the data of a "reset" event.
type sourceEvent struct {
	Source string `json:"src"`
}

// broker keeps the latest events and wakes the subscribers.
type broker struct {
	mu   sync.Mutex
	next uint64
	ring []Event // the last len(ring) events, oldest first
	max  int
	wake chan struct{} // closed and replaced at each publish
}

func newBroker(keep int) *broker {
	return &broker{next: 1, max: keep, wake: make(chan struct{})}
}

// publish adds an event.
func (b *broker) publish(typ string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ring = append(b.ring, Event{ID: b.next, Type: typ, Data: data})
	b.next++
	if len(b.ring) > b.max {
		b.ring = append(b.ring[:0], b.ring[len(b.ring)-b.max:]...)
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

// since returns the events after id, a channel closed at the next publish,
// and whether events after id were dropped from the buffer (the page must
// then load everything again).
func (b *broker) since(id uint64) (evs []Event, wake <-chan struct{}, lost bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wake = b.wake
	if len(b.ring) == 0 {
		return nil, wake, id+1 < b.next
	}
	first := b.ring[0].ID
	if id+1 < first {
		lost = true
		id = first - 1
	}
	if id+1 >= b.next {
		return nil, wake, lost
	}
	start := int(id + 1 - first)
	return append([]Event(nil), b.ring[start:]...), wake, lost
}

// last returns the id of the latest event (0 before any).
func (b *broker) last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}
