package ratelimit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// Bounds on a [Limit]'s fields; see its documentation.
const (
	maxSlidingLogQuota = 100_000
	maxSlotsPerWindow  = 1000
	maxSlots           = 10_000 // of a Concurrent limit
	minSlotLife        = 300 * time.Millisecond
)

// Algorithm selects how a [Limit] counts requests. The zero value is
// [SlidingWindow].
type Algorithm uint8

const (
	// SlidingWindow counts in slots of Limit.Precision, one small counter
	// each, and admits while the slots that overlap the last Window hold
	// fewer than Quota: never more than Quota in any span of
	// Window−Precision, up to one slot's worth more across a full Window
	// (see docs/algorithms.md). It is the default.
	SlidingWindow Algorithm = iota

	// FixedWindow counts requests in a window that opens with the first
	// request and closes Window later. It is the cheapest algorithm, but a
	// client can pass up to 2×Quota across the boundary between two windows.
	FixedWindow

	// SlidingLog keeps the time of every admitted request for one Window.
	// It is exact: never more than Quota in any span of Window. Memory per
	// key grows with Quota, so Quota is capped at 100,000.
	SlidingLog

	// TokenBucket holds up to Limit.Burst tokens and refills at Quota per
	// Window. Each request takes cost tokens; a full bucket lets a burst
	// through, then the rate holds. It starts full.
	TokenBucket

	// Daily is a quota per calendar day in Limit.Zone: its count starts
	// afresh at local midnight, so a day lasts 23 or 25 hours when the
	// clocks change. Window is the calendar's: leave it zero.
	Daily

	// Weekly is a quota per calendar week in Limit.Zone, starting at
	// midnight of Limit.Weekday. Window is the calendar's: leave it zero.
	Weekly

	// Monthly is a quota per calendar month in Limit.Zone, starting at
	// midnight of the 1st: 28 to 31 days, give or take the hour of a clock
	// change. Window is the calendar's: leave it zero.
	Monthly

	// Concurrent caps the requests in flight: at most Quota (up to 10,000)
	// at once per key, across every instance. A request admitted holds one
	// slot, whatever its cost, until it ends ([Limiter.End]); its instance
	// renews the slot while it runs, and a slot not renewed lapses after
	// Window (zero means 30s). See docs/limits.md.
	Concurrent
)

var algorithmNames = [...]string{
	SlidingWindow: "sliding-window",
	FixedWindow:   "fixed-window",
	SlidingLog:    "sliding-log",
	TokenBucket:   "token-bucket",
	Daily:         "daily",
	Weekly:        "weekly",
	Monthly:       "monthly",
	Concurrent:    "concurrent",
}

// String returns the algorithm's name, for example "token-bucket".
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

func (a Algorithm) valid() bool { return int(a) < len(algorithmNames) }

// calendar reports whether a counts in calendar periods.
func (a Algorithm) calendar() bool { return a >= Daily && a <= Monthly }

// A Limit says how many requests (or units of cost) a key may make per
// Window, and with which [Algorithm]. Build one with [PerSecond] or
// [PerMinute], or as a struct literal, and refine it:
//
//	ratelimit.PerMinute(100)                                   // sliding window counter
//	ratelimit.PerMinute(5).Using(ratelimit.SlidingLog).Named("login")
//	ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 10, Window: time.Second, Burst: 50}
//	ratelimit.Limit{Quota: 10_000, Window: 24 * time.Hour}.Using(ratelimit.FixedWindow)
//	ratelimit.Limit{Quota: 600, Window: time.Hour, Precision: time.Minute}
//	ratelimit.Limit{Algorithm: ratelimit.Monthly, Quota: 1_000_000, Zone: "Europe/Paris"}
//
// A Limit is a plain value: compare it with ==, copy it, use it as a map
// key. It is checked when it joins a [Limits] (see [NewLimits]); the zero
// Limit is not valid.
type Limit struct {
	// Algorithm decides how requests are counted. Zero is SlidingWindow.
	Algorithm Algorithm

	// Quota is how many units a key may spend per Window: the limit for
	// windows and logs, the refill rate for a token bucket. From 1 to
	// 2^53−1, so that every count is exact in Redis's Lua; at most 100,000
	// for a SlidingLog, which keeps one entry per admitted unit.
	Quota int

	// Window is the period Quota applies to: at least 1ms, in whole
	// milliseconds. Daily, Weekly and Monthly limits leave it zero: their
	// periods are the calendar's.
	Window time.Duration

	// Burst is a TokenBucket's capacity: how many units may pass at once
	// after a quiet period. Zero means Quota. Other algorithms leave it
	// zero.
	Burst int

	// Precision is a SlidingWindow's slot width, in whole microseconds. It
	// must divide Window, into at most 1000 slots (each decision reads
	// every slot). Zero means Window/10. Other algorithms leave it zero.
	Precision time.Duration

	// Zone is the IANA time zone, such as "America/New_York", whose
	// calendar a Daily, Weekly or Monthly limit follows. Empty means UTC.
	// The zone database is built in, so a machine without one works too.
	// Other algorithms leave it empty.
	Zone string

	// Weekday is the day a Weekly limit's weeks start on, at midnight in
	// Zone. Zero is Sunday. Other algorithms leave it zero.
	Weekday time.Weekday

	// Usage marks a limit charged with what requests use (tokens, bytes,
	// reported with [Charge]) rather than with what they cost: a request
	// reserves its cost ([WithCost]) while it runs, then is charged its
	// usage whatever the limit has left, and a limit in debt denies until
	// time pays it back. Not for SlidingLog or Concurrent. It counts apart
	// from a limit without it. See docs/limits.md.
	Usage bool

	// Cost, when not zero, is what every request takes from this limit,
	// whatever its cost ([WithCost]): 1 for a limit that counts requests
	// beside limits charged from usage whose expected usage WithCost
	// gives. From 1 to the limit's capacity. Zero means the request's
	// cost. A limit charged from usage, or Concurrent, leaves it zero.
	Cost int

	// Leased lets each instance decide the limit in process, from slices
	// of its quota taken from the store ahead of the requests, for a hot
	// key; units left in a slice when it ends are lost. For fixed window,
	// sliding window and token bucket limits, all the limits of a set or
	// none, and not with a [Ban]; [NewLimits] refuses one that could never
	// take a slice. The Memory store ignores it. See docs/limits.md.
	Leased bool

	// Shadow makes the limit one that is decided and counted but never
	// denies: a request it alone would deny is served and reported as a
	// would-be denial (to [WithDryRun]'s report or the log, and to an
	// observer as "would_deny"). See docs/limits.md.
	Shadow bool

	// Name names the limit in RateLimit-Policy headers, logs and errors:
	// printable ASCII, at most 64 bytes. Empty means a name made of the
	// other fields. A name is a label only: renaming a limit keeps its
	// counters.
	Name string
}

// PerSecond returns a limit of n per second, counted with the default
// algorithm, SlidingWindow.
func PerSecond(n int) Limit { return Limit{Quota: n, Window: time.Second} }

// PerMinute returns a limit of n per minute, counted with the default
// algorithm, SlidingWindow.
func PerMinute(n int) Limit { return Limit{Quota: n, Window: time.Minute} }

// Using returns a copy of l counted with algorithm a.
func (l Limit) Using(a Algorithm) Limit { l.Algorithm = a; return l }

// Named returns a copy of l named name.
func (l Limit) Named(name string) Limit { l.Name = name; return l }

// String describes l, for example "login: 5 per 1m, sliding-log" or
// "10 per 1s, token-bucket, burst 20".
func (l Limit) String() string {
	s := strconv.Itoa(l.Quota)
	if l.Name != "" {
		s = l.Name + ": " + s
	}
	switch {
	case l.Algorithm == Concurrent:
		return s + " in flight, slots of " + formatDuration(cmp.Or(l.Window, spec.DefaultSlotLife))
	case l.Algorithm.calendar():
		s += " per calendar " + [...]string{"day", "week", "month"}[l.Algorithm-Daily]
		if l.Algorithm == Weekly {
			s += " from " + l.Weekday.String()
		}
		s += " in " + cmp.Or(l.Zone, "UTC")
	default:
		s += " per " + formatDuration(l.Window) + ", " + l.Algorithm.String()
		if l.Burst != 0 {
			s += ", burst " + strconv.Itoa(l.Burst)
		}
		if l.Precision != 0 {
			s += ", precision " + formatDuration(l.Precision)
		}
	}
	if l.Usage {
		s += ", charged from usage"
	}
	if l.Cost != 0 {
		s += ", " + strconv.Itoa(l.Cost) + " a request"
	}
	if l.Leased {
		s += ", leased"
	}
	return s
}

// formatDuration writes d like [time.Duration.String] without trailing
// zero units: "1m" rather than "1m0s", "1h30m" rather than "1h30m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// withDefaults returns l with its defaulted zero fields filled in: Burst
// for a TokenBucket, Precision for a SlidingWindow.
func (l Limit) withDefaults() Limit {
	switch l.Algorithm {
	case TokenBucket:
		if l.Burst == 0 {
			l.Burst = l.Quota
		}
	case SlidingWindow:
		if l.Precision == 0 {
			l.Precision = l.Window / spec.DefaultSlots
		}
	}
	return l
}

// capacity is the most units l holds at once: Burst (or its default) for
// a TokenBucket, Quota otherwise.
func (l Limit) capacity() int {
	if l.Algorithm == TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Quota
}

// check returns the first invalid field and what is wrong with it, or
// two empty strings.
func (l Limit) check() (field, problem string) {
	switch {
	case !l.Algorithm.valid():
		return "Algorithm", fmt.Sprintf("is unknown: %d", l.Algorithm)
	case l.Quota < 1:
		return "Quota", fmt.Sprintf("must be at least 1, got %d", l.Quota)
	case l.Quota > wire.MaxQuota:
		return "Quota", fmt.Sprintf("must be at most %d, got %d", wire.MaxQuota, l.Quota)
	case l.Zone != "" && !l.Algorithm.calendar():
		return "Zone", fmt.Sprintf("is only used by daily, weekly and monthly limits, not %v; leave it empty", l.Algorithm)
	case l.Weekday != 0 && l.Algorithm != Weekly:
		return "Weekday", fmt.Sprintf("is only used by weekly limits, not %v; leave it zero", l.Algorithm)
	case l.Cost < 0:
		return "Cost", fmt.Sprintf("must be zero (the request's cost) or from 1 to the capacity, got %d", l.Cost)
	case l.Cost != 0 && (l.Usage || l.Algorithm == Concurrent):
		return "Cost", "is what a request takes before it runs: a limit charged from usage, or of requests in flight, leaves it zero"
	case l.Cost > 0 && l.Cost > l.capacity():
		return "Cost", fmt.Sprintf("%d exceeds the limit's capacity %d: no request could pass", l.Cost, l.capacity())
	case l.Usage && l.Algorithm == SlidingLog:
		return "Usage", "cannot charge a sliding-log: it keeps an entry per unit, and a charge has no bound; use sliding-window (SlidingWindow)"
	case l.Leased && l.Algorithm == SlidingLog:
		return "Leased", "cannot lease a sliding-log: it keeps the time of every unit, which a slice taken ahead does not have; use sliding-window (SlidingWindow)"
	case l.Leased && l.Algorithm != FixedWindow && l.Algorithm != SlidingWindow && l.Algorithm != TokenBucket:
		return "Leased", fmt.Sprintf("is for fixed-window, sliding-window and token-bucket limits, not %v", l.Algorithm)
	case l.Leased && l.Usage:
		return "Leased", "cannot be set with Usage: a slice is taken before the requests, a usage charged after them"
	case l.Algorithm.calendar():
		return l.checkCalendar()
	case l.Algorithm == Concurrent:
		return l.checkConcurrent()
	case l.Window < time.Millisecond:
		return "Window", fmt.Sprintf("must be at least 1ms, got %v", l.Window)
	case l.Window%time.Millisecond != 0:
		return "Window", fmt.Sprintf("must be a whole number of milliseconds, got %v", l.Window)
	}
	if field, problem := l.checkFields(); field != "" {
		return field, problem
	}
	switch l.Algorithm {
	case SlidingLog:
		if l.Quota > maxSlidingLogQuota {
			return "Quota", fmt.Sprintf("must be at most %d for sliding-log, got %d: the log keeps one entry per request; use sliding-window (SlidingWindow), which needs a few counters per key", maxSlidingLogQuota, l.Quota)
		}
	case SlidingWindow:
		p := l.withDefaults().Precision
		switch {
		case p <= 0:
			return "Precision", fmt.Sprintf("must be positive, got %v", p)
		case p%time.Microsecond != 0:
			return "Precision", fmt.Sprintf("must be a whole number of microseconds, got %v", p)
		case p > l.Window:
			return "Precision", fmt.Sprintf("must not exceed Window %v, got %v", l.Window, p)
		case l.Window%p != 0:
			return "Precision", fmt.Sprintf("must divide Window %v evenly, got %v", l.Window, p)
		case l.Window/p > maxSlotsPerWindow:
			return "Precision", fmt.Sprintf("makes %d slots (Window/Precision); at most %d are allowed", l.Window/p, maxSlotsPerWindow)
		}
	case TokenBucket:
		burst := l.capacity()
		if burst < 1 {
			return "Burst", fmt.Sprintf("must be at least 1, got %d", l.Burst)
		}
		if burst > wire.MaxQuota {
			return "Burst", fmt.Sprintf("must be at most %d, got %d", wire.MaxQuota, burst)
		}
		if _, _, _, ok := spec.TokenUnits(int64(l.Window/time.Microsecond), int64(l.Quota), int64(burst)); !ok {
			return "Burst", fmt.Sprintf("%d is too large for a refill of %d per %s: the bucket's level would not fit in 53 bits", burst, l.Quota, formatDuration(l.Window))
		}
	}
	if l.Leased {
		return l.checkLeased()
	}
	return "", ""
}

// checkLeased refuses a leased limit that could never take a slice
// worth having, which would quietly decide every request on the store.
// A slice is at most an eighth of what the limit has left beyond the
// request's cost, ends a millisecond before its window or slot ends, and
// a token bucket's is taken only from what the bucket holds beyond the
// refill of a slice's life (spec.SliceLife).
func (l Limit) checkLeased() (field, problem string) {
	unit := max(l.Cost, 1)
	switch l.Algorithm {
	case FixedWindow:
		if l.Window < spec.MinLeasedSpan {
			return "Window", fmt.Sprintf("%v is too short to lease: a slice ends a millisecond before its window, so a window under %v leaves no slice worth taking; lengthen it or do not lease the limit", l.Window, spec.MinLeasedSpan)
		}
	case SlidingWindow:
		if p := l.withDefaults().Precision; p < spec.MinLeasedSpan {
			return "Precision", fmt.Sprintf("%v is too fine to lease: a slice ends a millisecond before the slot its units count in, so slots under %v leave no slice worth taking; set Precision to %v or more, or do not lease the limit", p, spec.MinLeasedSpan, spec.MinLeasedSpan)
		}
	case TokenBucket:
		burst := l.capacity()
		refill := float64(l.Quota) * float64(spec.SliceLife) / float64(l.Window)
		if float64(burst)-refill < float64(9*unit) {
			return "Burst", fmt.Sprintf("%d is too small to lease: a slice is taken only from what the bucket holds beyond its refill in %v (%.0f), and at most an eighth of it, so it would never take one; raise Burst to at least %d, or do not lease the limit", burst, spec.SliceLife, refill, int(math.Ceil(refill))+9*unit)
		}
		return "", ""
	}
	if l.Quota < 9*unit {
		return "Quota", fmt.Sprintf("%d is too small to lease: a slice is at most an eighth of what is left beyond a request's %d, so it would never take one; raise Quota to at least %d, or do not lease the limit", l.Quota, unit, 9*unit)
	}
	return "", ""
}

// checkFields is check of the fields every algorithm reads alike: Burst
// and Precision, each of one algorithm, and Name.
func (l Limit) checkFields() (field, problem string) {
	switch {
	case l.Burst != 0 && l.Algorithm != TokenBucket:
		return "Burst", fmt.Sprintf("is only used by token-bucket, not %v; leave it zero", l.Algorithm)
	case l.Precision != 0 && l.Algorithm != SlidingWindow:
		return "Precision", fmt.Sprintf("is only used by sliding-window, not %v; leave it zero", l.Algorithm)
	case len(l.Name) > wire.MaxName:
		return "Name", fmt.Sprintf("is %d bytes long; at most %d are allowed", len(l.Name), wire.MaxName)
	case strings.IndexFunc(l.Name, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0:
		return "Name", fmt.Sprintf("%q holds a byte outside printable ASCII, which a header cannot carry", l.Name)
	}
	return "", ""
}

// checkConcurrent is check for a Concurrent limit.
func (l Limit) checkConcurrent() (field, problem string) {
	switch {
	case l.Quota > maxSlots:
		return "Quota", fmt.Sprintf("must be at most %d requests in flight, got %d", maxSlots, l.Quota)
	case l.Window != 0 && l.Window < minSlotLife:
		return "Window", fmt.Sprintf("is a concurrent limit's slot life: at least %v, or zero for 30s; got %v", minSlotLife, l.Window)
	case l.Window%time.Millisecond != 0:
		return "Window", fmt.Sprintf("must be a whole number of milliseconds, got %v", l.Window)
	case l.Usage:
		return "Usage", "cannot charge a concurrent limit: it counts requests in flight, not what they use"
	}
	return l.checkFields()
}

// checkCalendar is check for a Daily, Weekly or Monthly limit.
func (l Limit) checkCalendar() (field, problem string) {
	switch {
	case l.Window != 0:
		return "Window", fmt.Sprintf("is the calendar's for a %v limit; leave it zero, got %v", l.Algorithm, l.Window)
	case l.Weekday < time.Sunday || l.Weekday > time.Saturday:
		return "Weekday", fmt.Sprintf("is not a day of the week: %d", l.Weekday)
	}
	if field, problem := l.checkFields(); field != "" {
		return field, problem
	}
	if strings.IndexFunc(l.Zone, func(r rune) bool { return r <= 0x20 || r > 0x7e || r == '{' || r == '}' }) >= 0 {
		return "Zone", fmt.Sprintf("%q is not the name of a time zone", l.Zone)
	}
	if _, err := spec.LoadLocation(l.Zone); err != nil {
		return "Zone", fmt.Sprintf("%q is not a time zone this program knows: %v", l.Zone, err)
	}
	return "", ""
}

// storage keeps the fields that identify where a limit's state is
// stored: two limits of equal storage would count into the same place.
func (l Limit) storage() Limit {
	l = l.withDefaults()
	if l.Algorithm.calendar() {
		return Limit{Algorithm: l.Algorithm, Zone: cmp.Or(l.Zone, "UTC"), Weekday: l.Weekday, Usage: l.Usage}
	}
	if l.Algorithm == Concurrent {
		return Limit{Algorithm: Concurrent} // one count of requests in flight
	}
	s := Limit{Algorithm: l.Algorithm, Window: l.Window, Usage: l.Usage}
	switch l.Algorithm {
	case SlidingWindow:
		s.Precision = l.Precision
	case TokenBucket:
		s.Quota = l.Quota
	}
	return s
}

// Limits is a set of limits that a request must all pass, checked once,
// when it is built, so that a [Store] trusts it on every request. Build it
// with [NewLimits] and reuse it: stores compile a set the first time they
// see it and keep what they made. A Limiter builds its own from
// [WithLimits], [WithRoutes] and [WithLimitsFunc].
//
// Limits is immutable and safe for concurrent use. The zero Limits holds
// no limits, and stores refuse it.
type Limits struct {
	limits []Limit
	ban    Ban // zero: none
}

// NewLimits checks limits and returns them as a set. It reports, as an
// error wrapping [ErrInvalid] and naming the field, an invalid limit (see
// [Limit]'s fields), two limits that would count into one place (the same
// algorithm and window: keep one), and two limits of one name.
func NewLimits(limits ...Limit) (*Limits, error) {
	if problem := checkSet(limits); problem != "" {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, problem)
	}
	return &Limits{limits: append([]Limit(nil), limits...)}, nil
}

// All returns a copy of the limits of s, in the order given to
// [NewLimits]; nil for a nil or zero Limits.
func (s *Limits) All() []Limit {
	if s == nil {
		return nil
	}
	return append([]Limit(nil), s.limits...)
}

// WithBan returns a copy of s whose keys are banned as b says (see
// [Ban]), replacing any ban s had. It reports an invalid field of b as an
// error wrapping [ErrInvalid].
func (s *Limits) WithBan(b Ban) (*Limits, error) {
	if s == nil || len(s.limits) == 0 {
		return nil, fmt.Errorf("%w: Limits.WithBan: the limits are nil or zero; build them with NewLimits", ErrInvalid)
	}
	if field, problem := b.check(); field != "" {
		return nil, fmt.Errorf("%w: Ban.%s %s", ErrInvalid, field, problem)
	}
	if s.limits[0].Leased {
		return nil, fmt.Errorf("%w: Limits.WithBan: the limits are leased, decided in process where the strikes of a ban cannot be counted", ErrInvalid)
	}
	return &Limits{limits: s.limits, ban: b}, nil
}

// Ban returns the ban of s, and whether it has one.
func (s *Limits) Ban() (Ban, bool) {
	if s == nil {
		return Ban{}, false
	}
	return s.ban, s.ban != Ban{}
}

// checkSet describes what makes limits unusable together, or returns "".
func checkSet(limits []Limit) string {
	if len(limits) == 0 {
		return "no limits given"
	}
	for i, l := range limits {
		if field, problem := l.check(); field != "" {
			return fmt.Sprintf("limits[%d].%s %s (%v)", i, field, problem, l)
		}
		if l.Leased != limits[0].Leased {
			return fmt.Sprintf("limits[%d] is leased and limits[%d] is not: the limits of a set are leased all or none", slices.IndexFunc(limits, func(l Limit) bool { return l.Leased }), slices.IndexFunc(limits, func(l Limit) bool { return !l.Leased }))
		}
		for j := range i {
			o := limits[j]
			if o.storage() == l.storage() {
				return fmt.Sprintf("limits[%d] (%v) and limits[%d] (%v) would count into one place (same algorithm and window); keep one", j, o, i, l)
			}
			if l.Name != "" && o.Name == l.Name {
				return fmt.Sprintf("limits[%d].Name %q is also the name of limits[%d]; names tell policies apart in headers", i, l.Name, j)
			}
		}
	}
	return ""
}

// maxBan bounds every duration of a [Ban].
const maxBan = 366 * 24 * time.Hour

// A Ban blocks a key that keeps getting denied, for longer each time, like
// fail2ban: once a key has been denied After times within Within of the
// first denial, everything it asks is denied for For. A ban that starts
// less than Max after the previous one ended lasts twice as long, up to
// Max. Denials by a ban do not count. See docs/limits.md.
//
// Give a Limiter a ban with [WithBan], or a set of limits with
// [Limits.WithBan]. A Ban is a plain value; the zero Ban is not valid.
type Ban struct {
	// After is how many denials start a ban: at least 1.
	After int

	// Within is the period After denials must fall in, counted from the
	// first.
	Within time.Duration

	// For is the first ban's length.
	For time.Duration

	// Max is the longest ban, and the quiet time after which a key's next
	// ban is For again. Zero means For: every ban lasts For.
	Max time.Duration
}

// check returns the first invalid field and what is wrong with it, or
// two empty strings.
func (b Ban) check() (field, problem string) {
	if b.After < 1 {
		return "After", fmt.Sprintf("must be at least 1, got %d", b.After)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Within", b.Within}, {"For", b.For}, {"Max", b.Max}} {
		switch {
		case f.name == "Max" && f.d == 0:
		case f.d < time.Millisecond || f.d > maxBan:
			return f.name, fmt.Sprintf("must be from 1ms to %s, got %v", formatDuration(maxBan), f.d)
		case f.d%time.Millisecond != 0:
			return f.name, fmt.Sprintf("must be a whole number of milliseconds, got %v", f.d)
		}
	}
	if b.Max != 0 && b.Max < b.For {
		return "Max", fmt.Sprintf("must not be shorter than For %v, got %v", b.For, b.Max)
	}
	return "", ""
}

// policy is a set of limits as a Limiter applies them: the limits, the
// start of the keys they count under, and what the headers say of them,
// worked out once.
type policy struct {
	set         *Limits
	prefix      string     // namespace|scope|, the start of every key
	names       []string   // each limit's name as an RFC 9651 string, quoted
	items       []string   // each limit's RateLimit-Policy item, without pk
	policyValue []string   // the RateLimit-Policy value: the items, joined
	capacity    [][]string // each limit's X-RateLimit-Limit value
	usage       bool       // some limit is charged from usage: a request ends with Limiter.End
	more        *Limits    // the limits charged from usage alone, of which a stream asks more (see Charge); nil without
	moreMax     int        // the smallest capacity of more's limits: the most one ask holds
	slot        bool       // a limit is Concurrent: a request ends with Limiter.End too
	blocked     bool       // an override blocks the keys of these limits: deny without the store
	shadows     bool       // some limit is Shadow
	enforced    *policy    // when some limits are Shadow and some not, those that are not

	overridden     [8]atomic.Pointer[overriddenMemo] // the last policies overrides made of it
	nextOverridden atomic.Uint32                     // where the next goes
}

// A policyBase is what every policy of a Limiter takes from its options.
type policyBase struct {
	namespace string
	ban       Ban    // of WithBan; zero: none
	unit      string // the quota unit of the headers; "": none
	countOnly bool   // every limit is charged from usage (see WithCountOnly)
	shadow    bool   // every limit is Shadow (see WithDryRun)
}

// newPolicy checks limits and returns them as the policy of the route
// pattern (or, for "", of WithLimits); or it says what is wrong with them.
func (b policyBase) newPolicy(pattern string, limits []Limit) (*policy, string) {
	if problem := checkSet(limits); problem != "" {
		return nil, problem
	}
	switch {
	case limits[0].Leased && b.ban != Ban{}:
		return nil, "the limits are leased, decided in process where the strikes of a ban cannot be counted: drop the ban or Leased"
	case limits[0].Leased && b.countOnly:
		return nil, "the limits are leased, taken before the requests, and WithCountOnly charges them after: drop one"
	}
	n := len(limits)
	p := &policy{
		set:      &Limits{limits: append([]Limit(nil), limits...), ban: b.ban},
		prefix:   b.namespace + "|" + scopeOf(pattern) + "|",
		names:    make([]string, n),
		items:    make([]string, n),
		capacity: make([][]string, n),
	}
	used := make(map[string]bool, n)
	for i, l := range limits {
		name := policyName(l, limits)
		for k := 2; used[name]; k++ {
			name = policyName(l, limits) + "-" + strconv.Itoa(k)
		}
		used[name] = true
		p.set.limits[i].Name = name // results, and so the 429 and Decisions, name the policy as the headers do
		if b.countOnly {
			p.set.limits[i].Usage = true // a sliding log too: a count-only charge is at most the cost
		}
		if b.shadow {
			p.set.limits[i].Shadow = true
		}
		p.shadows = p.shadows || p.set.limits[i].Shadow
		p.usage = p.usage || p.set.limits[i].Usage
		p.slot = p.slot || l.Algorithm == Concurrent
		p.names[i] = quoteString(name)
		p.capacity[i] = []string{strconv.Itoa(l.capacity())}
		p.items[i] = policyItem(p.names[i], l, l.capacity(), b.unit)
	}
	p.policyValue = []string{strings.Join(p.items, ", ")}
	var more, enforced []Limit // charged from usage, of which a stream asks more; not Shadow
	for _, l := range p.set.limits {
		if l.Usage && l.Algorithm != Concurrent {
			more = append(more, l)
			p.moreMax = min(cmp.Or(p.moreMax, l.capacity()), l.capacity())
		}
		if p.shadows && !l.Shadow {
			enforced = append(enforced, l)
		}
	}
	if len(more) > 0 {
		p.more = &Limits{limits: more}
	}
	if len(enforced) > 0 {
		if b.ban != (Ban{}) {
			return nil, "some limits are Shadow and some not, with a ban: the ban would count a shadow limit's would-be denials as strikes and ban for real; shadow every limit or none, or drop the ban"
		}
		b.shadow = false
		p.enforced, _ = b.newPolicy(pattern, enforced) // a subset of a valid set
		p.enforced.prefix = p.prefix
	}
	return p, ""
}

// policyName is l.Name or, when empty, one made of its quota and window,
// with the algorithm added if another limit of the set has the same.
func policyName(l Limit, all []Limit) string {
	if l.Name != "" {
		return l.Name
	}
	short := strconv.Itoa(l.Quota) + "-per-" + formatDuration(l.Window)
	for _, o := range all {
		if o != l && o.Name == "" && o.Quota == l.Quota && o.Window == l.Window {
			return short + "-" + l.Algorithm.String()
		}
	}
	return short
}

// policyItem is the RateLimit-Policy item of l, named name (quoted):
// its quota q, its quota unit unless unit is "" or "requests", and its
// window.
func policyItem(name string, l Limit, q int, unit string) string {
	item := name + ";q=" + strconv.FormatInt(sfInt(int64(q)), 10)
	if l.Algorithm == Concurrent {
		return item + `;qu="concurrent-requests"` // no window: a slot comes back when a request ends
	}
	if unit != "" && unit != "requests" {
		item += ";qu=" + quoteString(unit)
	}
	if l.Algorithm.calendar() {
		return item // a calendar's periods differ in length: t says when this one ends
	}
	return item + ";w=" + strconv.FormatInt(sfInt(seconds(policyWindow(l))), 10)
}

// policyWindow is the w of a limit: its window, or for a token bucket the
// time to refill a whole burst.
func policyWindow(l Limit) time.Duration {
	if l.Algorithm == TokenBucket {
		l = l.withDefaults()
		return time.Duration(int64(l.Window) / int64(l.Quota) * int64(l.Burst))
	}
	return l.Window
}

// quoteString writes s, printable ASCII, as an RFC 9651 sf-string.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// seconds rounds d up to whole seconds, at least 0. It divides before
// rounding, so that the longest durations do not overflow.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// sfInt clamps n to the largest Integer of RFC 9651, which has 15 digits.
func sfInt(n int64) int64 { return min(n, 999_999_999_999_999) }
