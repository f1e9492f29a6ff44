package store

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
)

// denyCache remembers requests Redis denied, so that the same request is
// denied in process until it could pass (see RedisOptions.DenyCacheSize).
// A request of a key that passes, and a Reset, make it forget the key; a
// Reset also keeps out the denials Redis may have made before it. Of
// limits with a ban, only bans are kept, answering any cost.
type denyCache struct {
	shards   [32]denyShard
	perShard int          // keys
	now      func() int64 // µs, monotonic
}

type denyShard struct {
	mu   sync.Mutex
	m    map[string][]denial // by key; a few entries, one per set of limits
	keys atomic.Int32        // len(m), readable without the lock
	// resets counts the Resets of the shard's keys: a denial is cached
	// only if none came while Redis decided, which may predate the DEL.
	resets atomic.Uint64
}

// maxDenialsPerKey bounds the sets of limits remembered for one key.
const maxDenialsPerKey = 4

type denial struct {
	set       *spec.Set // the request's limits
	at, until int64     // when the request was sent, when it could pass (µs)
	cost      int       // the cost denied; other costs have other retry times
	results   []ratelimit.Result
	banned    time.Duration // the Decision's Banned; then until is the ban's end, and any cost matches
}

func newDenyCache(size int) *denyCache {
	start := time.Now()
	return &denyCache{perShard: max(size/32, 1), now: func() int64 {
		return int64(time.Since(start) / time.Microsecond)
	}}
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[spec.KeyHash(key)%uint32(len(c.shards))]
}

// get returns the cached denial of r, its times brought up to now.
func (c *denyCache) get(r *request) (ratelimit.Decision, bool) {
	key, set, cost := r.key, r.set, r.cost
	sh := c.shard(key)
	now := c.now()
	sh.mu.Lock()
	i := slices.IndexFunc(sh.m[key], func(e denial) bool {
		return e.set == set && now < e.until && (cost == e.cost || e.banned > 0)
	})
	if i < 0 {
		sh.mu.Unlock()
		return ratelimit.Decision{}, false
	}
	d := &sh.m[key][i]
	// max: a request sent after now was read may have stored the entry.
	elapsed := time.Duration(max(now-d.at, 0)) * time.Microsecond
	var buf [limitset.MaxInline]ratelimit.Result
	rs := append(buf[:0], d.results...)
	banned := d.banned
	sh.mu.Unlock()
	for i := range rs {
		res := &rs[i]
		res.Limit = r.limits[i]
		res.Window, res.ResetAfter = max(res.Window-elapsed, 0), max(res.ResetAfter-elapsed, 0)
		if !res.Allowed {
			if res.RetryAfter -= elapsed; res.RetryAfter <= 0 {
				res.Allowed, res.RetryAfter = true, 0 // this limit would pass; another denies
			}
		}
	}
	if banned > 0 {
		banned -= elapsed // above 0: now < until
	}
	denied := ratelimit.MakeDecision(rs...)
	denied.Allowed, denied.Banned = false, banned
	return denied, true
}

// A denyEpoch is when a request asked Redis: Resets counted, and time.
type denyEpoch struct {
	resets uint64
	sent   int64 // µs, on the cache's clock
}

// epoch returns key's epoch: read it before asking Redis.
func (c *denyCache) epoch(key string) denyEpoch {
	return denyEpoch{resets: c.shard(key).resets.Load(), sent: c.now()}
}

// put remembers d, Redis's denial of r asked for at epoch, unless a Reset
// came since, or r's set has a ban and the key is not banned.
func (c *denyCache) put(r *request, d ratelimit.Decision, epoch denyEpoch) {
	key, set, cost, sent := r.key, r.set, r.cost, epoch.sent
	if set.Ban != nil && d.Banned == 0 {
		return // its repeat is a strike: Redis must count it
	}
	// Counted from sent, not now, the times end no later than Redis's,
	// which decided after sent.
	e := denial{set: set, at: sent, until: sent + int64(d.RetryAfter/time.Microsecond), cost: cost, results: append([]ratelimit.Result(nil), d.Results()...)}
	if d.Banned > 0 {
		// Until the ban ends Redis answers with the ban alone (its first
		// answer may show the limits' longer times).
		e.until, e.banned = sent+int64(d.Banned/time.Microsecond), d.Banned
		for i := range e.results {
			e.results[i] = ratelimit.Result{Limit: e.results[i].Limit, Window: d.Banned, ResetAfter: d.Banned, RetryAfter: d.Banned}
		}
	}
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.resets.Load() != epoch.resets {
		return // a Reset came while Redis decided: the denial may predate it
	}
	if sh.m == nil {
		sh.m = make(map[string][]denial)
	}
	entries, ok := sh.m[key]
	if !ok && len(sh.m) >= c.perShard {
		sh.evict(c.now(), c.perShard)
	}
	defer func() { sh.keys.Store(int32(len(sh.m))) }()
	for i := range entries {
		if entries[i].set == set && (entries[i].cost == cost || e.banned > 0) {
			entries[i] = e
			return
		}
	}
	if len(entries) == maxDenialsPerKey {
		entries = entries[1:]
	}
	sh.m[strings.Clone(key)] = append(entries, e) // not the caller's buffer, which may hold more: a map keeps the key it is last given
}

// passed forgets the denials of r's key, whose room changed. When r left
// a limit one unit short of another request of its cost, that denial is
// kept until a unit comes back (the limit's Window, from when r was sent).
// Not with a ban, whose denials are strikes, nor a Concurrent limit or a
// limit charged from usage, whose units come back when requests end.
func (c *denyCache) passed(r *request, d ratelimit.Decision, epoch denyEpoch) {
	c.forget(r.key)
	if set := r.set; set.Ban != nil || set.Slot >= 0 || set.Usage {
		return
	}
	var buf [limitset.MaxInline]ratelimit.Result
	next := append(buf[:0], d.Results()...)
	short := false
	for i := range next {
		res := &next[i]
		switch lack := r.set.Limits[i].CostFor(int64(r.cost)) - int64(res.Remaining); {
		case lack <= 0:
			res.Allowed, res.RetryAfter = true, 0
		case lack > 1 || res.Window <= 0:
			return // when more than a unit comes back is not known here
		default:
			res.Allowed, res.RetryAfter, short = false, res.Window, true
		}
	}
	if short {
		c.put(r, ratelimit.MakeDecision(next...), epoch)
	}
}

// evict makes room in a full shard: expired keys go first, else all.
func (sh *denyShard) evict(now int64, capacity int) {
	maps.DeleteFunc(sh.m, func(_ string, entries []denial) bool {
		return !slices.ContainsFunc(entries, func(e denial) bool { return now < e.until })
	})
	if len(sh.m) >= capacity {
		clear(sh.m)
	}
}

// reset drops key's denials and keeps out those of requests under way:
// call it once the Reset's DEL is done.
func (c *denyCache) reset(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	sh.resets.Add(1)
	delete(sh.m, key)
	sh.keys.Store(int32(len(sh.m)))
	sh.mu.Unlock()
}

// forget drops key's denials: its room changed.
func (c *denyCache) forget(key string) {
	sh := c.shard(key)
	if sh.keys.Load() == 0 {
		return // the common case: nothing denied lately in this shard
	}
	sh.mu.Lock()
	delete(sh.m, key)
	sh.keys.Store(int32(len(sh.m)))
	sh.mu.Unlock()
}
