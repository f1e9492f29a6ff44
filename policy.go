package ratelimit

import (
	"strconv"
	"strings"
)

// policy is a set of limits as a Limiter applies them: the limits, the
// start of the keys they count under, and what the headers say of them,
// worked out once.
type policy struct {
	limits   *Limits
	prefix   string     // namespace|scope|, the start of every key
	names    []string   // each limit's name as an RFC 9651 string, quoted
	header   []string   // the RateLimit-Policy value
	capacity [][]string // each limit's X-RateLimit-Limit value
}

// newPolicy checks limits and returns them as the policy of the route
// pattern (or, for "", of WithLimits) in namespace; or it says what is
// wrong with them.
func newPolicy(namespace, pattern string, limits []Limit) (*policy, string) {
	set, problem := newLimits(limits)
	if problem != "" {
		return nil, problem
	}
	n := len(limits)
	p := &policy{
		limits:   set,
		prefix:   namespace + "|" + scopeOf(pattern) + "|",
		names:    make([]string, n),
		capacity: make([][]string, n),
	}
	items := make([]string, n)
	used := make(map[string]bool, n)
	for i, l := range limits {
		name := policyName(l, limits)
		for k := 2; used[name]; k++ {
			name = policyName(l, limits) + "-" + strconv.Itoa(k)
		}
		used[name] = true
		p.names[i] = quoteString(name)
		p.capacity[i] = []string{strconv.Itoa(l.capacity())}
		items[i] = p.names[i] + ";q=" + strconv.FormatInt(sfInt(int64(l.capacity())), 10) + ";w=" + strconv.FormatInt(sfInt(seconds(policyWindow(l))), 10)
	}
	p.header = []string{strings.Join(items, ", ")}
	return p, ""
}

// withBan returns a copy of p whose limits carry ban, or p for the zero
// Ban or a nil p. ban has been checked.
func (p *policy) withBan(ban Ban) *policy {
	if p == nil || ban == (Ban{}) {
		return p
	}
	c := *p
	c.limits, _ = p.limits.WithBan(ban)
	return &c
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
