package store

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// compiled is what a store needs of one valid limit, in integers: the
// Redis script's parameters and the in-process algorithms' alike.
type compiled struct {
	valid     bool // the limit passed Validate; nothing else is set otherwise
	algorithm ratelimit.Algorithm
	scope     string
	quota     int64
	window    int64 // µs
	windowMS  int64

	width, slots int64 // sliding window: slot width in µs, slots per window

	capacity int64 // Limit.Capacity: the most one request may cost

	unit, rate, units int64 // token bucket fixed point: units = a full bucket; see Limit.TokenUnits

	// suffix ends the key of the limit's state; two limits that would
	// share state have the same suffix. ":" + code + window in ms, then
	// "/" + what else the state depends on, then ":" + scope if any.
	suffix string
	// args are the limit's four ARGV entries for decide.lua.
	args [4]any
}

func compile(l ratelimit.Limit) *compiled {
	if l.Validate() != nil {
		return &compiled{} // invalid: CheckRequest reports why
	}
	l = l.WithDefaults()
	c := &compiled{
		valid:     true,
		algorithm: l.Algorithm,
		scope:     l.Scope,
		quota:     int64(l.Quota),
		window:    int64(l.Window / time.Microsecond),
		windowMS:  int64(l.Window / time.Millisecond),
		capacity:  int64(l.Capacity()),
	}
	switch l.Algorithm {
	case ratelimit.FixedWindow:
		c.encode("f", "", c.quota, c.windowMS, 0)
	case ratelimit.SlidingLog:
		c.encode("l", "", c.quota, c.window, c.windowMS)
	case ratelimit.TokenBucket:
		c.unit, c.rate, c.units, _ = l.TokenUnits()
		c.encode("t", strconv.FormatInt(c.quota, 10), c.units, c.unit, c.rate)
	default:
		c.width = int64(l.Precision / time.Microsecond)
		c.slots = c.window / c.width
		c.encode("s", strconv.FormatInt(c.slots, 10), c.quota, c.width, c.slots)
	}
	return c
}

func (c *compiled) encode(code, extra string, a, b, d int64) {
	c.suffix = ":" + code + strconv.FormatInt(c.windowMS, 10)
	if extra != "" {
		c.suffix += "/" + extra
	}
	if c.scope != "" {
		c.suffix += ":" + c.scope
	}
	c.args = [4]any{code, strconv.FormatInt(a, 10), strconv.FormatInt(b, 10), strconv.FormatInt(d, 10)}
}

// maxCachedLimits bounds a limitCache; past it, limits are compiled per
// call.
const maxCachedLimits = 1024

// limitCache compiles each limit once. Reads take no lock: the map is
// replaced, never changed. The zero value is ready to use.
type limitCache struct {
	last atomic.Pointer[memo] // the last limit looked up: most callers repeat theirs
	m    atomic.Pointer[map[ratelimit.Limit]*compiled]
	mu   sync.Mutex // serializes writers
}

type memo struct {
	l ratelimit.Limit
	c *compiled
}

func (c *limitCache) get(l ratelimit.Limit) *compiled {
	if m := c.last.Load(); m != nil && m.l == l {
		return m.c
	}
	if m := c.m.Load(); m != nil {
		if p, ok := (*m)[l]; ok {
			c.last.Store(&memo{l, p})
			return p
		}
	}
	p := compile(l)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxCachedLimits {
		return p
	}
	m := make(map[ratelimit.Limit]*compiled, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[l] = p
	c.m.Store(&m)
	return p
}

func lenOf(m *map[ratelimit.Limit]*compiled) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// check is ratelimit.CheckRequest for the stores' hot path: it appends
// each limit's compiled form to dst, and falls back to CheckRequest, for
// its error, only when something is wrong.
func (c *limitCache) check(key string, cost int, limits []ratelimit.Limit, dst []*compiled) ([]*compiled, error) {
	if key == "" || len(key) > ratelimit.MaxKeyLength || cost < 1 || len(limits) == 0 {
		return dst, ratelimit.CheckRequest(key, cost, limits)
	}
	for i, l := range limits {
		p := c.get(l)
		if !p.valid || int64(cost) > p.capacity {
			return dst, ratelimit.CheckRequest(key, cost, limits)
		}
		for _, q := range dst[len(dst)-i:] {
			if q.suffix == p.suffix {
				return dst, ratelimit.CheckRequest(key, cost, limits)
			}
		}
		dst = append(dst, p)
	}
	return dst, nil
}
