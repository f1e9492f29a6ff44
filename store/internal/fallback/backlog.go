package fallback

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// backlog holds, per key, what a Fallback did in process while the primary
// was down: the resets, and the units admitted since, with their times. A
// local decision holds the key's shard from deciding to recording, and the
// key goes back to the primary only when its backlog is found empty under
// that lock, so no admission is left behind.
type backlog struct {
	shards [16]backlogShard
	keys   atomic.Int64 // in all shards
	max    int64
}

type backlogShard struct {
	mu   sync.Mutex
	keys map[string]*pendingKey
}

// pendingKey is one key's backlog: an entry per limit state touched.
type pendingKey struct {
	limits []*pendingLimit
	// unanswered is a charge the primary may or may not have run: it goes
	// again, with its identity, before anything else of the key, so that
	// the primary counts it once either way (see charge.lua).
	unanswered *Charge
	// aside: it holds only decisions made aside (see localMode), and the
	// key is decided on the primary meanwhile.
	aside bool
}

type pendingLimit struct {
	c      *spec.Limit
	seeded bool       // the state in process started from the primary's
	reset  bool       // delete the state on the primary first
	spent  []Spending // admitted in process since, oldest first
}

// Spending is units admitted in process at a time on the Fallback's clock
// (µs). Admissions close together share one, at the latest of their
// times: counted later, they only count longer.
type Spending struct{ At, Cost int64 }

// A Charge is one key's backlog on its way to the primary, in one run.
// The primary records its ID with what it counts, so that a charge sent
// again after its answer was lost counts nothing more.
type Charge struct {
	Key    string
	ID     string // random; the same each time this charge is sent
	Limits []ChargedLimit
	Err    error // once sent, the error of sending it
}

// ChargedLimit is what a Charge brings to one limit's state: delete it
// first (Reset), then count Spent.
type ChargedLimit struct {
	Limit *spec.Limit
	Reset bool
	Spent []Spending
}

// Horizon is how long the longest-lived of c's admissions counts, in µs.
func (c *Charge) Horizon() int64 {
	var longest int64
	for _, e := range c.Limits {
		longest = max(longest, horizon(e.Limit))
	}
	return longest
}

// spendingsPerHorizon: a new Spending starts when the last is older than
// horizon/spendingsPerHorizon.
const spendingsPerHorizon = 16

func (b *backlog) shard(key string) *backlogShard {
	return &b.shards[spec.KeyHash(key)%uint32(len(b.shards))]
}

// get returns key's backlog, making it (fresh) if there is room; nil
// when the backlog is full. The shard is locked.
func (sh *backlogShard) get(b *backlog, key string) (p *pendingKey, fresh bool) {
	if p, ok := sh.keys[key]; ok {
		return p, false
	}
	if b.keys.Load() >= b.max {
		return nil, false
	}
	if sh.keys == nil {
		sh.keys = make(map[string]*pendingKey)
	}
	p = &pendingKey{}
	sh.keys[strings.Clone(key)] = p // not the caller's buffer, which may hold more
	b.keys.Add(1)
	return p, true
}

// pending reports whether p holds anything for the primary.
func (p *pendingKey) pending() bool {
	return p.unanswered != nil || slices.ContainsFunc(p.limits,
		func(e *pendingLimit) bool { return e.reset || len(e.spent) > 0 })
}

// maxPendingLimits bounds the limit states kept per key.
const maxPendingLimits = 16

func (p *pendingKey) find(c *spec.Limit) *pendingLimit {
	for _, e := range p.limits {
		if e.c == c || e.c.Suffix == c.Suffix {
			return e
		}
	}
	return nil
}

// of returns the entry of c's state, made if need be; nil past maxPendingLimits.
func (p *pendingKey) of(c *spec.Limit) *pendingLimit {
	if e := p.find(c); e != nil {
		return e
	}
	if len(p.limits) == maxPendingLimits {
		return nil
	}
	e := &pendingLimit{c: c}
	p.limits = append(p.limits, e)
	return e
}

// spend records cost admitted at now, forgetting those too old to count.
func (e *pendingLimit) spend(cost, now int64) {
	h := horizon(e.c)
	e.spent = slices.DeleteFunc(e.spent, func(s Spending) bool { return s.At <= now-h })
	if n := len(e.spent); n > 0 && now-e.spent[n-1].At < h/spendingsPerHorizon {
		e.spent[n-1] = Spending{At: now, Cost: e.spent[n-1].Cost + cost}
		return
	}
	e.spent = append(e.spent, Spending{At: now, Cost: cost})
}

// horizon is how long after an admission it still counts, in µs: a window,
// or the time a token bucket takes to refill from empty.
func horizon(c *spec.Limit) int64 {
	if c.Algorithm == spec.TokenBucket {
		return (c.Units + c.Rate - 1) / c.Rate
	}
	return c.Window
}

// takeKey returns key's next charge: the one whose answer was lost, as it
// was; else what waits, under a new identity; else nil, dropping the key,
// which sends its decisions back to the primary.
func (sh *backlogShard) takeKey(b *backlog, key string) *Charge {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p, ok := sh.keys[key]
	if !ok {
		return nil
	}
	if c := p.unanswered; c != nil {
		p.unanswered, c.Err = nil, nil
		return c
	}
	if !p.pending() {
		delete(sh.keys, key)
		b.keys.Add(-1)
		return nil
	}
	c := &Charge{Key: key, ID: newChargeID(), Limits: make([]ChargedLimit, len(p.limits))}
	for i, e := range p.limits {
		c.Limits[i] = ChargedLimit{Limit: e.c, Reset: e.reset, Spent: e.spent}
		e.reset, e.spent = false, nil
	}
	return c
}

// dropAside forgets key's backlog if it holds only decisions made aside,
// which a reset on the primary has made void.
func (sh *backlogShard) dropAside(b *backlog, key string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p := sh.keys[key]; p != nil && p.aside && p.unanswered == nil {
		delete(sh.keys, key)
		b.keys.Add(-1)
	}
}

// putBack keeps c, whose answer was lost, to be sent again first. Only
// the prober takes and puts back charges, so the key has no other.
func (b *backlog) putBack(c *Charge) {
	sh := b.shard(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.keys == nil {
		sh.keys = make(map[string]*pendingKey)
	}
	p, ok := sh.keys[c.Key]
	if !ok {
		p = &pendingKey{} // a key put back may pass the bound once
		sh.keys[c.Key] = p
		b.keys.Add(1)
	}
	p.unanswered = c
}

// newChargeID returns a charge's identity: 64 random bits in hex.
func newChargeID() string { return strconv.FormatUint(rand.Uint64(), 16) }
