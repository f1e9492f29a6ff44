package memory

import (
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// holdLife is spec.HoldLife in µs.
const holdLife = int64(spec.HoldLife / time.Microsecond)

// maxHolds bounds the live holds of one limit for one key, as decide.lua's
// max_holds does: past it, a request that would hold is denied by that
// limit as if it were full (nothing remaining), told to retry when the
// soonest hold lapses, in a second at most. The settled marks are bounded
// as many again: past them, a settle leaves no mark, so a second settle
// of it would charge again.
const maxHolds = 4096

// holdState is a limit charged from usage's reservations for one key:
// each admitted request's hold, by id, until it is settled or lapses,
// and the mark a settle leaves (units 0). It lives beside the limit's
// algorithm state, not in it, as Redis keeps it under a key of its own
// (spec.HoldsSuffix): the state may expire and start afresh while holds
// are live.
type holdState struct {
	entries map[int64]hold
}

type hold struct {
	units   int64 // 0: a settled mark
	expires int64
}

// held returns the units of the holds live at now, when the soonest of
// them lapses (0: none), and how many are live. With drop, it forgets
// the entries, holds and marks, that expired. A nil h holds nothing.
func (h *holdState) held(now int64, drop bool) (units, soonest int64, n int) {
	if h == nil {
		return 0, 0, 0
	}
	for id, e := range h.entries {
		if e.expires <= now {
			if drop {
				delete(h.entries, id)
			}
			continue
		}
		if e.units > 0 {
			n++
			units += e.units
			if soonest == 0 || e.expires < soonest {
				soonest = e.expires
			}
		}
	}
	return units, soonest, n
}

// check answers a's check of a request of cost under the usage limit c
// whose holds are h: the cost fits if it does with what is held, and the
// units remaining are those left past what is held. A denial that holds
// had a part in (capped) is told to retry when the soonest hold lapses,
// in a second at most, or sooner when the algorithm says the whole fits
// then; never before the cost alone would fit. With peek, a is peeked at
// rather than checked, and h is left as it is; else its expired entries
// are dropped.
func (h *holdState) check(a algorithmState, c *compiled, now, cost int64, peek bool) (ok bool, remaining, retry int64, capped bool) {
	fits := func(cost int64) (bool, int64, int64) {
		if peek {
			ok, remaining, _, retry := a.peek(c, now, cost)
			return ok, remaining, retry
		}
		return a.check(c, now, cost)
	}
	units, soonest, n := h.held(now, !peek)
	full := n >= maxHolds && cost > 0
	if units == 0 {
		ok, remaining, retry = fits(cost)
		return ok, remaining, retry, false
	}
	whole := cost+units <= c.Capacity // else it can never fit: no check (a log's would read past its entries)
	if whole {
		ok, remaining, retry = fits(cost + units)
	} else {
		_, remaining, _ = fits(cost) // what is left is the same whatever the cost
	}
	remaining -= units
	if ok && !full {
		return true, remaining, 0, false
	}
	r := min(1_000_000, soonest-now)
	if full {
		remaining = 0
	} else if whole && retry > 0 {
		r = min(r, retry)
	}
	if alone, _, after := fits(cost); !alone {
		r = max(r, after) // no hold ending lets the cost alone in sooner
	}
	return false, max(remaining, 0), max(r, 1), true
}

// hold reserves units under id until expires.
func (s *memoryLimit) hold(id, units, expires int64) {
	if s.held == nil {
		s.held = &holdState{entries: make(map[int64]hold)}
	}
	s.held.entries[id] = hold{units, expires}
}

// settleHold settles hold id at now, and reports whether its usage is to be
// charged: unless a settle of it has already been. It leaves a mark that
// a second settle finds, if there is room for it.
func (s *memoryLimit) settleHold(id, now int64) (charge bool) {
	if s.held == nil {
		s.held = &holdState{entries: make(map[int64]hold)}
	}
	e, ok := s.held.entries[id]
	if ok && e.expires > now && e.units == 0 {
		return false // settled already
	}
	if !ok && len(s.held.entries) >= 2*maxHolds {
		s.held.held(now, true) // room, if some expired
	}
	if ok || len(s.held.entries) < 2*maxHolds {
		s.held.entries[id] = hold{0, now + holdLife}
	}
	return true
}

// renewHold keeps hold id, if live at now, until expires; it revives no hold
// that lapsed or was settled.
func (s *memoryLimit) renewHold(id, now, expires int64) bool {
	if s.held == nil {
		return false
	}
	e, ok := s.held.entries[id]
	if !ok || e.units == 0 || e.expires <= now {
		return false
	}
	s.held.entries[id] = hold{e.units, expires}
	return true
}
