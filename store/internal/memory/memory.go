package memory

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/store/internal/slots"
)

const defaultMaxKeys = 100_000 // Options.MaxKeys's default

// Store is store.NewMemory's store, documented there. Beside the
// [ratelimit.Store] contract, it decides for a Fallback under compiled
// limits, maybe a share of a set's ([spec.Set.Share]): Decide, Take,
// Charge, Release, PeekFrom, Forget and MaxKeys.
type Store struct {
	shards   []memoryShard
	perShard int
	seed     maphash.Seed

	// The time is start's wall clock plus the monotonic time since:
	// time.Since reads only the monotonic clock, half of time.Now.
	start   time.Time
	startUS int64
	clock   func() int64 // a pinned clock (Options.Clock); nil: start's

	slots slots.Table // of Concurrent limits
	holds slots.Table // of requests holding units of limits charged from usage
}

var _ ratelimit.Store = (*Store)(nil)

// Options configures [New], as store.MemoryOptions does store.NewMemory.
type Options struct {
	MaxKeys int              // zero means 100,000
	Clock   func() time.Time // for tests; nil: the system's monotonic clock
}

// New returns an empty Memory store.
func New(opts Options) (*Store, error) {
	if opts.MaxKeys < 0 {
		return nil, fmt.Errorf("%w: store.MemoryOptions.MaxKeys %d: must be 0 (the default) or more", ratelimit.ErrInvalid, opts.MaxKeys)
	}
	// Shards of at least 64 keys, so that eviction's sample is drawn from
	// a real crowd; up to 8 per core.
	maxKeys, n := cmp.Or(opts.MaxKeys, defaultMaxKeys), 1
	for n*2 <= 8*runtime.GOMAXPROCS(0) && n*2 <= maxKeys/64 {
		n *= 2
	}
	start := time.Now()
	m := &Store{
		shards:   make([]memoryShard, n),
		perShard: max(maxKeys/n, 1),
		seed:     maphash.MakeSeed(),
		start:    start,
		startUS:  start.UnixMicro(),
	}
	m.slots.Renew = m.renewSlots
	m.holds.Renew = m.renewHolds
	if opts.Clock != nil {
		var mu sync.Mutex
		var last int64
		m.clock = func() int64 {
			t := opts.Clock().UnixMicro()
			mu.Lock()
			defer mu.Unlock()
			last = max(last, t)
			return last
		}
	}
	for i := range m.shards {
		m.shards[i].keys = make(map[uint64]*memoryKey)
	}
	return m, nil
}

// now returns the store's time in µs, which never goes back.
func (m *Store) now() int64 {
	if m.clock != nil {
		return m.clock()
	}
	return m.startUS + int64(time.Since(m.start)/time.Microsecond)
}

// Allow implements [ratelimit.Store].
func (m *Store) Allow(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return m.Decide(key, cost, given, set), nil
}

// Decide is Allow for checked input: limits' results, counted under set,
// which is limits' own or a Fallback's share of it. An admitted request
// holds its cost under each limit charged from usage until End settles
// it (see Settle); its Decision.Slot is the one id of its holds and of
// its Concurrent slot.
func (m *Store) Decide(key string, cost int, limits []ratelimit.Limit, set *spec.Set) ratelimit.Decision {
	cs := set.Limits
	if len(cs) == 1 && set.Ban == nil && !cs[0].Usage && set.Slot < 0 {
		// The common request, in fewer steps.
		ok, remaining, window, reset, retry := m.Take(key, cs[0].CostFor(int64(cost)), &cs[0])
		return ratelimit.MakeDecision(ratelimit.Result{Limit: limits[0], Allowed: ok, Remaining: int(remaining), Window: us(window), ResetAfter: us(reset), RetryAfter: us(retry)})
	}
	now, c64, allowed := m.now(), int64(cost), true
	var rbuf [limitset.MaxInline]ratelimit.Result
	var sbuf [limitset.MaxInline]*memoryLimit
	var cbuf [limitset.MaxInline]bool
	rs, states, capped := limitset.Results(limits, &rbuf), sbuf[:0], cbuf[:0]
	var id int64  // the request's slot and holds
	held := false // whether it holds units of a limit charged from usage
	k := m.key(key, now)
	k.mu.Lock()
	if set.Ban != nil {
		if left := k.banned(now); left > 0 {
			k.mu.Unlock()
			return bannedDecision(limits, left) // the limits are not even read
		}
	}
	for i := range cs {
		c := &cs[i]
		s := k.limit(c, now)
		states = append(states, s)
		var ok, capd bool
		var remaining, retry int64
		if c.Usage {
			ok, remaining, retry, capd = s.held.check(s.state.of(c), c, now, c.CostFor(c64), false)
		} else {
			ok, remaining, retry = s.state.of(c).check(c, now, c.CostFor(c64))
		}
		capped = append(capped, capd)
		rs[i].Allowed, rs[i].Remaining, rs[i].RetryAfter = ok, int(remaining), us(retry)
		allowed = allowed && ok
	}
	if allowed && set.Holds(c64) {
		id = slots.NewID()
	}
	for i, s := range states {
		c, r := &cs[i], &rs[i]
		switch {
		case allowed && c.Usage: // it takes nothing now, but holds the cost until End
			if units := c.CostFor(c64); units > 0 {
				s.hold(id, units, now+holdLife)
				k.extend(now + holdLife)
				r.Remaining -= int(units)
				held = true
			}
			r.ResetAfter = us(s.state.of(c).settle(c, now))
		case allowed:
			taken := c.CostFor(c64)
			if i == set.Slot {
				s.state.slots.pending, taken = id, 1 // one slot, whatever the cost
			}
			reset := s.state.of(c).commit(c, now, c.CostFor(c64))
			r.ResetAfter, r.Remaining = us(reset), r.Remaining-int(taken)
			s.expires = now + keyTTL(c, reset)
			k.extend(s.expires)
		default:
			r.ResetAfter = us(s.state.of(c).settle(c, now))
		}
		r.Window = us(s.state.of(c).effective(c, now))
		if capped[i] { // a denial while holds are out: they may end before it would
			r.ResetAfter, r.Window = max(r.ResetAfter, r.RetryAfter), min(r.Window, r.RetryAfter)
		}
	}
	var ban int64
	if !allowed && set.Ban != nil {
		ban = k.strike(set.Ban, now)
		k.extend(k.ban.expires)
	}
	k.mu.Unlock()
	d := ratelimit.MakeDecision(rs...)
	if ban > 0 {
		d = startBan(d, ban)
	}
	if id != 0 { // admitted: no ban
		d.Slot = strconv.FormatInt(id, 10)
		if set.Slot >= 0 {
			m.slots.Hold(slots.Slot{ID: id, Key: key, Limit: &cs[set.Slot]})
		}
		if held {
			m.holds.Hold(slots.Slot{ID: id, Key: k.name, Set: set})
		}
	}
	return d
}

// Take decides a request costing c64 for key under the one limit c.
func (m *Store) Take(key string, c64 int64, c *compiled) (ok bool, remaining, window, reset, retry int64) {
	now := m.now()
	k := m.key(key, now)
	k.mu.Lock()
	s := k.limit(c, now)
	ok, remaining, reset, retry, window = s.state.take(c, now, c64)
	if ok {
		s.expires = now + keyTTL(c, reset)
		k.extend(s.expires)
	}
	k.mu.Unlock()
	return ok, remaining, window, reset, retry
}

// End implements [ratelimit.Store]: it gives back d's slot, settles its
// holds, taking usage from key's limits charged from usage whatever they
// have left (see Settle), and answers for each limit as Peek would for a
// request of 1.
func (m *Store) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, d ratelimit.Decision) (ratelimit.Decision, error) {
	given, set, err := limitset.CheckEnd(key, usage, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	m.Release(key, d.Slot, set)
	m.Settle(key, d.Slot, int64(usage), set)
	return m.PeekFrom(Peek{Key: key, Cost: 1, Limits: given, Set: set}), nil
}

// Release gives back key's slot (empty: none) under set's Concurrent limit.
func (m *Store) Release(key, slot string, set *spec.Set) {
	id, err := strconv.ParseInt(slot, 10, 64)
	if err != nil || set.Slot < 0 {
		return
	}
	m.slots.Drop(id)
	k := m.lookup(key)
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if st := k.find(&set.Limits[set.Slot], m.now()); st != nil {
		delete(st.state.slots.slots, id)
	}
}

// RenewSlots renews the slots and holds in flight, as the store's own
// goroutines do every third of their life: for tests on a pinned clock.
func (m *Store) RenewSlots() {
	m.renewSlots(m.slots.Held())
	m.renewHolds(m.holds.Held())
}

// renewSlots renews each slot held until its length from now.
func (m *Store) renewSlots(held []slots.Slot) {
	m.renewing(held, func(k *memoryKey, h slots.Slot, now int64) {
		if st := k.find(h.Limit, now); st != nil {
			if _, ok := st.state.slots.slots[h.ID]; ok {
				st.state.slots.slots[h.ID] = now + h.Limit.Window
				st.expires = max(st.expires, now+h.Limit.Window)
				k.extend(st.expires)
			}
		}
	})
}

// renewHolds renews each request's live holds until HoldLife from now.
func (m *Store) renewHolds(held []slots.Slot) {
	m.renewing(held, func(k *memoryKey, h slots.Slot, now int64) {
		for i := range h.Set.Limits {
			if c := &h.Set.Limits[i]; c.Usage {
				if s := k.entry(c); s != nil && s.renewHold(h.ID, now, now+holdLife) {
					k.extend(now + holdLife)
				}
			}
		}
	})
}

// renewing runs renew for each of held on its key, locked, at now; a key
// the store no longer holds is passed over.
func (m *Store) renewing(held []slots.Slot, renew func(k *memoryKey, h slots.Slot, now int64)) {
	now := m.now()
	for _, h := range held {
		k := m.lookup(h.Key)
		if k == nil {
			continue
		}
		k.mu.Lock()
		renew(k, h, now)
		k.mu.Unlock()
	}
}

// Settle ends the holds of the request whose Decision.Slot is slot
// (empty: none) under key's limits charged from usage under set, and
// takes usage from them, whatever they have left: a live hold is given
// back and usage taken instead; a request settled already (within
// HoldLife) is charged nothing more; one whose holds lapsed, or that had
// none, is charged as Charge charges. The request's holds are renewed no
// more, under whatever set: those of limits not in set lapse. It reports
// whether this is the request's first settle.
func (m *Store) Settle(key, slot string, usage int64, set *spec.Set) (first bool) {
	id, err := strconv.ParseInt(slot, 10, 64)
	if err != nil {
		id = 0
	} else if id != 0 {
		m.holds.Drop(id) // whatever set: the request has ended
	}
	if !set.Usage {
		return true
	}
	if id == 0 {
		m.Charge(key, usage, set)
		return true
	}
	now := m.now()
	k := m.key(key, now)
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range set.Limits {
		if c := &set.Limits[i]; c.Usage {
			s := k.limit(c, now)
			charge := s.settleHold(id, now)
			if charge && usage > 0 {
				reset := s.state.of(c).commit(c, now, usage)
				s.expires = max(s.expires, now+keyTTL(c, reset))
			}
			first = first || charge
			k.extend(max(s.expires, now+holdLife)) // the mark's life
		}
	}
	return first
}

// Charge takes units from set's usage limits of key, whatever they have left.
func (m *Store) Charge(key string, units int64, set *spec.Set) {
	if units == 0 {
		return
	}
	now := m.now()
	k := m.key(key, now)
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range set.Limits {
		if c := &set.Limits[i]; c.Usage {
			s := k.limit(c, now)
			reset := s.state.of(c).commit(c, now, units)
			s.expires = max(s.expires, now+keyTTL(c, reset))
			k.extend(s.expires)
		}
	}
}

// Peek implements [ratelimit.Store]. It adds no key, so never evicts one.
func (m *Store) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	given, set, err := limitset.Check(key, cost, limits)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return m.PeekFrom(Peek{Key: key, Cost: cost, Limits: given, Set: set}), nil
}

// A Peek is the checked input of a Peek, as PeekFrom takes it.
type Peek struct {
	Key    string
	Cost   int
	Limits []ratelimit.Limit // as given
	Set    *spec.Set         // what Limits are counted under: their own set or a Fallback's share of it
	// Spent, when not nil, answers each limit i with Spent[i] >= 0 as if
	// its state had started afresh now and Spent[i] units had been taken,
	// as a Fallback's seed will make it.
	Spent []int64
}

// PeekFrom is Peek for checked input.
func (m *Store) PeekFrom(p Peek) ratelimit.Decision {
	cs, limits, spent := p.Set.Limits, p.Limits, p.Spent
	now, c64 := m.now(), int64(p.Cost)
	k := m.lookup(p.Key)
	if k != nil {
		k.mu.Lock()
		defer k.mu.Unlock()
		if p.Set.Ban != nil {
			if left := k.banned(now); left > 0 {
				return bannedDecision(limits, left)
			}
		}
	}
	var buf [limitset.MaxInline]ratelimit.Result
	rs := buf[:0]
	for i := range cs {
		c := &cs[i]
		// A state that is missing or has expired is empty: all is left.
		// Holds count whatever the state, seeded afresh or not.
		var a algorithmState
		var held *holdState
		s := k.entry(c)
		if s != nil && c.Usage {
			held = s.held
		}
		seeded := spent != nil && spent[i] >= 0
		if !seeded && s != nil && s.expires > now {
			a = s.state.of(c)
		} else if seeded || held != nil {
			var fresh state // seeded, or empty for the holds to be checked against
			fresh.reset(c)
			if a = fresh.of(c); seeded && spent[i] > 0 {
				a.commit(c, now, spent[i])
			}
		}
		ok, remaining, reset, retry, window := true, c.Capacity, int64(0), int64(0), freshWindow(c, now)
		if a != nil {
			ok, remaining, reset, retry = a.peek(c, now, c.CostFor(c64))
			window = a.effective(c, now)
		}
		if held != nil {
			var capped bool
			if ok, remaining, retry, capped = held.check(a, c, now, c.CostFor(c64), true); capped {
				reset, window = max(reset, retry), min(window, retry)
			}
		}
		rs = append(rs, ratelimit.Result{Limit: limits[i], Allowed: ok, Remaining: int(remaining), Window: us(window), ResetAfter: us(reset), RetryAfter: us(retry)})
	}
	return ratelimit.MakeDecision(rs...)
}

// Reset implements [ratelimit.Store].
func (m *Store) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	_, set, err := limitset.Check(key, 1, limits)
	if err != nil {
		return err
	}
	m.Forget(key, set, true)
	return nil
}

// Forget forgets key's state under set and, when ban is set, its ban
// state (shared by every set with a ban, so Reset forgets it always).
func (m *Store) Forget(key string, set *spec.Set, ban bool) {
	k := m.lookup(key)
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ban {
		k.ban = nil
	}
	for i := range set.Limits {
		for s := &k.first; s != nil; s = s.next {
			if s.holds(&set.Limits[i]) {
				s.expires, s.held = 0, nil // empty from now on, holds and marks gone
			}
		}
	}
}

func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// compiled is what the store needs of one limit (see limitset).
type compiled = spec.Limit
