package store

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// The slots of Concurrent limits that this process's requests hold: each
// a lease, renewed every third of its length until its request ends.

// lease is one slot held: its id, the key it is held under (the store's
// key of its client) and its Concurrent limit.
type lease struct {
	id  int64
	key string
	c   *compiled
}

// maxLeases bounds the leases a store renews: the requests in flight
// under Concurrent limits. Past it, a slot is held without renewal, and
// its lease ends after its length even if its request is still running.
const maxLeases = 1 << 20

// leases is a store's table of the leases it renews. renew is the store's
// way to renew a batch; it runs on the table's goroutine, which runs while
// the table holds any. The zero leases, given renew, is ready to use.
type leases struct {
	renew func(held []lease)

	mu      sync.Mutex
	held    map[int64]lease
	running bool
	emptied chan struct{} // told when the table empties, so that the goroutine ends at once
}

// hold renews l from now on, until drop.
func (t *leases) hold(l lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = make(map[int64]lease)
		t.emptied = make(chan struct{}, 1)
	}
	if len(t.held) >= maxLeases {
		return
	}
	t.held[l.id] = l
	if !t.running {
		t.running = true
		go t.loop()
	}
}

// drop stops renewing the lease id.
func (t *leases) drop(id int64) {
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

// loop renews the leases held every third of the shortest lease, and
// ends when none is held.
func (t *leases) loop() {
	var batch []lease
	for {
		t.mu.Lock()
		every := time.Duration(0)
		for _, l := range t.held {
			if d := time.Duration(l.c.Window) * time.Microsecond / 3; every == 0 || d < every {
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
		if batch = t.snapshot(); len(batch) > 0 {
			t.renew(batch)
		}
	}
}

// leaseIDs makes the ids of leases: a random 20-bit prefix of this
// process, then a count, so that ids of several instances do not meet and
// each fits in the 53 bits a script keeps exact.
var leaseIDs struct {
	once   sync.Once
	prefix int64
	n      atomic.Uint32
}

func newLeaseID() int64 {
	leaseIDs.once.Do(func() {
		var b [4]byte
		rand.Read(b[:])
		leaseIDs.prefix = int64(binary.BigEndian.Uint32(b[:])&(1<<20-1)) + 1
	})
	return leaseIDs.prefix<<32 | int64(leaseIDs.n.Add(1))
}

// snapshot returns the leases held.
func (t *leases) snapshot() []lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	batch := make([]lease, 0, len(t.held))
	for _, l := range t.held {
		batch = append(batch, l)
	}
	return batch
}
