package memory

import (
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// holdLife is spec.HoldLife in µs.
const holdLife = int64(spec.HoldLife / time.Microsecond)

// maxHolds bounds the live holds of one limit for one key, as decide.lua's
// max_holds does: past it, a request that would hold is denied as if the
// limit were full, told to retry when the soonest hold lapses (in a second
// at most). The settled marks are bounded as many again, as end.lua keeps
// the newest max_holds: a second settle of one forgotten would charge again.
const maxHolds = 4096

// holdState is a limit charged from usage's reservations for one key, and
// the marks settles leave. As on Redis, it lives beside the algorithm's
// state, which may expire while holds are live (spec.HoldsSuffix), and
// the marks apart from the holds (the ended set), so that a decision
// reads the holds alone.
type holdState struct {
	entries map[int64]hold  // the holds, live or lapsed
	marks   map[int64]int64 // settled ids: when each mark goes
	order   []markAt        // the marks in the order made, oldest from head
	head    int
}

type hold struct{ units, expires int64 }

type markAt struct{ id, expires int64 }

// held returns the units of the holds live at now, when the soonest of
// them lapses (0: none), and how many are live. With drop, it forgets
// the holds that lapsed. A nil h holds nothing.
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
		n++
		units += e.units
		if soonest == 0 || e.expires < soonest {
			soonest = e.expires
		}
	}
	return units, soonest, n
}

// settled reports whether id's mark is live at now, forgetting those gone.
func (h *holdState) settled(id, now int64) bool {
	for h.head < len(h.order) && h.order[h.head].expires <= now {
		h.drop()
	}
	exp, ok := h.marks[id]
	return ok && exp > now
}

// mark marks id settled until expires, keeping the newest maxHolds marks.
func (h *holdState) mark(id, expires int64) {
	if h.marks == nil {
		h.marks = make(map[int64]int64)
	}
	h.marks[id] = expires
	h.order = append(h.order, markAt{id, expires})
	for len(h.order)-h.head > maxHolds {
		h.drop()
	}
	if h.head > len(h.order)/2 { // the dropped half's room, back
		h.order = append(h.order[:0], h.order[h.head:]...)
		h.head = 0
	}
}

// drop forgets the oldest mark, unless a later one of its id replaced it.
func (h *holdState) drop() {
	m := h.order[h.head]
	h.order[h.head] = markAt{}
	h.head++
	if h.marks[m.id] == m.expires {
		delete(h.marks, m.id)
	}
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

func (s *memoryLimit) hold(id, units, expires int64) {
	s.holdState().entries[id] = hold{units, expires}
}

// holdState returns s's holds, made if need be.
func (s *memoryLimit) holdState() *holdState {
	if s.held == nil {
		s.held = &holdState{entries: make(map[int64]hold)}
	}
	return s.held
}

// settleHold settles hold id at now and reports whether its usage is to
// be charged: not when a mark, live and among the newest maxHolds, shows
// it settled already.
func (s *memoryLimit) settleHold(id, now int64) (charge bool) {
	h := s.holdState()
	if h.settled(id, now) {
		return false
	}
	delete(h.entries, id)
	h.mark(id, now+holdLife)
	return true
}

// renewHold keeps hold id, if live at now, until expires.
func (s *memoryLimit) renewHold(id, now, expires int64) bool {
	if s.held == nil {
		return false
	}
	e, ok := s.held.entries[id]
	if !ok || e.expires <= now {
		return false
	}
	s.held.entries[id] = hold{e.units, expires}
	return true
}
