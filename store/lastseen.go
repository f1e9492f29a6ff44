package store

import (
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// lastSeen remembers, for the keys a Fallback decided on Redis lately, what
// Redis last said of each of their limits: how much was left, until when.
// When Redis goes down, a key's first decision in process starts from it,
// so that the outage does not hand out again what Redis had already
// given. It holds at most max keys: a full shard drops, of a random sample
// of its keys, those whose limits have all replenished, else one.
type lastSeen struct {
	shards   [32]seenShard
	perShard int
}

type seenShard struct {
	mu sync.Mutex
	m  map[string]seenKey
}

// maxSeenLimits bounds the limit states remembered per key.
const maxSeenLimits = 4

type seenKey struct {
	n      int
	limits [maxSeenLimits]seenLimit
}

type seenLimit struct {
	c         *compiled
	remaining int64
	at        int64 // when Redis said so, on the Fallback's clock (µs)
	until     int64 // when the limit is full again
}

func newLastSeen(max int) *lastSeen {
	return &lastSeen{perShard: (max + 31) / 32}
}

func (s *lastSeen) shard(key string) *seenShard {
	return &s.shards[keyHash(key)%uint32(len(s.shards))]
}

// put records Redis's answer for key under cs, made at now. Answers to
// concurrent requests arrive in any order: within skew of each other,
// the lowest remaining is kept.
func (s *lastSeen) put(key string, cs []*compiled, results []ratelimit.Result, now, skew int64) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k, ok := sh.m[key]
	if !ok {
		if sh.m == nil {
			sh.m = make(map[string]seenKey)
		}
		if len(sh.m) >= s.perShard {
			sh.evict(now)
		}
	}
	for i, c := range cs {
		r := &results[i]
		e := seenLimit{c: c, remaining: int64(r.Remaining), at: now, until: now + int64(r.ResetAfter/time.Microsecond)}
		j := 0
		for j < k.n && k.limits[j].c != c && k.limits[j].c.suffix != c.suffix {
			j++
		}
		switch {
		case j == maxSeenLimits:
			copy(k.limits[:], k.limits[1:]) // forget the oldest
			j--
		case j == k.n:
			k.n++
		case now-k.limits[j].at < skew:
			e.remaining = min(e.remaining, k.limits[j].remaining)
		}
		k.limits[j] = e
	}
	sh.m[key] = k
}

// get returns what Redis last said of key under c, if the limit has not
// replenished since.
func (s *lastSeen) get(key string, c *compiled, now int64) (remaining int64, ok bool) {
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := sh.m[key]
	for _, e := range k.limits[:k.n] {
		if (e.c == c || e.c.suffix == c.suffix) && now < e.until {
			return e.remaining, true
		}
	}
	return 0, false
}

// forget drops what is known of key, after a Reset.
func (s *lastSeen) forget(key string) {
	sh := s.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

// evict makes room for a key: of a random sample of keys, those whose
// limits have all replenished go, or, if none has, the first one seen. The
// shard is locked.
func (sh *seenShard) evict(now int64) {
	seen, freed := 0, false
	var first string
	for key, k := range sh.m { // map order is random
		live := false
		for _, e := range k.limits[:k.n] {
			live = live || now < e.until
		}
		if !live {
			delete(sh.m, key)
			freed = true
		} else if seen == 0 {
			first = key
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if !freed {
		delete(sh.m, first)
	}
}
