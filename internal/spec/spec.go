// Package spec turns a valid limit into what the stores of this module
// need of it, in integers: the root package checks limits with it, and
// the stores compile a ratelimit.Limits with it once and keep the result.
package spec

import (
	"cmp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// Algorithm codes, as ratelimit.Algorithm numbers them.
const (
	SlidingWindow uint8 = iota
	FixedWindow
	SlidingLog
	TokenBucket
)

// Concurrent is ratelimit.Concurrent's code, after the calendars'.
const Concurrent uint8 = 7

// DefaultSlotLife is a Concurrent limit's slot life when its Window is zero.
const DefaultSlotLife = 30 * time.Second

// HoldLife is how long a reservation of a limit charged from usage lasts
// unless renewed: a request in flight has its store renew it every third
// of that, so only an instance that stopped lets its reservations lapse.
// A settled one leaves a mark as long, so that a second settle counts nothing.
const HoldLife = 30 * time.Second

// HoldsSuffix ends the key of a usage limit's reservations, after the
// limit's own suffix. No limit's suffix ends so.
const HoldsSuffix = "/h"

// EndedSuffix ends the key of the set of a key's requests whose
// reservations were settled lately (see end.lua in package lua). No
// limit's suffix is ":e": theirs are a letter and a window in ms.
const EndedSuffix = ":e"

// SliceLife is the longest a slice of a leased limit lasts.
const SliceLife = 100 * time.Millisecond

// MinLeasedSpan is the shortest window (fixed) or slot (sliding) a
// leased limit may have: a slice ends a millisecond before its window or
// slot, so shorter ones would leave slices of no use.
const MinLeasedSpan = 10 * time.Millisecond

// DefaultSlots is how many slots a sliding window has when its precision is not given.
const DefaultSlots = 10

// Limit is one valid limit in integers. Times are microseconds.
type Limit struct {
	Algorithm uint8
	Quota     int64
	Window    int64 // µs
	WindowMS  int64
	Capacity  int64 // the most one request may cost: Burst or Quota

	Width, Slots int64 // sliding window: slot width, slots per window

	Unit, Rate, Units int64 // token bucket fixed point; see TokenUnits

	// Suffix ends the key of the limit's state: ":" + code + window in
	// ms, then "/" + what else the state's layout depends on. Two limits
	// of one set never have the same suffix.
	Suffix string
	// Args are the limit's entries in its scripts' ARGV; a calendar
	// limit's change with time (see ScriptArgs).
	Args LimitArgs

	// Calendar is a Daily, Weekly or Monthly limit's calendar; nil for
	// the others. Such a limit's Window is its longest period.
	Calendar *Calendar

	// Usage marks a limit charged from usage: its script code is in upper
	// case (see decide.lua).
	Usage bool

	// Cost, when not 0, is what every request takes from the limit,
	// whatever its own cost: its script code is followed by it.
	Cost int64

	// Leased marks a limit that instances decide in process from slices
	// (ratelimit.Limit.Leased); a request that asks for one has
	// "~want~life" after its script code (see decide.lua's slice).
	Leased bool
}

// LimitArgs are a limit's entries in the ARGV of the store's Lua
// programs (see decide.lua in package lua): its algorithm's code and its
// parameters a, b and c, as strings, boxed once so that a call boxes
// nothing. Where in ARGV they go is the store's to say.
type LimitArgs struct {
	Code, A, B, C any
}

// FixedCost makes every request take n units from c (ratelimit.Limit.Cost).
func (c *Limit) FixedCost(n int64) {
	c.Cost = n
	if c.Calendar != nil {
		c.Calendar.cost = strconv.FormatInt(n, 10)
		return
	}
	c.Args.Code = c.Args.Code.(string) + strconv.FormatInt(n, 10)
}

// CostFor returns what a request of cost takes from c.
func (c *Limit) CostFor(cost int64) int64 { return cmp.Or(c.Cost, cost) }

// ChargedFromUsage marks c as charged from usage (ratelimit.Limit.Usage):
// its state is apart from that of the same limit not charged so, which
// counts requests rather than what they use.
func (c *Limit) ChargedFromUsage() {
	c.Usage = true
	c.Suffix += "/u"
	if c.Calendar != nil {
		c.Calendar.usage = true // its Args are made with the time
		return
	}
	c.Args.Code = strings.ToUpper(c.Args.Code.(string))
}

// CompileConcurrent returns the integers of a valid Concurrent limit of
// quota slots held at most life (zero: DefaultSlotLife). A request
// takes one slot whatever its cost: its Capacity, quota, bounds no cost
// (see Set.MinCapacity).
func CompileConcurrent(quota int, life time.Duration) Limit {
	c := newLimit(Concurrent, quota, cmp.Or(life, DefaultSlotLife))
	c.Suffix = ":k"
	c.Args = LimitArgs{Code: "k", A: strconv.FormatInt(c.Quota, 10), B: strconv.FormatInt(c.Window, 10), C: "0"}
	return c
}

// ScriptArgs returns the limit's entries in its scripts' ARGV.
func (c *Limit) ScriptArgs() LimitArgs {
	if c.Calendar != nil {
		return c.Calendar.Args()
	}
	return c.Args
}

// longestPeriod is each calendar algorithm's longest period, daylight saving's hour included.
var longestPeriod = map[uint8]time.Duration{
	Daily:   25 * time.Hour,
	Weekly:  7*24*time.Hour + time.Hour,
	Monthly: 31*24*time.Hour + time.Hour,
}

// CompileCalendar returns the integers of a valid Daily, Weekly or Monthly
// limit in zone loc (its name is zone), whose weeks start on weekday.
func CompileCalendar(algorithm uint8, quota int, zone string, loc *time.Location, weekday time.Weekday) Limit {
	c := newLimit(algorithm, quota, longestPeriod[algorithm])
	c.Calendar = NewCalendar(algorithm, c.Quota, loc, weekday)
	c.Suffix = ":c" + string("dwm"[algorithm-Daily]) + "/" + cmp.Or(zone, "UTC")
	if algorithm == Weekly {
		c.Suffix += "/" + strconv.Itoa(int(weekday))
	}
	return c
}

// Compile returns the integers of a valid limit. A zero burst means
// quota, a zero precision window/DefaultSlots.
func Compile(algorithm uint8, quota int, window, precision time.Duration, burst int) Limit {
	burst, precision = cmp.Or(burst, quota), cmp.Or(precision, window/DefaultSlots)
	c := newLimit(algorithm, quota, window)
	switch algorithm {
	case FixedWindow:
		c.encode("f", "", c.Quota, c.WindowMS, 0)
	case SlidingLog:
		c.encode("l", "", c.Quota, c.Window, c.WindowMS)
	case TokenBucket:
		c.Capacity = int64(burst)
		c.Unit, c.Rate, c.Units, _ = TokenUnits(c.Window, c.Quota, c.Capacity)
		c.encode("t", strconv.FormatInt(c.Quota, 10), c.Units, c.Unit, c.Rate)
	default:
		c.Width = int64(precision / time.Microsecond)
		c.Slots = c.Window / c.Width
		c.encode("s", strconv.FormatInt(c.Slots, 10), c.Quota, c.Width, c.Slots)
	}
	return c
}

// newLimit returns the integers every limit has; its capacity is its
// quota until a burst says otherwise.
func newLimit(algorithm uint8, quota int, window time.Duration) Limit {
	return Limit{
		Algorithm: algorithm,
		Quota:     int64(quota),
		Window:    int64(window / time.Microsecond),
		WindowMS:  int64(window / time.Millisecond),
		Capacity:  int64(quota),
	}
}

func (c *Limit) encode(code, extra string, a, b, d int64) {
	c.Suffix = ":" + code + strconv.FormatInt(c.WindowMS, 10)
	if extra != "" {
		c.Suffix += "/" + extra
	}
	c.Args = LimitArgs{Code: code, A: strconv.FormatInt(a, 10), B: strconv.FormatInt(b, 10), C: strconv.FormatInt(d, 10)}
}

// TokenUnits returns the fixed-point scale of a token bucket refilling
// quota tokens per window µs and holding burst, so that refilling is exact
// integer arithmetic: a token is unit units, the bucket gains rate units
// per µs, and a full bucket holds units. ok is false when units would not
// stay exact in a script (above wire.MaxQuota).
func TokenUnits(window, quota, burst int64) (unit, rate, units int64, ok bool) {
	g := gcd(window, quota)
	unit, rate = window/g, quota/g
	if burst != 0 && unit > wire.MaxQuota/burst {
		return unit, rate, 0, false
	}
	return unit, rate, unit * burst, true
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return cmp.Or(a, 1)
}

// BanSuffix ends the key of a key's ban state. No limit's suffix is
// ":b": theirs are a letter and a window in ms.
const BanSuffix = ":b"

// ChargeSuffix, then a charge's identity, ends the key that records that
// Redis ran the charge of a key's backlog (see charge.lua in package lua).
// No limit's suffix starts so.
const ChargeSuffix = ":charge/"

// Ban is a valid ratelimit.Ban in integers. Times are microseconds.
type Ban struct {
	After            int64
	Within, For, Max int64 // Max >= For

	// Args are the ban's entries in decide.lua's ARGV.
	Args BanArgs
}

// BanArgs are a ban's entries in decide.lua's ARGV: After, Within, For
// and Max, as strings, boxed once so that a call boxes nothing.
type BanArgs struct {
	After, Within, For, Max any
}

// NewBan returns the ban of a valid ratelimit.Ban whose Max is filled in.
func NewBan(after, within, first, max int64) *Ban {
	b := &Ban{After: after, Within: within, For: first, Max: max}
	b.Args = BanArgs{After: strconv.FormatInt(after, 10), Within: strconv.FormatInt(within, 10), For: strconv.FormatInt(first, 10), Max: strconv.FormatInt(max, 10)}
	return b
}

// Length returns the length of a key's ban number level (1 for the first
// of a series): For doubled level-1 times, at most Max.
func (b *Ban) Length(level int64) int64 {
	d := b.For
	for i := int64(1); i < level && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Set is the limits of one ratelimit.Limits, in their order.
type Set struct {
	Limits      []Limit
	MinCapacity int64 // the smallest Capacity of the limits a request's cost is taken from: the most it may cost
	Ban         *Ban  // nil: none
	Calendar    bool  // some limit is a calendar's
	Slot        int   // the index of its Concurrent limit; -1: none
	Leased      bool  // its limits are leased (all or none are)
	Usage       bool  // some limit is charged from usage: an admitted request reserves its cost there

	share atomic.Pointer[shared]
}

// NewSet returns the set of limits.
func NewSet(limits []Limit) *Set {
	s := &Set{Limits: limits, MinCapacity: wire.MaxQuota, Slot: -1}
	for i, l := range limits {
		if l.Algorithm != Concurrent && l.Cost == 0 {
			s.MinCapacity = min(s.MinCapacity, l.Capacity)
		}
		s.Calendar = s.Calendar || l.Calendar != nil
		s.Leased = s.Leased || l.Leased
		s.Usage = s.Usage || l.Usage
		if l.Algorithm == Concurrent {
			s.Slot = i
		}
	}
	return s
}

// WithBan returns a copy of s with ban b.
func (s *Set) WithBan(b *Ban) *Set {
	return &Set{Limits: s.Limits, MinCapacity: s.MinCapacity, Ban: b, Calendar: s.Calendar, Slot: s.Slot, Leased: s.Leased, Usage: s.Usage}
}

type shared struct {
	n   int
	set *Set
}

// Holds reports whether a request of cost admitted under s reserves
// units: takes a slot or holds its cost in a limit charged from usage,
// under one id (ratelimit.Decision.Slot) that End gives back.
func (s *Set) Holds(cost int64) bool {
	if s.Slot >= 0 {
		return true
	}
	if !s.Usage {
		return false
	}
	for i := range s.Limits {
		if s.Limits[i].Usage && s.Limits[i].CostFor(cost) > 0 {
			return true
		}
	}
	return false
}

// Share returns an n-th of s, for one of n instances deciding alone:
// each quota and burst divided by n, rounded up. A token bucket whose
// share would not stay exact keeps its whole size. The share is worked out
// once and kept with s (for the last n asked).
func (s *Set) Share(n int) *Set {
	if n == 1 {
		return s
	}
	if p := s.share.Load(); p != nil && p.n == n {
		return p.set
	}
	limits := make([]Limit, len(s.Limits))
	for i, l := range s.Limits {
		quota := (l.Quota + int64(n) - 1) / int64(n)
		burst := (l.Capacity + int64(n) - 1) / int64(n) // a token bucket's
		window := time.Duration(l.Window) * time.Microsecond
		_, _, _, exact := TokenUnits(l.Window, quota, burst)
		switch cal := l.Calendar; {
		case l.Algorithm == Concurrent:
			limits[i] = CompileConcurrent(int(quota), window)
			continue
		case cal != nil:
			limits[i] = l
			limits[i].Quota, limits[i].Capacity = quota, quota
			limits[i].Calendar = NewCalendar(cal.Algorithm, quota, cal.Location, cal.Weekday)
		case l.Algorithm == TokenBucket && !exact:
			limits[i] = l
			continue
		default:
			limits[i] = Compile(l.Algorithm, int(quota), window, time.Duration(l.Width)*time.Microsecond, int(burst))
		}
		if l.Usage {
			limits[i].ChargedFromUsage()
		}
		if l.Cost != 0 {
			limits[i].FixedCost(l.Cost)
		}
	}
	set := NewSet(limits).WithBan(s.Ban)
	s.share.Store(&shared{n, set})
	return set
}

// KeyHash is FNV-1a of key: it spreads keys over the shards of the
// stores' tables (the deny cache, the Fallback's backlog).
func KeyHash(key string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return h
}
