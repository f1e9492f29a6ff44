package storetest

import (
	"cmp"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// Model is a reference implementation of the algorithms, written
// from their definitions for clarity rather than speed: a sliding log is a
// slice of timestamps, a token bucket an exact rational. The suite replays
// traffic through a store and through a Model and wants equal decisions.
// Times are microseconds on the store's clock.
//
// The calendar periods of Daily, Weekly and Monthly limits are those of
// Go's time package (see calendar.period).
//
// The fixed window follows Redis's millisecond expiry: a window opened at t
// holds until t+Window, and an open window reports the time left rounded
// down to the millisecond plus 1ms, capped at Window.
//
// A Model applies a ban, as a store applies the ban of limits that carry
// one, once [Model.SetBan] has given it.
//
// A request admitted under a limit charged from usage ([ratelimit.Limit.Usage])
// holds its cost there until End settles it, or until it lapses HoldLife
// (30s) after it was made or last renewed ([Model.Renew]): the units held
// count as taken, though nothing is taken from the limit's state.
//
// The zero Model is empty, bans nobody, and is ready to use. It is not
// safe for concurrent use.
type Model struct {
	slots  int // the ids given so far, of Concurrent slots and holds
	states map[modelKey]modelState
	holds  map[modelKey]map[string]modelHold // a usage limit's holds and settled marks, by request id
	ban    ratelimit.Ban                     // zero: none
	bans   map[string]*modelBan
}

// holdLife is how long a hold lasts unrenewed, and a settled mark lasts,
// in µs: 30s, as stores keep them.
const holdLife = int64(30 * time.Second / time.Microsecond)

// modelHold is one request's hold of units under a limit charged from
// usage until expires, or, of units 0, the mark its settle left: a
// second settle finds it and counts nothing.
type modelHold struct {
	units   int
	expires int64
}

type modelKey struct {
	key   string
	state ratelimit.Limit
}

// modelState is one limit's state for one key; durations are in
// microseconds.
type modelState interface {
	// check reports whether cost fits, the units remaining before taking
	// it, and, when it does not fit, the time until it would. It changes
	// nothing.
	check(now int64, cost int) (ok bool, remaining int, retry int64)
	// commit takes cost and returns the time until the limit is full again.
	commit(now int64, cost int) (reset int64)
	// settle takes nothing and returns the time until the limit is full.
	settle(now int64) (reset int64)
	// effective returns the effective window (see [ratelimit.Result.Window])
	// of the state as it is: the time until a unit beyond those left now
	// comes back, were they all spent now. Like a store, it may report
	// less than the truth, never more.
	effective(now int64) int64
	// clone returns a copy that shares nothing that check, commit or
	// settle change.
	clone() modelState
	// adopt takes the numbers of l, a limit of the same storage, with its
	// defaults: its quota, a bucket's burst, a slot's life.
	adopt(l ratelimit.Limit)
}

// SetBan makes Allow and Peek apply b from now on, as a store applies the
// ban of limits that carry it (see [ratelimit.Limits.WithBan]): to every
// key, whatever the limits. The zero Ban turns bans off. A key's ban state
// (strikes, its last ban and that ban's level) is kept whatever the ban,
// as stores keep one per key.
func (m *Model) SetBan(b ratelimit.Ban) { m.ban = b }

// Allow decides a request at time now (microseconds) like
// [ratelimit.Store.Allow]. It does not validate its input.
func (m *Model) Allow(now int64, key string, cost int, limits ...ratelimit.Limit) ratelimit.Decision {
	if m.states == nil {
		m.states = make(map[modelKey]modelState)
	}
	if left := m.banned(now, key); left > 0 {
		return bannedDecision(left, limits)
	}
	rs, allowed := make([]ratelimit.Result, len(limits)), true
	states := make([]modelState, len(limits))
	capped := make([]bool, len(limits))
	for i, l := range limits {
		s := m.state(key, l)
		states[i] = s
		var ok bool
		var remaining int
		var retry int64
		if l.Usage {
			m.tidy(now, key, l)
			ok, remaining, retry, capped[i] = m.check(now, key, l, s, costOf(l, cost))
		} else {
			ok, remaining, retry = s.check(now, costOf(l, cost))
		}
		rs[i] = ratelimit.Result{Limit: l, Allowed: ok, Remaining: remaining, RetryAfter: us(retry)}
		allowed = allowed && ok
	}
	var slot string // one id for the request's slot and holds
	if allowed && reserves(cost, limits) {
		m.slots++
		slot = strconv.Itoa(m.slots)
	}
	for i, s := range states {
		l, r := limits[i], &rs[i]
		switch {
		case allowed && l.Usage: // nothing taken: the cost is held until End
			if units := costOf(l, cost); units > 0 {
				m.holdsOf(key, l)[slot] = modelHold{units, now + holdLife}
				r.Remaining -= units
			}
			r.ResetAfter = us(s.settle(now))
		case allowed:
			if sl, ok := s.(*slots); ok {
				sl.next = slot
				r.Remaining-- // one slot, whatever the cost
			} else {
				r.Remaining -= costOf(l, cost)
			}
			r.ResetAfter = us(s.commit(now, costOf(l, cost)))
		default:
			r.ResetAfter = us(s.settle(now))
		}
		r.Window = us(s.effective(now))
		if capped[i] {
			r.ResetAfter, r.Window = max(r.ResetAfter, r.RetryAfter), min(r.Window, r.RetryAfter)
		}
	}
	var banned time.Duration
	if !allowed && m.ban != (ratelimit.Ban{}) {
		if banned = m.strike(now, key); banned > 0 {
			for i := range rs {
				r := &rs[i]
				r.Allowed, r.Remaining, r.Window = false, 0, banned
				r.RetryAfter, r.ResetAfter = max(r.RetryAfter, banned), max(r.ResetAfter, banned)
			}
		}
	}
	d := ratelimit.MakeDecision(rs...)
	d.Banned = banned
	if d.Allowed {
		d.Slot = slot
	}
	return d
}

// state returns key's state under l, made when it has none. Limits that
// differ only in what a store does not key its state by (a quota, as an
// override changes it; a bucket's burst; a cost; a name) share one
// state, which takes l's numbers: what was counted stays counted, and
// l's quota applies to what remains.
func (m *Model) state(key string, l ratelimit.Limit) modelState {
	if m.states == nil {
		m.states = make(map[modelKey]modelState)
	}
	l = withDefaults(l)
	k := stateKey(key, l)
	s, ok := m.states[k]
	if !ok {
		s = newModelState(l)
		m.states[k] = s
	}
	s.adopt(l)
	return s
}

// stateKey is where key's state under l is kept, and its holds.
func stateKey(key string, l ratelimit.Limit) modelKey {
	return modelKey{key, storageOf(withDefaults(l))}
}

// reserves reports whether a request of cost admitted under limits gets
// an id: it takes a Concurrent slot or holds units of a limit charged from
// usage.
func reserves(cost int, limits []ratelimit.Limit) bool {
	for _, l := range limits {
		if l.Algorithm == ratelimit.Concurrent || l.Usage && costOf(l, cost) > 0 {
			return true
		}
	}
	return false
}

// holdsOf returns key's holds and marks under l, made when it has none.
func (m *Model) holdsOf(key string, l ratelimit.Limit) map[string]modelHold {
	if m.holds == nil {
		m.holds = make(map[modelKey]map[string]modelHold)
	}
	k := stateKey(key, l)
	if m.holds[k] == nil {
		m.holds[k] = make(map[string]modelHold)
	}
	return m.holds[k]
}

// tidy forgets key's holds and marks under l that expired by now.
func (m *Model) tidy(now int64, key string, l ratelimit.Limit) {
	maps.DeleteFunc(m.holds[stateKey(key, l)], func(_ string, h modelHold) bool { return h.expires <= now })
}

// check is s's check of a request of cost under l, a limit charged from
// usage, with key's holds there: the cost fits if it does together with
// the units of every live hold, and what remains is what is left past
// them. A denial while holds are live (capped) is told to retry when the
// soonest lapses, in a second at most, or sooner when the algorithm says
// the whole would fit then (it can never fit past l's capacity); never
// before the cost alone would fit.
func (m *Model) check(now int64, key string, l ratelimit.Limit, s modelState, cost int) (ok bool, remaining int, retry int64, capped bool) {
	held, soonest := 0, int64(0)
	for _, h := range m.holds[stateKey(key, l)] {
		if h.units > 0 && h.expires > now {
			held += h.units
			if soonest == 0 || h.expires < soonest {
				soonest = h.expires
			}
		}
	}
	if held == 0 {
		ok, remaining, retry = s.check(now, cost)
		return ok, remaining, retry, false
	}
	whole := cost+held <= capacity(withDefaults(l))
	if whole {
		ok, remaining, retry = s.check(now, cost+held)
	} else {
		_, remaining, _ = s.check(now, cost)
	}
	if remaining -= held; ok {
		return true, remaining, 0, false
	}
	r := min(1_000_000, soonest-now)
	if whole {
		r = min(r, retry)
	}
	if alone, _, after := s.check(now, cost); !alone {
		r = max(r, after) // no hold ending lets the cost alone in sooner
	}
	return false, max(remaining, 0), max(r, 1), true
}

// Renew renews, at now, every hold still live, as a store renews the
// holds of its requests in flight: each lasts HoldLife from now. A hold
// that lapsed or was settled stays so. It renews no Concurrent slot.
func (m *Model) Renew(now int64) {
	for _, holds := range m.holds {
		for id, h := range holds {
			if h.units > 0 && h.expires > now {
				holds[id] = modelHold{h.units, now + holdLife}
			}
		}
	}
}

// storageOf keeps the fields of l, with its defaults, that say where a
// store keeps its state (as ratelimit.Limit's storage does).
func storageOf(l ratelimit.Limit) ratelimit.Limit {
	switch l.Algorithm {
	case ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly:
		return ratelimit.Limit{Algorithm: l.Algorithm, Zone: cmp.Or(l.Zone, "UTC"), Weekday: l.Weekday, Usage: l.Usage}
	case ratelimit.Concurrent:
		return ratelimit.Limit{Algorithm: ratelimit.Concurrent}
	}
	s := ratelimit.Limit{Algorithm: l.Algorithm, Window: l.Window, Usage: l.Usage}
	switch l.Algorithm {
	case ratelimit.SlidingWindow:
		s.Precision = l.Precision
	case ratelimit.TokenBucket:
		s.Quota = l.Quota
	}
	return s
}

// End ends a request at time now like [ratelimit.Store.End]: the slot
// admitted holds (its Slot, an id the Model gave) is given back, and its
// holds are settled: under each limit charged from usage
// ([ratelimit.Limit.Usage]), its live hold is given back and usage taken
// instead, whatever the limit has left; a request settled there already
// (a mark of it is live) is charged nothing; one whose hold lapsed, or
// that had none, is charged usage. A settle with an id leaves a mark that
// lasts HoldLife. The answer is Peek's for a request of 1. A Model allows
// every algorithm to be charged so, the sliding log too, as a count-only
// Limiter charges it.
func (m *Model) End(now int64, key string, usage int, admitted ratelimit.Decision, limits ...ratelimit.Limit) ratelimit.Decision {
	id := admitted.Slot
	for _, l := range limits {
		if l.Algorithm == ratelimit.Concurrent {
			delete(m.state(key, l).(*slots).held, id)
		}
		if !l.Usage {
			continue
		}
		charge := true
		if id != "" {
			holds := m.holdsOf(key, l)
			if h, ok := holds[id]; ok && h.expires > now && h.units == 0 {
				charge = false // settled already
			} else {
				holds[id] = modelHold{0, now + holdLife}
			}
		}
		if charge && usage > 0 {
			m.state(key, l).commit(now, usage)
		}
	}
	return m.Peek(now, key, 1, limits...)
}

// Peek answers a request at time now like [ratelimit.Store.Peek]: what
// Allow would answer, without taking anything or counting a strike. Each
// result is check's answer and settle's reset, worked out on a copy of the
// state, so the Model is left as it was; a key it holds nothing for gets
// a fresh state that it does not keep. It does not validate its input.
func (m *Model) Peek(now int64, key string, cost int, limits ...ratelimit.Limit) ratelimit.Decision {
	if left := m.banned(now, key); left > 0 {
		return bannedDecision(left, limits)
	}
	rs := make([]ratelimit.Result, len(limits))
	for i, l := range limits {
		state := withDefaults(l)
		s, ok := m.states[stateKey(key, l)]
		if ok {
			s = s.clone()
		} else {
			s = newModelState(state)
		}
		s.adopt(state)
		var remaining int
		var retry int64
		capped := false
		if l.Usage {
			ok, remaining, retry, capped = m.check(now, key, l, s, costOf(l, cost))
		} else {
			ok, remaining, retry = s.check(now, costOf(l, cost))
		}
		reset := us(s.settle(now))
		r := ratelimit.Result{Limit: l, Allowed: ok, Remaining: remaining, Window: us(s.effective(now)), ResetAfter: reset, RetryAfter: us(retry)}
		if capped {
			r.ResetAfter, r.Window = max(r.ResetAfter, r.RetryAfter), min(r.Window, r.RetryAfter)
		}
		rs[i] = r
	}
	return ratelimit.MakeDecision(rs...)
}

// clone returns a copy of m that shares no state with it.
func (m *Model) clone() *Model {
	c := *m
	c.states = make(map[modelKey]modelState, len(m.states))
	for k, s := range m.states {
		c.states[k] = s.clone()
	}
	c.holds = make(map[modelKey]map[string]modelHold, len(m.holds))
	for k, h := range m.holds {
		c.holds[k] = maps.Clone(h)
	}
	c.bans = make(map[string]*modelBan, len(m.bans))
	for k, b := range m.bans {
		copied := *b
		c.bans[k] = &copied
	}
	return &c
}

// modelBan is a key's ban state: the strikes counted since the first of
// them, and the end and level of its last ban.
type modelBan struct {
	strikes     int
	first, ends int64 // µs
	level       int   // 0: no ban yet
}

// banned returns how long key is banned at now, or 0; always 0 while the
// Model applies no ban.
func (m *Model) banned(now int64, key string) time.Duration {
	if b := m.bans[key]; b != nil && m.ban != (ratelimit.Ban{}) && b.level > 0 && now < b.ends {
		return us(b.ends - now)
	}
	return 0
}

// strike counts a denial of key at now, and returns the length of the ban
// it starts, or 0: After denials within Within of the first ban the key;
// a ban less than Max after the end of the last is twice as long as that
// one, up to Max, and any other lasts For.
func (m *Model) strike(now int64, key string) time.Duration {
	if m.bans == nil {
		m.bans = make(map[string]*modelBan)
	}
	b := m.bans[key]
	if b == nil {
		b = &modelBan{}
		m.bans[key] = b
	}
	if b.strikes == 0 || us(now-b.first) >= m.ban.Within {
		b.strikes, b.first = 0, now
	}
	if b.strikes++; b.strikes < m.ban.After {
		return 0
	}
	longest := m.ban.Max
	if longest == 0 {
		longest = m.ban.For
	}
	if b.level > 0 && us(now-b.ends) < longest {
		b.level++
	} else {
		b.level = 1
	}
	length := m.ban.For
	for i := 1; i < b.level && length < longest; i++ {
		length = min(2*length, longest)
	}
	b.strikes, b.ends = 0, now+int64(length/time.Microsecond)
	return length
}

// bannedDecision is the answer to a request of a key banned for left
// more.
func bannedDecision(left time.Duration, limits []ratelimit.Limit) ratelimit.Decision {
	rs := make([]ratelimit.Result, len(limits))
	for i, l := range limits {
		rs[i] = ratelimit.Result{Limit: l, Window: left, ResetAfter: left, RetryAfter: left}
	}
	d := ratelimit.MakeDecision(rs...)
	d.Banned = left
	return d
}

func newModelState(l ratelimit.Limit) modelState {
	w := int64(l.Window / time.Microsecond)
	switch l.Algorithm {
	case ratelimit.Daily, ratelimit.Weekly, ratelimit.Monthly:
		return newCalendar(l)
	case ratelimit.Concurrent:
		slot := int64(30 * time.Second / time.Microsecond)
		if l.Window != 0 {
			slot = w
		}
		return &slots{quota: l.Quota, slot: slot, held: map[string]int64{}}
	case ratelimit.FixedWindow:
		return &fixedWindow{quota: l.Quota, window: w}
	case ratelimit.SlidingLog:
		return &slidingLog{quota: l.Quota, window: w}
	case ratelimit.TokenBucket:
		return &tokenBucket{burst: int64(l.Burst), quota: int64(l.Quota), window: w}
	default:
		p := int64(l.Precision / time.Microsecond)
		return &slidingWindow{quota: l.Quota, width: p, slots: w / p, counts: map[int64]int{}}
	}
}

// costOf is what a request of cost takes from l: its Cost when it has
// one.
func costOf(l ratelimit.Limit, cost int) int {
	if l.Cost != 0 {
		return l.Cost
	}
	return cost
}

func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// fixedWindow: count requests from the first one until window later.
type fixedWindow struct {
	quota  int
	window int64
	count  int
	start  int64
	open   bool
}

func (s *fixedWindow) clone() modelState { c := *s; return &c }

func (s *fixedWindow) adopt(l ratelimit.Limit) { s.quota = l.Quota }

func (s *fixedWindow) expire(now int64) {
	if s.open && now >= s.start+s.window {
		s.open, s.count = false, 0
	}
}

// reset is the time left in the window, rounded down to the millisecond
// plus 1ms, as Redis's PTTL lets the script see it.
func (s *fixedWindow) reset(now int64) int64 {
	if !s.open {
		return 0
	}
	return min(((s.start+s.window-now)/1000+1)*1000, s.window)
}

func (s *fixedWindow) check(now int64, cost int) (bool, int, int64) {
	s.expire(now)
	if s.count+cost <= s.quota {
		return true, s.quota - s.count, 0
	}
	return false, max(s.quota-s.count, 0), s.reset(now)
}

func (s *fixedWindow) commit(now int64, cost int) int64 {
	s.expire(now)
	s.count += cost
	if !s.open {
		s.open, s.start = true, now
		return s.window
	}
	return s.reset(now)
}

func (s *fixedWindow) settle(now int64) int64 {
	s.expire(now)
	return s.reset(now)
}

// effective is the time left in an open window, rounded down to the
// millisecond as PTTL gives it, or a whole window when none is open.
func (s *fixedWindow) effective(now int64) int64 {
	s.expire(now)
	if !s.open {
		return s.window
	}
	return min((s.start+s.window-now)/1000*1000, s.window)
}

// slidingLog: one timestamp per admitted unit; a request fits when the
// units in (now-window, now] plus its cost are at most quota.
type slidingLog struct {
	quota  int
	window int64
	log    []int64 // ascending
}

func (s *slidingLog) clone() modelState {
	c := *s
	c.log = slices.Clone(s.log)
	return &c
}

func (s *slidingLog) adopt(l ratelimit.Limit) { s.quota = l.Quota }

func (s *slidingLog) live(now int64) []int64 {
	var live []int64
	for _, t := range s.log {
		if t > now-s.window {
			live = append(live, t)
		}
	}
	return live
}

func (s *slidingLog) check(now int64, cost int) (bool, int, int64) {
	live := s.live(now)
	n := len(live)
	if n+cost <= s.quota {
		return true, s.quota - n, 0
	}
	return false, max(s.quota-n, 0), live[n+cost-s.quota-1] + s.window - now
}

func (s *slidingLog) commit(now int64, cost int) int64 {
	s.log = s.live(now)
	for range cost {
		s.log = append(s.log, now)
	}
	return s.window
}

func (s *slidingLog) settle(now int64) int64 {
	s.log = s.live(now)
	if len(s.log) == 0 {
		return 0
	}
	return s.log[len(s.log)-1] + s.window - now
}

// effective is when the oldest live entry leaves, or a whole window when
// the log is empty: spent now, the units would leave then.
func (s *slidingLog) effective(now int64) int64 {
	if live := s.live(now); len(live) > 0 {
		return min(live[0]+s.window-now, s.window)
	}
	return s.window
}

// slidingWindow: counts per slot of width; a request fits when the last
// slots slots, the current one included, plus its cost are at most quota.
type slidingWindow struct {
	quota        int
	width, slots int64
	counts       map[int64]int
}

func (s *slidingWindow) clone() modelState {
	c := *s
	c.counts = maps.Clone(s.counts)
	return &c
}

func (s *slidingWindow) adopt(l ratelimit.Limit) { s.quota = l.Quota }

// tidy forgets the slots that left the window and returns the others in
// ascending order, with their sum.
func (s *slidingWindow) tidy(now int64) (live []int64, sum int) {
	first := now/s.width - s.slots + 1
	for slot, c := range s.counts {
		if slot < first {
			delete(s.counts, slot)
			continue
		}
		live = append(live, slot)
		sum += c
	}
	slices.Sort(live)
	return live, sum
}

func (s *slidingWindow) leaves(slot, now int64) int64 { return (slot+s.slots)*s.width - now }

func (s *slidingWindow) check(now int64, cost int) (bool, int, int64) {
	live, sum := s.tidy(now)
	if sum+cost <= s.quota {
		return true, s.quota - sum, 0
	}
	excess, freed := sum+cost-s.quota, 0
	var slot int64
	for _, slot = range live {
		if freed += s.counts[slot]; freed >= excess {
			break
		}
	}
	return false, max(s.quota-sum, 0), s.leaves(slot, now)
}

func (s *slidingWindow) commit(now int64, cost int) int64 {
	s.counts[now/s.width] += cost
	live, _ := s.tidy(now)
	return s.leaves(live[len(live)-1], now)
}

func (s *slidingWindow) settle(now int64) int64 {
	live, _ := s.tidy(now)
	if len(live) == 0 {
		return 0
	}
	return s.leaves(live[len(live)-1], now)
}

// effective is when the oldest live slot leaves, or, when none holds a unit,
// the current slot, where units spent now would go.
func (s *slidingWindow) effective(now int64) int64 {
	oldest := now / s.width
	if live, _ := s.tidy(now); len(live) > 0 {
		oldest = min(oldest, live[0])
	}
	return min(s.leaves(oldest, now), s.slots*s.width)
}

// tokenBucket: tokens(t) = min(burst, tokens(last) + (t-last)*quota/window),
// in exact rationals; it starts full.
type tokenBucket struct {
	burst, quota, window int64
	tokens               *big.Rat // nil: full
	last                 int64
}

// clone copies s; the level it points to is never changed in place, only
// replaced.
func (s *tokenBucket) clone() modelState { c := *s; return &c }

func (s *tokenBucket) adopt(l ratelimit.Limit) { s.burst = int64(l.Burst) }

func (s *tokenBucket) level(now int64) *big.Rat {
	full := big.NewRat(s.burst, 1)
	if s.tokens == nil {
		return full
	}
	t := new(big.Rat).Add(s.tokens, big.NewRat((now-s.last)*s.quota, s.window))
	if t.Cmp(full) > 0 {
		return full
	}
	return t
}

// refill returns the time, rounded up to the microsecond, to refill n
// tokens.
func (s *tokenBucket) refill(n *big.Rat) int64 {
	t := new(big.Rat).Mul(n, big.NewRat(s.window, s.quota))
	q, r := new(big.Int).QuoRem(t.Num(), t.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func (s *tokenBucket) missing(have *big.Rat, n int64) *big.Rat {
	return new(big.Rat).Sub(big.NewRat(n, 1), have)
}

func (s *tokenBucket) check(now int64, cost int) (bool, int, int64) {
	have := s.level(now)
	whole := max(int(new(big.Int).Quo(have.Num(), have.Denom()).Int64()), 0) // below 0: a debt
	if have.Cmp(big.NewRat(int64(cost), 1)) >= 0 {
		return true, whole, 0
	}
	return false, whole, s.refill(s.missing(have, int64(cost)))
}

func (s *tokenBucket) commit(now int64, cost int) int64 {
	s.tokens = new(big.Rat).Sub(s.level(now), big.NewRat(int64(cost), 1))
	s.last = now
	return s.refill(s.missing(s.tokens, s.burst))
}

func (s *tokenBucket) settle(now int64) int64 {
	return s.refill(s.missing(s.level(now), s.burst))
}

// effective is the time to refill from the level left after spending every
// whole token to one more token; from a debt, to the first token.
func (s *tokenBucket) effective(now int64) int64 {
	have := s.level(now)
	if have.Sign() < 0 {
		return s.refill(s.missing(have, 1))
	}
	whole := new(big.Int).Quo(have.Num(), have.Denom()).Int64()
	return s.refill(s.missing(have, whole+1))
}

// calendar: count units from the start of a calendar period until its
// end, the periods being those of Go's time package in the limit's zone.
type calendar struct {
	algorithm ratelimit.Algorithm
	loc       *time.Location
	weekday   time.Weekday
	quota     int
	count     int
	end       int64 // of the period count is for
}

func newCalendar(l ratelimit.Limit) *calendar {
	loc, err := time.LoadLocation(cmp.Or(l.Zone, "UTC"))
	if err != nil {
		panic(err) // the limit is valid
	}
	return &calendar{algorithm: l.Algorithm, loc: loc, weekday: l.Weekday, quota: l.Quota}
}

// period returns the start and the end of the period that holds now:
// midnight of its day in the limit's zone and of the next day; midnight
// of the last Weekday on or before its day and seven days later; midnight
// of the 1st of its month and of the next month, as Go's time package
// reckons them.
func (s *calendar) period(now int64) (start, end int64) {
	t := time.UnixMicro(now).In(s.loc)
	y, m, d := t.Date()
	var from, to time.Time
	switch s.algorithm {
	case ratelimit.Monthly:
		from, to = time.Date(y, m, 1, 0, 0, 0, 0, s.loc), time.Date(y, m+1, 1, 0, 0, 0, 0, s.loc)
	case ratelimit.Weekly:
		d -= (int(t.Weekday()) - int(s.weekday) + 7) % 7
		from, to = time.Date(y, m, d, 0, 0, 0, 0, s.loc), time.Date(y, m, d+7, 0, 0, 0, 0, s.loc)
	default:
		from, to = time.Date(y, m, d, 0, 0, 0, 0, s.loc), time.Date(y, m, d+1, 0, 0, 0, 0, s.loc)
	}
	return from.UnixMicro(), to.UnixMicro()
}

func (s *calendar) clone() modelState { c := *s; return &c }

func (s *calendar) adopt(l ratelimit.Limit) { s.quota = l.Quota }

// in returns the count of the period that ends at end.
func (s *calendar) in(end int64) int {
	if s.end != end {
		return 0
	}
	return s.count
}

func (s *calendar) check(now int64, cost int) (bool, int, int64) {
	_, end := s.period(now)
	n := s.in(end)
	if n+cost <= s.quota {
		return true, s.quota - n, 0
	}
	return false, max(s.quota-n, 0), end - now
}

func (s *calendar) commit(now int64, cost int) int64 {
	_, end := s.period(now)
	s.count, s.end = s.in(end)+cost, end
	return end - now
}

func (s *calendar) settle(now int64) int64 {
	if _, end := s.period(now); s.in(end) > 0 {
		return end - now
	}
	return 0
}

func (s *calendar) effective(now int64) int64 {
	_, end := s.period(now)
	return end - now
}

// slots: the requests in flight, each holding a slot that expires a
// slot's length after it was taken (the Model renews nothing); a request
// passes while fewer than quota are live, and takes one whatever its
// cost. A denial says to retry in a second, or when the soonest slot
// expires if sooner; nothing is promised for any time (the effective
// window is 0); the limit is whole again when the latest slot expires.
type slots struct {
	quota int
	slot  int64
	held  map[string]int64 // slot to expiry
	next  string           // the slot commit takes
}

func (s *slots) clone() modelState {
	c := *s
	c.held = maps.Clone(s.held)
	return &c
}

func (s *slots) adopt(l ratelimit.Limit) {
	s.quota, s.slot = l.Quota, int64(cmp.Or(l.Window, 30*time.Second)/time.Microsecond)
}

func (s *slots) live(now int64) (n int, soonest, last int64) {
	for _, exp := range s.held {
		if exp > now {
			n++
			if soonest == 0 || exp < soonest {
				soonest = exp
			}
			last = max(last, exp)
		}
	}
	return n, soonest, last
}

func (s *slots) check(now int64, _ int) (bool, int, int64) {
	n, soonest, _ := s.live(now)
	if n < s.quota {
		return true, s.quota - n, 0
	}
	return false, 0, max(min(1_000_000, soonest-now), 1)
}

func (s *slots) commit(now int64, _ int) int64 {
	s.held[s.next] = now + s.slot
	_, _, last := s.live(now)
	return last - now
}

func (s *slots) settle(now int64) int64 {
	if n, _, last := s.live(now); n > 0 {
		return last - now
	}
	return 0
}

func (s *slots) effective(int64) int64 { return 0 }
