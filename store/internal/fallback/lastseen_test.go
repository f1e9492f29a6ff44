package fallback

import (
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// TestLastSeenIsBounded puts many more keys than lastSeen holds: it keeps
// at most its bound, and still knows the keys put last.
func TestLastSeenIsBounded(t *testing.T) {
	const maxKeys = 6400 // one limit per key: as many states
	s := newLastSeen(maxKeys, 50_000)
	c := &spec.Limit{Suffix: "f60"}
	res := []ratelimit.Result{{Remaining: 7, ResetAfter: time.Hour}}
	n := 100 * maxKeys
	for i := range n {
		s.put("k"+strconv.Itoa(i), []spec.Limit{*c}, res, 1)
		if got := s.len(); got > maxKeys {
			t.Fatalf("after %d keys, %d are kept, want at most %d", i+1, got, maxKeys)
		}
	}
	// Each shard keeps at least the last maxKeys/64 of its keys; the last
	// maxKeys/64 keys of all certainly belong to them.
	for i := n - maxKeys/64; i < n; i++ {
		if remaining, ok := s.get("k"+strconv.Itoa(i), c, 2); !ok || remaining != 7 {
			t.Fatalf("key %d of %d: got %d, %v; want 7, true", i, n, remaining, ok)
		}
	}
	if _, ok := s.get("k0", c, 2); ok {
		t.Error("the first key is still known")
	}
}

// TestLastSeenKeepsEachLimit records a key under two limits: each keeps
// its own answer, concurrent answers keep the lowest remaining, a later
// one replaces it, a replenished limit and a forgotten one are not known.
func TestLastSeenKeepsEachLimit(t *testing.T) {
	const skew = 50_000
	s := newLastSeen(100_000, skew)
	minute, hour := &spec.Limit{Suffix: ":f60000"}, &spec.Limit{Suffix: ":f3600000"}
	cs := []spec.Limit{*minute, *hour}
	s.put("k", cs, []ratelimit.Result{{Remaining: 5, ResetAfter: time.Minute}, {Remaining: 50, ResetAfter: time.Hour}}, 1000)
	s.put("k", cs, []ratelimit.Result{{Remaining: 7, ResetAfter: time.Minute}, {Remaining: 40, ResetAfter: time.Hour}}, 2000)
	check := func(when string, c *spec.Limit, now, want int64, wantOK bool) {
		t.Helper()
		if got, ok := s.get("k", c, now); got != want || ok != wantOK {
			t.Errorf("%s: got %d, %v; want %d, %v", when, got, ok, want, wantOK)
		}
	}
	check("minute, concurrent answers", minute, 3000, 5, true)
	check("hour, concurrent answers", hour, 3000, 40, true)
	if _, ok := s.get("other", minute, 3000); ok {
		t.Error("a key never put is known")
	}
	const later = 2000 + skew // more than skew after the last answer
	s.put("k", cs[:1], []ratelimit.Result{{Remaining: 9, ResetAfter: time.Minute}}, later)
	check("minute, a later answer", minute, later, 9, true)
	check("minute, held until two budgets past its reset", minute, later+2*skew+60_000_000-1, 9, true)
	check("minute, replenished", minute, later+2*skew+60_000_000, 0, false)
	s.forget("k", cs[1:])
	check("hour, forgotten", hour, 3000, 0, false)
	check("minute, not forgotten", minute, 3000, 9, true)
}

// BenchmarkLastSeenPut records answers for keys seen before, and for new
// keys once lastSeen is full: the Fallback's cost per decision on Redis.
func BenchmarkLastSeenPut(b *testing.B) {
	for _, bench := range []struct {
		name string
		keys int
	}{{"known-keys", 10_000}, {"new-keys", 1_000_000}} {
		b.Run(bench.name, func(b *testing.B) {
			s := newLastSeen(100_000, 50_000)
			cs := []spec.Limit{{Suffix: "f60"}}
			res := []ratelimit.Result{{Remaining: 5, ResetAfter: time.Second}}
			keys := make([]string, bench.keys)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.put(keys[i%len(keys)], cs, res, int64(i))
				i++
			}
		})
	}
}

// len returns how many states are remembered.
func (s *lastSeen) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.cur) + len(sh.old)
		sh.mu.Unlock()
	}
	return n
}
