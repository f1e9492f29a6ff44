// Package slots keeps the Concurrent slots and usage holds of this
// process's requests, for a store to renew until the requests end.
package slots

import (
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// Slot is one slot held: its id, the key it is held under (the store's
// key of its client) and its Concurrent limit; or one request's
// reservations, under the limits charged from usage of Set (Limit nil).
type Slot struct {
	ID    int64
	Key   string
	Limit *spec.Limit
	Set   *spec.Set
}

// Life is how long s lasts unrenewed, in µs.
func (s *Slot) Life() int64 {
	if s.Limit == nil {
		return int64(spec.HoldLife / time.Microsecond)
	}
	return s.Limit.Window
}

// MaxHeld bounds the slots a store renews; past it, a slot is held without
// renewal, and ends after its life even if its request still runs.
const MaxHeld = 1 << 20

// Table is a store's table of the slots it renews. Renew is the store's
// way to renew a batch; it runs on the table's goroutine, which runs while
// the table holds any. The zero Table, given Renew, is ready to use.
type Table struct {
	Renew func(held []Slot)

	mu      sync.Mutex
	held    map[int64]Slot
	running bool
	emptied chan struct{} // told when the table empties, so that loop ends at once
}

// Hold renews s from now on, until Drop.
func (t *Table) Hold(s Slot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = make(map[int64]Slot)
		t.emptied = make(chan struct{}, 1)
	}
	if len(t.held) >= MaxHeld {
		return
	}
	t.held[s.ID] = s
	if !t.running {
		t.running = true
		go t.loop()
	}
}

// Drop stops renewing id.
func (t *Table) Drop(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, id)
	if len(t.held) == 0 && t.emptied != nil {
		select {
		case t.emptied <- struct{}{}:
		default:
		}
	}
}

// loop renews the slots every third of the shortest life, until none is held.
func (t *Table) loop() {
	for {
		t.mu.Lock()
		every := time.Duration(0)
		for _, s := range t.held {
			if d := time.Duration(s.Life()) * time.Microsecond / 3; every == 0 || d < every {
				every = d
			}
		}
		if every == 0 {
			t.running = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		timer := time.NewTimer(every)
		select {
		case <-timer.C:
		case <-t.emptied:
			timer.Stop()
			continue
		}
		if batch := t.Held(); len(batch) > 0 {
			t.Renew(batch)
		}
	}
}

// A slot's id is a random 20-bit prefix of this process, then a count,
// so that ids of several instances do not meet and each fits in the 53
// bits a script keeps exact.
var (
	idPrefix = rand.Int64N(1<<20) + 1
	idCount  atomic.Uint32
)

// NewID returns a new slot's id (see idPrefix).
func NewID() int64 { return idPrefix<<32 | int64(idCount.Add(1)) }

// Held returns the slots held.
func (t *Table) Held() []Slot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.held))
}
