package fallback

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// lastSeen remembers what Redis last said of each limit of the keys it
// decided lately, how much was left until when, for a key's first decision
// in an outage not to hand out again what Redis had already given.
//
// It holds about maxStates states in two generations per shard: when the
// new one is full, the old one is dropped whole, so making room costs no
// scan. A state is known by a seeded 64-bit hash of its key and limit, so
// the maps hold no pointers for the GC to scan; two states sharing a hash
// (about one chance in 10^7 with a million states) share their record.
type lastSeen struct {
	seed   maphash.Seed
	shards [32]seenShard
	perGen int   // states per generation of a shard
	skew   int64 // the Fallback's budget, µs
}

type seenShard struct {
	mu       sync.Mutex
	cur, old map[uint64]seenState
}

type seenState struct {
	remaining int64
	at        int64 // when Redis said so, on the Fallback's clock (µs)
	until     int64 // when the limit is full again
}

// newLastSeen returns a lastSeen of about maxStates states; skew: see put.
func newLastSeen(maxStates int, skew int64) *lastSeen {
	return &lastSeen{seed: maphash.MakeSeed(), perGen: max(maxStates/64, 1), skew: skew}
}

// locate returns the hash and shard of key's state under c.
func (s *lastSeen) locate(key string, c *spec.Limit) (uint64, *seenShard) {
	// Limits with the same state suffix share their state.
	h := maphash.String(s.seed, key) ^ maphash.String(s.seed, c.Suffix)*0x9e3779b97f4a7c15
	return h, &s.shards[h%uint64(len(s.shards))]
}

// put records Redis's answer for key under cs, to a request sent at now.
// Answers to concurrent requests arrive in any order: within s.skew (the
// budget) of each other, the lowest remaining is kept. The wait for an
// answer is two budgets at worst (see batcher.do): the limit is held full
// again no earlier than Redis said, counted from then.
func (s *lastSeen) put(key string, cs []spec.Limit, results []ratelimit.Result, now int64) {
	skew := s.skew
	for i := range cs {
		c, r := &cs[i], &results[i]
		e := seenState{remaining: int64(r.Remaining), at: now, until: now + 2*skew + int64(r.ResetAfter/time.Microsecond)}
		h, sh := s.locate(key, c)
		sh.mu.Lock()
		last, ok := sh.cur[h]
		if !ok {
			if len(sh.cur) >= s.perGen || sh.cur == nil {
				sh.old, sh.cur = sh.cur, make(map[uint64]seenState)
			}
			if last, ok = sh.old[h]; ok {
				delete(sh.old, h)
			}
		}
		if ok && now-last.at < skew {
			e.remaining = min(e.remaining, last.remaining)
		}
		sh.cur[h] = e
		sh.mu.Unlock()
	}
}

// get returns what Redis last said of key under c, unless since replenished.
func (s *lastSeen) get(key string, c *spec.Limit, now int64) (remaining int64, ok bool) {
	h, sh := s.locate(key, c)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.cur[h]
	if !ok {
		e, ok = sh.old[h]
	}
	if !ok || now >= e.until {
		return 0, false
	}
	return e.remaining, true
}

// forget drops what is known of key under cs.
func (s *lastSeen) forget(key string, cs []spec.Limit) {
	for i := range cs {
		h, sh := s.locate(key, &cs[i])
		sh.mu.Lock()
		delete(sh.cur, h)
		delete(sh.old, h)
		sh.mu.Unlock()
	}
}
