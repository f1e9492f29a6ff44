package fallback

import (
	"fmt"
	"slices"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
)

// Why a request is decided in process (see backlogOf).
type localMode uint8

const (
	outage  localMode = iota // Redis is down
	waiting                  // Redis is up, and the key's backlog still waits for it
	// aside: Redis is up, and the request's time ran out waiting for
	// another request's answer (Fault Waited), which judges Redis. What
	// this one admits is brought to Redis as after an outage (see
	// settle), while the key's other requests go on to Redis.
	aside
)

// allowLocally decides c in process, under this instance's share, when
// mode applies (see backlogOf); else decided is false. A key's first
// decision in process starts from what Redis last said of it.
func (f *Fallback) allowLocally(c *Call, mode localMode) (d ratelimit.Decision, decided bool) {
	sh, p, local, here := f.inProcess(c, mode)
	if !here {
		return d, false
	}
	defer sh.mu.Unlock()
	if int64(c.Cost) > local.MinCapacity {
		return tooCostly(c.Cost, c.Limits, local), true
	}
	now := f.clock.now()
	var ebuf [4]*pendingLimit
	entries := ebuf[:0]
	if p != nil {
		for i := range c.Set.Limits {
			if i == c.Set.Slot {
				continue // slots are this instance's own: nothing to seed or bring back
			}
			if e := f.entry(p, c.Key, now, &c.Set.Limits[i], &local.Limits[i]); e != nil {
				entries = append(entries, e)
			}
		}
	}
	d = f.local.Decide(c.Key, c.Cost, c.Limits, local)
	for _, e := range entries {
		if d.Allowed && !e.c.Usage { // charged once the response is done: see endLocally
			e.spend(e.c.CostFor(int64(c.Cost)), now)
		}
	}
	d.Fallback = true
	return d, true
}

// inProcess tells whether c is decided in process (see backlogOf): then
// it counts it, and returns its key's shard, locked for the caller to
// unlock, its backlog and this instance's share of c's limits.
func (f *Fallback) inProcess(c *Call, mode localMode) (sh *backlogShard, p *pendingKey, local *spec.Set, here bool) {
	sh = f.backlog.shard(c.Key)
	sh.mu.Lock()
	if p, here = f.backlogOf(sh, c.Key, mode); !here {
		sh.mu.Unlock()
		return nil, nil, nil, false
	}
	f.nLocal.Add(1)
	return sh, p, c.Set.Share(f.instances), true
}

// backlogOf returns key's backlog, in its locked shard sh, and whether
// key is decided in process: in outage, while Redis is down; in waiting,
// while key's backlog waits for Redis, unless it holds only decisions
// made aside; aside, while Redis is up. Outage and aside make the backlog
// unless it is full (nil). The outage's first decision of a key with a
// backlog made aside takes it over, seeding its states again.
func (f *Fallback) backlogOf(sh *backlogShard, key string, mode localMode) (p *pendingKey, here bool) {
	switch mode {
	case waiting:
		p = sh.keys[key]
		return p, f.here(p, waiting)
	case aside:
		if f.down.Load() {
			return nil, false // decided as in the outage instead
		}
		p, fresh := sh.get(&f.backlog, key)
		if fresh {
			p.aside = true
		}
		return p, true
	}
	if !f.down.Load() {
		return nil, false
	}
	p, _ = sh.get(&f.backlog, key) // nil when the backlog is full
	if p != nil && p.aside {
		p.aside = false
		for _, e := range p.limits {
			e.seeded = false
		}
	}
	return p, true
}

// endLocally is allowLocally's End: it charges usage in process and
// records it for Redis; ended is false when Redis is to charge it.
func (f *Fallback) endLocally(c *Call, usage int, mode localMode) (d ratelimit.Decision, ended bool) {
	sh, p, local, here := f.inProcess(c, mode)
	if !here {
		return d, false
	}
	defer sh.mu.Unlock()
	now := f.clock.now()
	for i := range c.Set.Limits {
		if !c.Set.Limits[i].Usage || p == nil {
			continue
		}
		if e := f.entry(p, c.Key, now, &c.Set.Limits[i], &local.Limits[i]); e != nil && usage > 0 {
			e.spend(int64(usage), now)
		}
	}
	f.local.Charge(c.Key, int64(usage), local)
	d = f.local.PeekFrom(memory.Peek{Key: c.Key, Cost: 1, Limits: c.Limits, Set: local})
	d.Fallback = true
	return d, true
}

// entry returns the entry of backlog p of key for its limit c, counted
// under local, seeding the state in process the first time; nil when p
// holds maxPendingLimits already.
func (f *Fallback) entry(p *pendingKey, key string, now int64, c, local *spec.Limit) *pendingLimit {
	e := p.of(c)
	if e != nil && !e.seeded {
		f.seed(key, c, local, now)
		e.seeded = true
	}
	return e
}

// seed starts key's state under c in process, counted under local, from
// what Redis last said of it: this instance may spend its share of what
// Redis had left. Else the state in process, which counted all since, stays.
func (f *Fallback) seed(key string, c, local *spec.Limit, now int64) {
	remaining, ok := f.seen.get(key, c, now)
	if !ok {
		return
	}
	one := spec.NewSet([]spec.Limit{*local})
	f.local.Forget(key, one, false)
	if spent := f.spentOf(remaining, local.Capacity); spent > 0 {
		f.local.Take(key, spent, &one.Limits[0])
	}
}

// spentOf is what a share of capacity has spent when Redis had remaining.
func (f *Fallback) spentOf(remaining, capacity int64) int64 {
	n := int64(f.instances)
	return capacity - min(capacity, (remaining+n-1)/n)
}

// peekLocally is allowLocally's Peek, making no backlog and seeding
// nothing; peeked is false when Redis is to answer.
func (f *Fallback) peekLocally(c *Call, mode localMode) (d ratelimit.Decision, peeked bool) {
	sh := f.backlog.shard(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.keys[c.Key]
	if !f.here(p, mode) {
		return d, false
	}
	local := c.Set.Share(f.instances)
	if int64(c.Cost) > local.MinCapacity {
		return tooCostly(c.Cost, c.Limits, local), true
	}
	d = f.local.PeekFrom(memory.Peek{Key: c.Key, Cost: c.Cost, Limits: c.Limits, Set: local, Spent: f.wouldSeed(p, c.Key, c.Set, local)})
	d.Fallback = true
	return d, true
}

// wouldSeed returns, for each limit of set, the units a local decision of
// key made now would find spent once it has seeded the limit's state, or
// -1 for a state it would leave; nil when it would seed none. p is key's
// backlog or nil; its shard is locked.
func (f *Fallback) wouldSeed(p *pendingKey, key string, set, local *spec.Set) []int64 {
	room := maxPendingLimits // entries p.of could still make
	if p != nil {
		room -= len(p.limits)
	} else if f.backlog.keys.Load() >= f.backlog.max {
		return nil // sh.get would make no backlog: nothing is seeded
	}
	now := f.clock.now()
	var spent []int64
	for i := range set.Limits {
		c := &set.Limits[i]
		if i == set.Slot {
			continue // see allowLocally
		}
		var e *pendingLimit
		if p != nil {
			e = p.find(c)
		}
		switch {
		case e != nil && e.seeded:
			continue
		case e == nil && room == 0:
			continue // p.of would return nil
		case e == nil:
			room--
		}
		remaining, ok := f.seen.get(key, c, now)
		if !ok {
			continue
		}
		if spent == nil {
			spent = slices.Repeat([]int64{-1}, len(set.Limits))
		}
		spent[i] = f.spentOf(remaining, local.Limits[i].Capacity)
	}
	return spent
}

// here reports whether a key whose backlog is p is decided in process in
// mode waiting or outage (see backlogOf). Its shard is locked.
func (f *Fallback) here(p *pendingKey, mode localMode) bool {
	if mode == waiting {
		return p != nil && !p.aside && !f.down.Load()
	}
	return f.down.Load()
}

// resetLocally resets key in process, when mode applies (see here), and
// records the reset for Redis; done is false when Redis is to reset it.
func (f *Fallback) resetLocally(key string, set, local *spec.Set, mode localMode) (done bool, err error) {
	sh := f.backlog.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !f.here(sh.keys[key], mode) {
		return false, nil
	}
	p, _ := sh.get(&f.backlog, key)
	if p == nil {
		return true, fmt.Errorf("ratelimit: fallback: Redis is down and the backlogs of %d keys wait for it; this reset cannot be kept (see store.FallbackOptions.MaxBacklog)", f.backlog.max)
	}
	for i := range set.Limits {
		if p.of(&set.Limits[i]) == nil {
			return true, fmt.Errorf("ratelimit: fallback: Redis is down and key's backlog holds %d limits already; this reset cannot be kept", maxPendingLimits)
		}
	}
	for i := range set.Limits {
		e := p.of(&set.Limits[i])
		e.reset, e.seeded, e.spent = true, true, nil
	}
	f.local.Forget(key, local, true)
	return true, nil
}

// tooCostly denies a request that no instance's share can hold.
func tooCostly(cost int, limits []ratelimit.Limit, local *spec.Set) ratelimit.Decision {
	var buf [limitset.MaxInline]ratelimit.Result
	rs := limitset.Results(limits, &buf)
	for i := range rs {
		r := &rs[i]
		c := &local.Limits[i]
		r.Allowed = int64(cost) <= c.Capacity || c.Algorithm == spec.Concurrent || c.Cost != 0
		if !r.Allowed {
			// The time until a share as large as the limit's own comes
			// back: a window, or the calendar period's end.
			w := r.Limit.Window
			if c.Calendar != nil {
				now := time.Now().UnixMicro()
				_, end := c.Calendar.Period(now)
				w = time.Duration(end-now) * time.Microsecond
			}
			r.ResetAfter, r.RetryAfter = w, w
		}
	}
	d := ratelimit.MakeDecision(rs...)
	d.Allowed, d.Fallback = false, true
	return d
}
