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
	items    []string   // each limit's RateLimit-Policy item, without pk
	header   []string   // the RateLimit-Policy value: the items, joined
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
		set.limits[i].Name = name // results, and so Deny and Decisions, name the policy as the headers do
		p.names[i] = quoteString(name)
		p.capacity[i] = []string{strconv.Itoa(l.capacity())}
		p.items[i] = policyItem(p.names[i], l, "")
	}
	p.header = []string{strings.Join(p.items, ", ")}
	return p, ""
}

// policyItem is the RateLimit-Policy item of l, named name (quoted):
// its quota, its quota unit unless unit is "", and its window.
func policyItem(name string, l Limit, unit string) string {
	item := name + ";q=" + strconv.FormatInt(sfInt(int64(l.capacity())), 10)
	if unit != "" {
		item += ";qu=" + quoteString(unit)
	}
	return item + ";w=" + strconv.FormatInt(sfInt(seconds(policyWindow(l))), 10)
}

// withUnit returns a copy of p whose RateLimit-Policy items carry the
// quota unit (see WithQuotaUnit), or p for "" or a nil p. unit has been
// checked.
func (p *policy) withUnit(unit string) *policy {
	if p == nil || unit == "" {
		return p
	}
	c := *p
	c.items = make([]string, len(p.items))
	for i := range c.items {
		c.items[i] = policyItem(p.names[i], p.limits.limits[i], unit)
	}
	c.header = []string{strings.Join(c.items, ", ")}
	return &c
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
