package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// policy is a set of limits as a Limiter applies them: copies scoped to
// the Limiter's namespace and route for the store, the limits as given
// for results, and everything the headers need, computed once.
type policy struct {
	given    []Limit      // as configured
	scoped   []Limit      // with Scope set
	names    []string     // each limit's name as an RFC 9651 string, quoted
	header   []string     // the RateLimit-Policy value
	capacity [][]string   // each limit's X-RateLimit-Limit value
	current  []valueCache // each limit's RateLimit values
}

func newPolicy(scope string, limits []Limit) *policy {
	n := len(limits)
	p := &policy{
		given:    limits,
		scoped:   make([]Limit, n),
		names:    make([]string, n),
		capacity: make([][]string, n),
		current:  make([]valueCache, n),
	}
	items := make([]string, n)
	used := make(map[string]bool, n)
	for i, l := range limits {
		p.scoped[i] = l
		p.scoped[i].Scope = scope
		name := policyName(l, limits)
		for k := 2; used[name]; k++ {
			name = policyName(l, limits) + "-" + strconv.Itoa(k)
		}
		used[name] = true
		p.names[i] = quoteString(name)
		p.capacity[i] = []string{strconv.Itoa(l.Capacity())}
		items[i] = p.names[i] + ";q=" + strconv.FormatInt(sfInt(int64(l.Capacity())), 10) + ";w=" + strconv.FormatInt(sfInt(seconds(policyWindow(l))), 10)
	}
	p.header = []string{strings.Join(items, ", ")}
	return p
}

// maxScope is the longest Limit.Scope; see scopeOf.
const maxScope = 128

// scopeOf returns the Scope of a Limiter's limits: its namespace and, for
// a route's own limits, the route pattern, escaped so that two patterns
// never share a scope, or hashed when long.
func scopeOf(namespace, pattern string) string {
	var b strings.Builder
	b.WriteString(namespace)
	b.WriteByte('|')
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c < 0x21 || c > 0x7e || c == '%' || c == '{' || c == '}' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	if b.Len() > maxScope {
		sum := sha256.Sum256([]byte(pattern))
		return namespace + "|#" + hex.EncodeToString(sum[:16])
	}
	return b.String()
}

// sfInt clamps n to the largest Integer of RFC 9651, which has 15 digits.
func sfInt(n int64) int64 { return min(n, 999_999_999_999_999) }

// valueCache keeps the RateLimit header values of one limit, by remaining
// and reset, so that the warm path builds no string. It holds at most
// maxCachedValues; past that, values are built per request.
type valueCache struct {
	mu sync.RWMutex
	m  map[uint64][]string
}

const maxCachedValues = 4096

func (c *valueCache) get(name string, remaining, reset int64) []string {
	cacheable := remaining >= 0 && remaining < 1<<32 && reset >= 0 && reset < 1<<31
	k := uint64(remaining)<<31 | uint64(reset)
	if cacheable {
		c.mu.RLock()
		v, ok := c.m[k]
		c.mu.RUnlock()
		if ok {
			return v
		}
	}
	v := []string{name + ";r=" + strconv.FormatInt(sfInt(remaining), 10) + ";t=" + strconv.FormatInt(sfInt(reset), 10)}
	if cacheable {
		c.mu.Lock()
		if c.m == nil {
			c.m = make(map[uint64][]string)
		}
		if len(c.m) < maxCachedValues {
			c.m[k] = v
		}
		c.mu.Unlock()
	}
	return v
}

// intValue returns n as a header value, shared with earlier responses
// when it is one of the last few thousand values seen.
func intValue(n int64) []string {
	if n >= 0 && n < int64(len(smallInts)) {
		return smallInts[n]
	}
	return intValues.get(n)
}

// smallInts holds header values for 0 to len-1.
var smallInts = func() (v [1024][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

var intValues intCache

// intCache keeps header values of integers; it starts afresh when it
// holds maxCachedValues. The zero value is ready to use.
type intCache struct {
	mu sync.RWMutex
	m  map[int64][]string
}

func (c *intCache) get(n int64) []string {
	c.mu.RLock()
	v, ok := c.m[n]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = []string{strconv.FormatInt(n, 10)}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedValues {
		c.m = make(map[int64][]string)
	}
	c.m[n] = v
	c.mu.Unlock()
	return v
}
