// Package limitset is what every store does first, and alike: it checks a
// request's key, cost and limits, compiles each [ratelimit.Limits] once
// into the integers the stores use (see package spec), and shapes a
// decision's results.
package limitset

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// MaxKeyLength is the longest key a store accepts, in bytes.
const MaxKeyLength = 1024

type compiledSet struct {
	set    *spec.Set
	limits []ratelimit.Limit
}

// sets holds every ratelimit.Limits compiled, so that each is compiled
// once: a service has a few (a Limiter's WithLimitsFunc keeps at most
// 1,024). Past maxSets, it starts afresh.
var sets struct {
	m sync.Map // *ratelimit.Limits to *compiledSet
	n atomic.Int64
}

const maxSets = 4096

// Compile returns the integers of limits, nil for a nil or zero one.
func Compile(limits *ratelimit.Limits) *spec.Set {
	if c := compile(limits); c != nil {
		return c.set
	}
	return nil
}

func compile(limits *ratelimit.Limits) *compiledSet {
	if v, ok := sets.m.Load(limits); ok {
		return v.(*compiledSet)
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
			cs[i] = spec.Compile(a, l.Quota, l.Window, l.Precision, l.Burst)
		}
		if l.Usage {
			cs[i].ChargedFromUsage()
		}
		if l.Cost != 0 {
			cs[i].FixedCost(int64(l.Cost))
		}
		cs[i].Leased = l.Leased
	}
	c := &compiledSet{set: spec.NewSet(cs), limits: given}
	if b, ok := limits.Ban(); ok {
		if b.Max == 0 {
			b.Max = b.For
		}
		c.set.Ban = spec.NewBan(int64(b.After), int64(b.Within/time.Microsecond), int64(b.For/time.Microsecond), int64(b.Max/time.Microsecond))
	}
	if sets.n.Add(1) > maxSets {
		sets.m.Clear()
		sets.n.Store(1)
	}
	v, _ := sets.m.LoadOrStore(limits, c)
	return v.(*compiledSet)
}

// Check checks what a Limits cannot have checked already, the key and
// the cost, and returns the limits and their integers.
func Check(key string, cost int, limits *ratelimit.Limits) ([]ratelimit.Limit, *spec.Set, error) {
	var c *compiledSet
	if limits != nil {
		c = compile(limits)
	}
	switch {
	case c == nil:
		return nil, nil, fmt.Errorf("%w: the limits are nil or zero; build them with ratelimit.NewLimits", ratelimit.ErrInvalid)
	case key == "":
		return nil, nil, fmt.Errorf("%w: key is empty", ratelimit.ErrInvalid)
	case len(key) > MaxKeyLength:
		return nil, nil, fmt.Errorf("%w: key is %d bytes long; at most %d are allowed", ratelimit.ErrInvalid, len(key), MaxKeyLength)
	case cost < 1:
		return nil, nil, fmt.Errorf("%w: cost must be at least 1, got %d", ratelimit.ErrInvalid, cost)
	case int64(cost) > c.set.MinCapacity:
		for i, l := range c.set.Limits {
			if int64(cost) > l.Capacity && l.Algorithm != spec.Concurrent && l.Cost == 0 {
				return nil, nil, fmt.Errorf("%w: cost %d exceeds the capacity %d of limits[%d] (%v), so the request could never pass", ratelimit.ErrInvalid, cost, l.Capacity, i, c.limits[i])
			}
		}
	}
	return c.limits, c.set, nil
}

// CheckEnd is Check for a Store's End, whose usage is 0 or more.
func CheckEnd(key string, usage int, limits *ratelimit.Limits) ([]ratelimit.Limit, *spec.Set, error) {
	if usage < 0 {
		return nil, nil, fmt.Errorf("%w: usage must be 0 or more, got %d", ratelimit.ErrInvalid, usage)
	}
	return Check(key, 1, limits) // a cost of 1 fits every valid limit
}

// MaxInline is how many results a store builds on the stack before
// ratelimit.MakeDecision copies them: a Decision of up to MaxInline limits
// costs at most MakeDecision's one allocation, and one of one limit none.
const MaxInline = 4

// Results returns a denial by each limit, with only its Limit set, in buf
// when it fits, for the caller to complete for ratelimit.MakeDecision.
func Results(limits []ratelimit.Limit, buf *[MaxInline]ratelimit.Result) []ratelimit.Result {
	rs := buf[:0]
	for _, l := range limits {
		rs = append(rs, ratelimit.Result{Limit: l})
	}
	return rs
}
