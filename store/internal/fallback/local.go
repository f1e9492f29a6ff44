package fallback

import (
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/internal/memory"
)

// How a Fallback decides while Redis is down: in process, each limit
// divided among the instances, starting from what Redis last said, and
// recording for Redis what it admits and resets.

// Why a request is decided in process (see backlogOf).
type localMode uint8

const (
	// outage: Redis is down.
	outage localMode = iota
	// waiting: Redis is up, and the key's backlog still waits for it.
	waiting
	// aside: Redis is up, and the request's own time ran out while it
	// waited for the answer another request of this instance was
	// getting from Redis (Fault Waited). That request judges Redis; this
	// one is decided here, within its budget, and what it admits is
	// brought to Redis as after an outage (see settle), while the key's
	// other requests go on to Redis.
	aside
)

// allowLocally decides c in process, with the limits divided among the
// instances, when mode applies (see backlogOf). Otherwise it decides
// nothing (decided false): Redis is to decide. A key's first decision
// in process starts from what Redis last said of it; what it admits is
// recorded for Redis.
func (f *Fallback) allowLocally(c *Call, mode localMode) (d ratelimit.Decision, decided bool) {
	sh, p, local, here := f.inProcess(c, mode)
	if !here {
		return d, false
	}
	defer sh.mu.Unlock()
	if int64(c.Cost) > local.MinCapacity {
		return tooCostly(c.Cost, c.Limits, local), true
	}
	at := backlogAt{p, c.Key, f.clock.now()}
	var ebuf [4]*pendingLimit
	entries := ebuf[:0]
	if p != nil {
		for i := range c.Set.Limits {
			if i == c.Set.Slot {
				continue // slots are this instance's own: nothing to seed or bring back
			}
			if e := f.entry(at, &c.Set.Limits[i], &local.Limits[i]); e != nil {
				entries = append(entries, e)
			}
		}
	}
	cost, now := c.Cost, at.now
	d = f.local.Decide(c.Key, cost, c.Limits, local)
	if d.Allowed {
		for _, e := range entries {
			if !e.c.Usage { // charged once the response is done: see endLocally
				e.spend(e.c.CostFor(int64(cost)), now)
			}
		}
	}
	d.Fallback = true
	return d, true
}

// inProcess tells whether c is decided in process (see backlogOf): then
// it counts the decision, and returns the locked shard of c's key, which
// the caller unlocks, the key's backlog and the share of c's limits this
// instance decides under; else it leaves the shard unlocked.
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
// key is to be decided in process: in an outage, while Redis is down; in
// waiting, while key's backlog waits for Redis, unless it holds only
// decisions made aside; aside, while Redis is up. An outage or aside
// decision makes the backlog, unless it is full (nil). A backlog made
// aside leaves its key on Redis; the outage's first decision of the key
// takes it over, seeding the state in process again from what Redis last
// said.
func (f *Fallback) backlogOf(sh *backlogShard, key string, mode localMode) (p *pendingKey, here bool) {
	switch mode {
	case waiting:
		p = sh.keys[key]
		return p, p != nil && !p.aside && !f.down.Load()
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

// endLocally is allowLocally's End: it charges usage to the limits of c
// charged from usage in process, under this instance's share, and records
// the charge for Redis. ended is false when Redis is to charge it.
func (f *Fallback) endLocally(c *Call, usage int, mode localMode) (d ratelimit.Decision, ended bool) {
	sh, p, local, here := f.inProcess(c, mode)
	if !here {
		return d, false
	}
	defer sh.mu.Unlock()
	at := backlogAt{p, c.Key, f.clock.now()}
	for i := range c.Set.Limits {
		if !c.Set.Limits[i].Usage || p == nil {
			continue
		}
		if e := f.entry(at, &c.Set.Limits[i], &local.Limits[i]); e != nil && usage > 0 {
			e.spend(int64(usage), at.now)
		}
	}
	f.local.Charge(c.Key, int64(usage), local)
	d = f.local.PeekFrom(memory.Peek{Key: c.Key, Cost: 1, Limits: c.Limits, Set: local})
	d.Fallback = true
	return d, true
}

// A backlogAt is a key's backlog, while the key is decided in process at
// now.
type backlogAt struct {
	p   *pendingKey
	key string
	now int64
}

// entry returns the backlog's entry for the key's limit c, counted under
// its share local, seeding the state in process the first time; nil when
// the backlog holds as many limit states as a key may.
func (f *Fallback) entry(at backlogAt, c, local *spec.Limit) *pendingLimit {
	e := at.p.of(c)
	if e != nil && !e.seeded {
		f.seed(at.key, c, local, at.now)
		e.seeded = true
	}
	return e
}

// seed starts key's state under c in process, counted under its share
// local, from what Redis last said of it: of the units Redis had left,
// this instance may spend its share. When Redis said nothing of it since
// the last outage, the state in process, which has counted everything
// since, stays as it is.
func (f *Fallback) seed(key string, c, local *spec.Limit, now int64) {
	remaining, ok := f.seen.get(key, c, now)
	if !ok {
		return
	}
	one := spec.NewSet([]spec.Limit{*local})
	f.local.Forget(key, one, false)
	n, capacity := int64(f.instances), local.Capacity
	if spent := capacity - min(capacity, (remaining+n-1)/n); spent > 0 {
		f.local.Take(key, spent, &one.Limits[0])
	}
}

// peekLocally is allowLocally's Peek: it answers when allowLocally would
// decide, as its decision would find the state, and changes nothing: no
// backlog is made, no state seeded. peeked is false when Redis is to
// answer.
func (f *Fallback) peekLocally(c *Call, mode localMode) (d ratelimit.Decision, peeked bool) {
	sh := f.backlog.shard(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.keys[c.Key]
	if mode == waiting && (p == nil || p.aside || f.down.Load()) || mode == outage && !f.down.Load() {
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
// key made now would find spent once it has seeded the limit's state (see
// seed), or -1 for a state it would leave as it is; nil when it would seed
// none. p is key's backlog, nil when it has none; its shard is locked.
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
			spent = make([]int64, len(set.Limits))
			for j := range spent {
				spent[j] = -1
			}
		}
		n, capacity := int64(f.instances), local.Limits[i].Capacity
		spent[i] = capacity - min(capacity, (remaining+n-1)/n)
	}
	return spent
}

// resetLocally resets key in process and records the reset for Redis.
// The shard is locked.
func (f *Fallback) resetLocally(sh *backlogShard, key string, set, local *spec.Set) error {
	p, _ := sh.get(&f.backlog, key)
	if p == nil {
		return fmt.Errorf("ratelimit: fallback: Redis is down and the backlogs of %d keys wait for it; this reset cannot be kept (see store.FallbackOptions.MaxBacklog)", f.backlog.max)
	}
	for i := range set.Limits {
		if p.of(&set.Limits[i]) == nil {
			return fmt.Errorf("ratelimit: fallback: Redis is down and key's backlog holds %d limits already; this reset cannot be kept", maxPendingLimits)
		}
	}
	for i := range set.Limits {
		e := p.of(&set.Limits[i])
		e.reset, e.seeded, e.spent = true, true, nil
	}
	f.local.Forget(key, local, true)
	return nil
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
			// A window from now: the time until a share as large as the
			// limit's own comes back. A calendar's is its period's end.
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
