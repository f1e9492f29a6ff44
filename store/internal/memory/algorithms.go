package memory

import (
	"maps"
	"sort"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// The algorithms follow their Lua scripts in lua/ step for step, so that
// both stores give the same answers (a differential test holds them to
// it); the comments there explain the arithmetic. Times are µs. The
// store's clock never goes back, so the scripts' caps for a Redis clock
// that stepped back never apply here.

// state is one limit's state for one key; only its algorithm's part is
// used (see of), the larger ones behind pointers, so a key takes little.
type state struct {
	fixed fixedWindowState // also a calendar's count and period end

	bucket tokenBucketState
	log    *slidingLogState
	window *slidingWindowState
	slots  *slotState
}

// algorithmState is what each algorithm's part of a state does.
type algorithmState interface {
	// check reports whether cost fits, the units remaining before it, and,
	// if it does not fit, the time until it would. It changes nothing.
	check(c *compiled, now, cost int64) (ok bool, remaining, retry int64)
	// commit takes cost and returns the time until the limit is full.
	commit(c *compiled, now, cost int64) (reset int64)
	// settle takes nothing, drops what expired, and returns the time until
	// the limit is full.
	settle(c *compiled, now int64) (reset int64)
	// peek answers as check and then settle would, the script's PEEK,
	// and changes nothing: what expired is ignored, not dropped.
	peek(c *compiled, now, cost int64) (ok bool, remaining, reset, retry int64)
	// effective returns the effective window (see ratelimit.Result.Window)
	// of the state as it is, and changes nothing: the time until a unit
	// beyond those left comes back, were they all spent now.
	effective(c *compiled, now int64) int64
}

// of returns the part of s that c's algorithm uses, as reset prepared it.
func (s *state) of(c *compiled) algorithmState {
	if c.Calendar != nil {
		return (*calendarState)(&s.fixed)
	}
	switch c.Algorithm {
	case spec.Concurrent:
		return s.slots
	case spec.FixedWindow:
		return &s.fixed
	case spec.SlidingLog:
		return s.log
	case spec.TokenBucket:
		return &s.bucket
	}
	return s.window
}

// take is the one-limit path: check, then commit if cost fits or settle
// if not, then effective, in fewer steps and without dynamic dispatch.
func (s *state) take(c *compiled, now, cost int64) (ok bool, remaining, reset, retry, window int64) {
	if c.Calendar != nil {
		return (*calendarState)(&s.fixed).take(c, now, cost)
	}
	switch c.Algorithm {
	case spec.FixedWindow:
		return s.fixed.take(c, now, cost)
	case spec.SlidingLog:
		return s.log.take(c, now, cost)
	case spec.TokenBucket:
		return s.bucket.take(c, now, cost)
	}
	return s.window.take(c, now, cost)
}

// reset empties s for c. A state serves limits of one algorithm and shape
// only (see memoryLimit.holds), so a window's slots are reused; a log
// starts afresh, so that the memory of a burst is not kept for good.
func (s *state) reset(c *compiled) {
	if c.Calendar != nil {
		s.fixed = fixedWindowState{}
		return
	}
	switch c.Algorithm {
	case spec.Concurrent:
		s.slots = &slotState{slots: make(map[int64]int64)}
	case spec.FixedWindow:
		s.fixed = fixedWindowState{}
	case spec.TokenBucket:
		s.bucket = tokenBucketState{level: c.Units}
	case spec.SlidingLog:
		s.log = new(slidingLogState)
	default:
		if s.window == nil {
			s.window = &slidingWindowState{slot: make([]int64, c.Slots), count: make([]int64, c.Slots)}
		}
		clear(s.window.slot)
		clear(s.window.count)
	}
}

// fixedWindowState mirrors fixed_window.lua, in Redis's ms resolution.
type fixedWindowState struct {
	count, end int64 // end = 0: no window open
}

func (s *fixedWindowState) expire(now int64) {
	if s.end != 0 && now >= s.end {
		s.count, s.end = 0, 0
	}
}

// reset is what PTTL+1ms gives the script: the time left in the window,
// rounded down to the millisecond, plus 1ms, at most the window.
func (s *fixedWindowState) reset(c *compiled, now int64) int64 {
	if s.end == 0 {
		return 0
	}
	return min(((s.end-now)/1000+1)*1000, c.Window)
}

func (s *fixedWindowState) check(c *compiled, now, cost int64) (bool, int64, int64) {
	s.expire(now)
	if s.count+cost <= c.Quota {
		return true, c.Quota - s.count, 0
	}
	return false, max(c.Quota-s.count, 0), s.reset(c, now)
}

func (s *fixedWindowState) commit(c *compiled, now, cost int64) int64 {
	s.expire(now)
	s.count += cost
	if s.end == 0 {
		s.end = now + c.Window // reset is then c.Window
	}
	return s.reset(c, now)
}

func (s *fixedWindowState) settle(c *compiled, now int64) int64 {
	s.expire(now)
	return s.reset(c, now)
}

// effective is the time left in the open window, rounded down to the
// millisecond as the script's PTTL sees it, or a whole window.
func (s *fixedWindowState) effective(c *compiled, now int64) int64 {
	if s.end == 0 || now >= s.end {
		return c.Window
	}
	return min((s.end-now)/1000*1000, c.Window)
}

func (s *fixedWindowState) take(c *compiled, now, cost int64) (ok bool, remaining, reset, retry, window int64) {
	s.expire(now)
	if s.count+cost > c.Quota {
		reset = s.reset(c, now)
		return false, max(c.Quota-s.count, 0), reset, reset, s.effective(c, now)
	}
	remaining = c.Quota - s.count - cost
	return true, remaining, s.commit(c, now, cost), 0, s.effective(c, now)
}

func (s *fixedWindowState) peek(c *compiled, now, cost int64) (bool, int64, int64, int64) {
	v := *s // expire changes the copy only
	ok, remaining, retry := v.check(c, now, cost)
	return ok, remaining, v.settle(c, now), retry
}

// slotState mirrors concurrent.lua: when each slot in flight expires.
type slotState struct {
	slots   map[int64]int64
	pending int64 // the slot the next commit takes
}

// live returns how many slots are live at now, and when the soonest and
// the latest expire (0 when none is).
func (s *slotState) live(now int64) (n, soonest, last int64) {
	for _, exp := range s.slots {
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

func (s *slotState) check(c *compiled, now, _ int64) (bool, int64, int64) {
	n, soonest, _ := s.live(now)
	if n < c.Quota {
		return true, c.Quota - n, 0
	}
	return false, 0, max(min(1_000_000, soonest-now), 1) // concurrent_retry
}

func (s *slotState) commit(c *compiled, now, _ int64) int64 {
	maps.DeleteFunc(s.slots, func(_, exp int64) bool { return exp <= now })
	s.slots[s.pending] = now + c.Window
	s.pending = 0
	_, _, last := s.live(now)
	return last - now
}

func (s *slotState) settle(_ *compiled, now int64) int64 {
	n, _, last := s.live(now)
	if n == 0 {
		return 0
	}
	return last - now
}

func (s *slotState) peek(c *compiled, now, cost int64) (bool, int64, int64, int64) {
	ok, remaining, retry := s.check(c, now, cost)
	return ok, remaining, s.settle(c, now), retry
}

func (s *slotState) effective(*compiled, int64) int64 { return 0 }

// calendarState mirrors calendar.lua: a count and its period's end.
type calendarState fixedWindowState

// in returns the count in the period that ends at end: none if the
// state counts an earlier one.
func (s *calendarState) in(end int64) int64 {
	if s.end < end {
		return 0
	}
	return s.count
}

func (s *calendarState) check(c *compiled, now, cost int64) (bool, int64, int64) {
	_, end := c.Calendar.Period(now)
	n := s.in(end)
	if n+cost <= c.Quota {
		return true, c.Quota - n, 0
	}
	return false, max(c.Quota-n, 0), end - now
}

func (s *calendarState) commit(c *compiled, now, cost int64) int64 {
	_, end := c.Calendar.Period(now)
	s.count, s.end = s.in(end)+cost, end
	return end - now
}

func (s *calendarState) settle(c *compiled, now int64) int64 {
	if _, end := c.Calendar.Period(now); s.in(end) > 0 {
		return end - now
	}
	return 0
}

func (s *calendarState) effective(c *compiled, now int64) int64 {
	_, end := c.Calendar.Period(now)
	return end - now
}

func (s *calendarState) take(c *compiled, now, cost int64) (ok bool, remaining, reset, retry, window int64) {
	_, end := c.Calendar.Period(now)
	n := s.in(end)
	if n+cost > c.Quota {
		return false, max(c.Quota-n, 0), end - now, end - now, end - now
	}
	s.count, s.end = n+cost, end
	return true, c.Quota - n - cost, end - now, 0, end - now
}

func (s *calendarState) peek(c *compiled, now, cost int64) (bool, int64, int64, int64) {
	ok, remaining, retry := s.check(c, now, cost)
	return ok, remaining, s.settle(c, now), retry
}

// slidingLogState mirrors sliding_log.lua: the times of the admitted
// units, oldest first, in log[head:].
type slidingLogState struct {
	log  []int64
	head int
}

func (s *slidingLogState) trim(c *compiled, now int64) {
	for s.head < len(s.log) && s.log[s.head] <= now-c.Window {
		s.head++
	}
	if s.head == len(s.log) {
		s.log, s.head = s.log[:0], 0
	} else if s.head > len(s.log)/2 {
		n := copy(s.log, s.log[s.head:])
		s.log, s.head = s.log[:n], 0
	}
}

func (s *slidingLogState) check(c *compiled, now, cost int64) (bool, int64, int64) {
	s.trim(c, now)
	live := s.log[s.head:]
	n := int64(len(live))
	if n+cost <= c.Quota {
		return true, c.Quota - n, 0
	}
	return false, max(c.Quota-n, 0), live[n+cost-c.Quota-1] + c.Window - now
}

func (s *slidingLogState) commit(c *compiled, now, cost int64) int64 {
	s.trim(c, now)
	for range cost {
		s.log = append(s.log, now)
	}
	return c.Window
}

func (s *slidingLogState) settle(c *compiled, now int64) int64 {
	s.trim(c, now)
	if s.head == len(s.log) {
		return 0
	}
	return s.log[len(s.log)-1] + c.Window - now
}

// take: a denial leaves at least one entry in the window (a cost is at
// most Quota).
func (s *slidingLogState) take(c *compiled, now, cost int64) (ok bool, remaining, reset, retry, window int64) {
	s.trim(c, now)
	live := s.log[s.head:]
	n := int64(len(live))
	if n+cost > c.Quota {
		retry = live[n+cost-c.Quota-1] + c.Window - now
		return false, max(c.Quota-n, 0), live[n-1] + c.Window - now, retry, live[0] + c.Window - now
	}
	s.commit(c, now, cost) // its trim finds nothing more to drop
	return true, c.Quota - n - cost, c.Window, 0, s.log[s.head] + c.Window - now
}

// peek does not trim, which may move the entries.
func (s *slidingLogState) peek(c *compiled, now, cost int64) (bool, int64, int64, int64) {
	live := s.log[s.head:]
	live = live[sort.Search(len(live), func(i int) bool { return live[i] > now-c.Window }):]
	n, reset := int64(len(live)), int64(0)
	if n > 0 {
		reset = live[n-1] + c.Window - now
	}
	if n+cost <= c.Quota {
		return true, c.Quota - n, reset, 0
	}
	return false, max(c.Quota-n, 0), reset, live[n+cost-c.Quota-1] + c.Window - now
}

// effective is when the oldest entry in the window leaves it, or a window.
func (s *slidingLogState) effective(c *compiled, now int64) int64 {
	live := s.log[s.head:]
	if i := sort.Search(len(live), func(i int) bool { return live[i] > now-c.Window }); i < len(live) {
		return live[i] + c.Window - now
	}
	return c.Window
}

// slidingWindowState mirrors sliding_window.lua: a ring of the last
// `slots` slots; slot[i] is the slot number whose count is count[i].
type slidingWindowState struct{ slot, count []int64 }

// live returns the sum of the slots in the window, the newest that holds
// units (-1 when none) and the oldest (else the current slot).
func (s *slidingWindowState) live(c *compiled, now int64) (sum, newest, oldest int64) {
	current := now / c.Width
	newest, oldest = -1, current
	for i, n := range s.slot {
		if s.count[i] > 0 && n > current-c.Slots {
			sum += s.count[i]
			newest, oldest = max(newest, n), min(oldest, n)
		}
	}
	return sum, newest, oldest
}

func (s *slidingWindowState) check(c *compiled, now, cost int64) (bool, int64, int64) {
	sum, _, _ := s.live(c, now)
	if sum+cost <= c.Quota {
		return true, c.Quota - sum, 0
	}
	return false, max(c.Quota-sum, 0), s.retry(c, now, sum, cost)
}

// take makes one pass over the slots: a commit adds to the current slot
// only, the newest.
func (s *slidingWindowState) take(c *compiled, now, cost int64) (ok bool, remaining, reset, retry, window int64) {
	current := now / c.Width
	sum, newest, oldest := s.live(c, now)
	window = (oldest+c.Slots)*c.Width - now
	if sum+cost > c.Quota {
		// sum > 0, as a cost is at most Quota: newest is a slot.
		return false, max(c.Quota-sum, 0), (newest+c.Slots)*c.Width - now, s.retry(c, now, sum, cost), window
	}
	s.add(c, current, cost)
	return true, c.Quota - sum - cost, (current+c.Slots)*c.Width - now, 0, window
}

// retry is check's time until cost fits, when sum is in the window:
// walk the window from its oldest slot until enough has left.
func (s *slidingWindowState) retry(c *compiled, now, sum, cost int64) int64 {
	current := now / c.Width
	excess, freed := sum+cost-c.Quota, int64(0)
	for n := current - c.Slots + 1; n <= current; n++ {
		if i := n % c.Slots; s.slot[i] == n {
			if freed += s.count[i]; freed >= excess {
				return (n+c.Slots)*c.Width - now
			}
		}
	}
	panic("store: sliding window: the live slots do not add up") // unreachable: sum >= excess
}

func (s *slidingWindowState) add(c *compiled, current, cost int64) {
	i := current % c.Slots
	if s.slot[i] != current {
		s.slot[i], s.count[i] = current, 0
	}
	s.count[i] += cost
}

func (s *slidingWindowState) commit(c *compiled, now, cost int64) int64 {
	s.add(c, now/c.Width, cost)
	return s.settle(c, now) // the current slot holds cost >= 1: it is the newest
}

func (s *slidingWindowState) settle(c *compiled, now int64) int64 {
	if _, newest, _ := s.live(c, now); newest >= 0 {
		return (newest+c.Slots)*c.Width - now
	}
	return 0
}

// peek: check and settle change nothing here, the ring has no stale slots.
func (s *slidingWindowState) peek(c *compiled, now, cost int64) (bool, int64, int64, int64) {
	ok, remaining, retry := s.check(c, now, cost)
	return ok, remaining, s.settle(c, now), retry
}

// effective is when the oldest slot in the window that holds a unit
// leaves it, or, when none does, the current slot.
func (s *slidingWindowState) effective(c *compiled, now int64) int64 {
	_, _, oldest := s.live(c, now)
	return (oldest+c.Slots)*c.Width - now
}

// tokenBucketState mirrors token_bucket.lua: a fixed-point level at last.
type tokenBucketState struct{ level, last int64 }

// refill brings the level up to now, capped: a limit of larger burst
// sharing the state may have left more than this one holds.
func (s *tokenBucketState) refill(c *compiled, now int64) {
	if now > s.last {
		if gap := c.Units - s.level; (now - s.last) >= ceilDiv(gap, c.Rate) {
			s.level = c.Units
		} else {
			s.level += (now - s.last) * c.Rate
		}
		s.last = now
	}
	s.level = min(s.level, c.Units)
}

func (s *tokenBucketState) check(c *compiled, now, cost int64) (bool, int64, int64) {
	s.refill(c, now)
	if need := cost * c.Unit; need > s.level {
		return false, max(s.level/c.Unit, 0), ceilDiv(need-s.level, c.Rate)
	}
	return true, s.level / c.Unit, 0
}

func (s *tokenBucketState) take(c *compiled, now, cost int64) (ok bool, remaining, reset, retry, window int64) {
	s.refill(c, now)
	remaining = max(s.level/c.Unit, 0) // a level below zero is a debt
	if need := cost * c.Unit; need > s.level {
		retry = ceilDiv(need-s.level, c.Rate)
	} else {
		ok, remaining = true, remaining-cost
		s.level -= need
	}
	reset = ceilDiv(c.Units-s.level, c.Rate)
	window = bucketWindow(c, s.level)
	return ok, remaining, reset, retry, window
}

// bucketWindow is token_bucket_window: the time to refill, from what is
// left once every whole token is spent, one more token; from a bucket in
// debt, its first token.
func bucketWindow(c *compiled, level int64) int64 {
	if level < 0 {
		return ceilDiv(c.Unit-level, c.Rate)
	}
	return ceilDiv((level/c.Unit+1)*c.Unit-level, c.Rate)
}

func (s *tokenBucketState) commit(c *compiled, now, cost int64) int64 {
	s.refill(c, now)
	s.level -= cost * c.Unit
	return ceilDiv(c.Units-s.level, c.Rate)
}

func (s *tokenBucketState) settle(c *compiled, now int64) int64 {
	s.refill(c, now)
	return ceilDiv(c.Units-s.level, c.Rate)
}

func (s *tokenBucketState) peek(c *compiled, now, cost int64) (bool, int64, int64, int64) {
	v := *s // refill changes the copy only
	ok, remaining, retry := v.check(c, now, cost)
	return ok, remaining, v.settle(c, now), retry
}

// effective is bucketWindow at now.
func (s *tokenBucketState) effective(c *compiled, now int64) int64 {
	v := *s // refill changes the copy only
	v.refill(c, now)
	return bucketWindow(c, v.level)
}

// keyTTL is how long the script keeps a limit's key after a commit that
// returned reset: until the state is empty again, in whole ms for the
// token bucket, whose PEXPIRE rounds up. Limits sharing a state with
// different quotas or bursts need the key's expiry to know when it starts
// afresh. A denial writes no TTL.
func keyTTL(c *compiled, reset int64) int64 {
	if c.Algorithm == spec.TokenBucket {
		return max(1, ceilDiv(reset, 1000)) * 1000
	}
	return reset
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b } // a >= 0, b >= 1

// freshWindow is the effective window of an empty state of c.
func freshWindow(c *compiled, now int64) int64 {
	if c.Calendar != nil {
		_, end := c.Calendar.Period(now)
		return end - now
	}
	switch c.Algorithm {
	case spec.Concurrent:
		return 0
	case spec.TokenBucket:
		return ceilDiv(c.Unit, c.Rate)
	case spec.SlidingWindow:
		return (now/c.Width+c.Slots)*c.Width - now
	}
	return c.Window
}
