package store

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// What the three stores do alike: check a request, shape its decision,
// and spread keys over shards.

// compiled is what the stores need of one limit, worked out when its
// ratelimit.Limits was built.
type compiled = spec.Limit

// maxKeyLength is the longest key a store accepts, in bytes.
const maxKeyLength = 1024

// limitSet is a ratelimit.Limits as the stores use it: its limits, and
// their integers.
type limitSet struct {
	*spec.Set
	limits []ratelimit.Limit
}

// maxSets bounds the sets compiled and kept; when full, it starts afresh.
const maxSets = 4096

// sets holds the compiled form of every ratelimit.Limits the stores
// have seen, so that each is compiled once: a service has a few, made
// when it starts (a Limiter's WithLimitsFunc keeps at most 1,024).
var sets struct {
	m sync.Map // *ratelimit.Limits to *limitSet
	n atomic.Int64
}

// compile returns the limitSet of limits, nil for a nil or zero one.
func compile(limits *ratelimit.Limits) *limitSet {
	if v, ok := sets.m.Load(limits); ok {
		return v.(*limitSet)
	}
	given := limits.All()
	if len(given) == 0 {
		return nil
	}
	cs := make([]spec.Limit, len(given))
	for i, l := range given {
		if a := uint8(l.Algorithm); a == spec.Concurrent {
			cs[i] = spec.CompileConcurrent(l.Quota, l.Window)
		} else if spec.IsCalendar(a) {
			loc, err := spec.LoadLocation(l.Zone)
			if err != nil { // NewLimits loaded it: it cannot fail here
				panic(err)
			}
			cs[i] = spec.CompileCalendar(a, l.Quota, l.Zone, loc, l.Weekday)
		} else {
			cs[i] = spec.Compile(uint8(l.Algorithm), l.Quota, l.Window, l.Precision, l.Burst)
		}
		if l.Usage {
			cs[i].ChargedFromUsage()
		}
		if l.Cost != 0 {
			cs[i].FixedCost(int64(l.Cost))
		}
		cs[i].Leased = l.Leased
	}
	set := &limitSet{Set: spec.NewSet(cs), limits: given}
	if b, ok := limits.Ban(); ok {
		if b.Max == 0 {
			b.Max = b.For
		}
		set.Ban = spec.NewBan(int64(b.After), int64(b.Within/time.Microsecond), int64(b.For/time.Microsecond), int64(b.Max/time.Microsecond))
	}
	if sets.n.Add(1) > maxSets {
		sets.m.Clear()
		sets.n.Store(1)
	}
	v, _ := sets.m.LoadOrStore(limits, set)
	return v.(*limitSet)
}

// checkRequest checks what a Limits cannot have checked already, the key
// and the cost, and returns the limits' compiled set.
func checkRequest(key string, cost int, limits *ratelimit.Limits) ([]ratelimit.Limit, *spec.Set, error) {
	var set *limitSet
	if limits != nil {
		set = compile(limits)
	}
	switch {
	case set == nil:
		return nil, nil, fmt.Errorf("%w: the limits are nil or zero; build them with ratelimit.NewLimits", ratelimit.ErrInvalid)
	case key == "":
		return nil, nil, fmt.Errorf("%w: key is empty", ratelimit.ErrInvalid)
	case len(key) > maxKeyLength:
		return nil, nil, fmt.Errorf("%w: key is %d bytes long; at most %d are allowed", ratelimit.ErrInvalid, len(key), maxKeyLength)
	case cost < 1:
		return nil, nil, fmt.Errorf("%w: cost must be at least 1, got %d", ratelimit.ErrInvalid, cost)
	case int64(cost) > set.MinCapacity:
		for i, c := range set.Limits {
			if int64(cost) > c.Capacity && c.Algorithm != spec.Concurrent && c.Cost == 0 {
				return nil, nil, fmt.Errorf("%w: cost %d exceeds the capacity %d of limits[%d] (%v), so the request could never pass", ratelimit.ErrInvalid, cost, c.Capacity, i, set.limits[i])
			}
		}
	}
	return set.limits, set.Set, nil
}

// checkEnd checks the input of End: the key, the limits and the usage
// (0 or more), and returns the limits' compiled set.
func checkEnd(key string, usage int, limits *ratelimit.Limits) ([]ratelimit.Limit, *spec.Set, error) {
	if usage < 0 {
		return nil, nil, fmt.Errorf("%w: usage must be 0 or more, got %d", ratelimit.ErrInvalid, usage)
	}
	return checkRequest(key, 1, limits) // a cost of 1 fits every valid limit
}

// maxInline is how many results a store builds on the stack before
// ratelimit.MakeDecision copies them: a Decision of up to maxInline limits
// costs at most the one allocation MakeDecision makes for several, and one
// of one limit none.
const maxInline = 4

// resultsFor returns a denial by each limit, with only its Limit filled
// in, in buf when it fits, for the caller to complete and pass to
// ratelimit.MakeDecision.
func resultsFor(limits []ratelimit.Limit, buf *[maxInline]ratelimit.Result) []ratelimit.Result {
	rs := buf[:0]
	for _, l := range limits {
		rs = append(rs, ratelimit.Result{Limit: l})
	}
	return rs
}

// calendarMiss reports whether err is a script's answer that Redis's
// clock lay outside the calendar periods it was given, and then makes the
// calendars of set name the periods around Redis's time, so that the
// caller may ask again.
func calendarMiss(err error, set *spec.Set) bool {
	if !set.Calendar {
		return false
	}
	now, ok := calendarTime(err)
	if ok {
		for i := range set.Limits {
			if c := set.Limits[i].Calendar; c != nil {
				c.Refresh(now)
			}
		}
	}
	return ok
}

// calendarTime returns Redis's time from a script's answer that its clock
// lay outside the calendar periods it was given.
func calendarTime(err error) (int64, bool) {
	msg := err.Error()
	i := strings.Index(msg, spec.CalendarMiss)
	if i < 0 {
		return 0, false
	}
	digits := msg[i+len(spec.CalendarMiss):]
	if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		digits = digits[:end]
	}
	now, err := strconv.ParseInt(digits, 10, 64)
	return now, err == nil
}

// keyHash is FNV-1a of key: it spreads keys over the shards of the
// deny cache and of the Fallback's backlog.
func keyHash(key string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return h
}
