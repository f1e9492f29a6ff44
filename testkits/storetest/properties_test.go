package storetest

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// readings is a real (unpinned) Clock whose readings are given in turn.
type readings []time.Time

func (r *readings) Now() time.Time          { t := (*r)[0]; *r = (*r)[1:]; return t }
func (r *readings) Advance(d time.Duration) {}
func (r *readings) Pinned() bool            { return false }

// TestReplayAcrossAnEdge: a store that decided just before or just after
// a window's end, between the two readings of a real clock around its
// call, answers as the Model at one end of that span, and replay keeps
// the Model's state of the answer that matched.
func TestReplayAcrossAnEdge(t *testing.T) {
	l := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Second}
	const key = "k"
	start := time.UnixMicro(1_000_000)
	edge := start.Add(l.Window)
	for _, decided := range []time.Time{edge.Add(-500 * time.Microsecond), edge.Add(500 * time.Microsecond)} {
		var store Model // the store: a Model at the instant it decided
		store.Allow(start.UnixMicro(), key, 1, l)
		c := &readings{edge.Add(-time.Millisecond), edge.Add(time.Millisecond)}
		r := replay{t: t, c: c, m: new(Model)}
		r.m.Allow(start.UnixMicro(), key, 1, l)

		got, _, now := r.step("across the edge",
			func() ratelimit.Decision { return store.Allow(decided.UnixMicro(), key, 1, l) },
			func(m *Model, now int64) ratelimit.Decision { return m.Allow(now, key, 1, l) })
		if want := decided.After(edge); got.Allowed != want {
			t.Fatalf("decided at the edge %+v: Allowed %v, want %v", decided.Sub(edge), got.Allowed, want)
		}
		if reading := map[bool]time.Time{true: edge.Add(time.Millisecond), false: edge.Add(-time.Millisecond)}[got.Allowed]; now != reading.UnixMicro() {
			t.Fatalf("decided at the edge %+v: the Model answered at %d, want %d", decided.Sub(edge), now, reading.UnixMicro())
		}
		// The Model's state is the store's: the next request, long after
		// either reading, gets the same answer from both, its durations
		// within the span of the readings (the Model's window started at
		// a reading, the store's when it decided) and Redis's rounding to
		// the millisecond.
		later := edge.Add(l.Window / 2)
		if got, want := store.Allow(later.UnixMicro(), key, 1, l), r.m.Allow(later.UnixMicro(), key, 1, l); !sameDecision(got, want, 3*time.Millisecond) {
			t.Fatalf("decided at the edge %+v: next request: store %+v, Model %+v", decided.Sub(edge), got, want)
		}
	}
}
