package ratelimit

import (
	"fmt"
	"sync"
)

// Limits per request (WithLimitsFunc): each distinct set a limits
// function returns is checked and compiled once, with what the headers say
// of it, and kept in a bounded memo; an invalid set is remembered as
// invalid, so it is not checked again either.

// maxSetLimits is the most limits a set from WithLimitsFunc may hold.
const maxSetLimits = 8

// maxSets bounds the memo of sets; when it is full it starts afresh.
const maxSets = 1024

// setKey names a set of limits under one route's scope.
type setKey struct {
	pattern string
	n       int
	limits  [maxSetLimits]Limit
}

// checkedSet is a set's policy, or what is wrong with it.
type checkedSet struct {
	p       *policy
	problem string
}

// setMemo keeps the sets WithLimitsFunc returned. The zero value is ready
// to use.
type setMemo struct {
	mu   sync.RWMutex
	sets map[setKey]checkedSet
}

// policy returns the policy of limits under the route pattern ("" for
// none) in namespace, with ban (zero: none) and the quota unit ("":
// none), checking and compiling them the first time.
func (m *setMemo) policy(namespace, pattern string, limits []Limit, ban Ban, unit string) (*policy, error) {
	if len(limits) > maxSetLimits {
		return nil, fmt.Errorf("%w: WithLimitsFunc returned %d limits; at most %d are allowed", ErrInvalid, len(limits), maxSetLimits)
	}
	k := setKey{pattern: pattern, n: len(limits)}
	copy(k.limits[:], limits)
	m.mu.RLock()
	c, ok := m.sets[k]
	m.mu.RUnlock()
	if !ok {
		c.p, c.problem = newPolicy(namespace, pattern, limits)
		c.p = c.p.withBan(ban).withUnit(unit)
		m.mu.Lock()
		if m.sets == nil || len(m.sets) >= maxSets {
			m.sets = make(map[setKey]checkedSet)
		}
		m.sets[k] = c
		m.mu.Unlock()
	}
	if c.problem != "" {
		return nil, fmt.Errorf("%w: WithLimitsFunc returned invalid limits: %s", ErrInvalid, c.problem)
	}
	return c.p, nil
}
