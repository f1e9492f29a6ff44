package topkeys

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSketchHoldsItsBound: a skewed stream (Zipf) of weighted units over
// three sketches, as three instances count; every key's true count lies
// in its range, each range is at most N/k wide, every key above N/k is
// held, and no sketch holds more than k keys.
func TestSketchHoldsItsBound(t *testing.T) {
	for _, tt := range []struct {
		k, keys, units int
		s              float64 // Zipf's exponent, above 1
	}{
		{k: 100, keys: 10_000, units: 200_000, s: 1.1},
		{k: 50, keys: 100_000, units: 200_000, s: 1.3},
		{k: 10, keys: 1_000, units: 50_000, s: 2},
		{k: 100, keys: 50, units: 10_000, s: 1.5}, // fewer keys than counters: exact
	} {
		t.Run(fmt.Sprintf("k=%d keys=%d s=%v", tt.k, tt.keys, tt.s), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tt.k), uint64(tt.keys)))
			zipf := rand.NewZipf(rng, tt.s, 1, uint64(tt.keys-1))
			sketches := []*Sketch{New(tt.k), New(tt.k), New(tt.k)}
			truth := map[string]int64{}
			var total int64
			for range tt.units {
				key := fmt.Sprint("key-", zipf.Uint64())
				n := int64(1 + rng.IntN(3)) // a request's cost
				sketches[rng.IntN(len(sketches))].Add(key, n)
				truth[key] += n
				total += n
			}
			var sum int64
			for _, s := range sketches {
				sum += s.Total()
				if len(s.byKey) > tt.k || len(s.mins) > tt.k {
					t.Fatalf("a sketch holds %d keys, more than its %d counters", len(s.byKey), tt.k)
				}
			}
			if sum != total {
				t.Fatalf("the sketches counted %d units, the stream had %d", sum, total)
			}
			bound := total / int64(tt.k)
			all := Top(len(truth), sketches...)
			seen := map[string]bool{}
			worst := int64(0)
			for _, c := range all {
				seen[c.Key] = true
				tr := truth[c.Key]
				if tr < c.Low || tr > c.High || c.N < c.Low || c.N > c.High {
					t.Errorf("%s: true %d, estimate %d, range [%d, %d]", c.Key, tr, c.N, c.Low, c.High)
				}
				if c.High-c.Low > bound {
					t.Errorf("%s: range [%d, %d] wider than N/k = %d", c.Key, c.Low, c.High, bound)
				}
				worst = max(worst, c.N-tr)
			}
			for key, n := range truth {
				if n > bound && !seen[key] {
					t.Errorf("%s: true count %d above N/k = %d, but no sketch holds it", key, n, bound)
				}
			}
			top := Top(20, sketches...)
			for i := 1; i < len(top); i++ {
				if top[i].N > top[i-1].N {
					t.Fatalf("Top is not most first: %+v", top)
				}
			}
			t.Logf("N=%d, N/k=%d: the most an estimate exceeded the truth by %d; top: %s %d (true %d)", total, bound, worst, top[0].Key, top[0].N, truth[top[0].Key])
		})
	}
}

// TestSketchSmall: a worked example of three counters.
func TestSketchSmall(t *testing.T) {
	s := New(3)
	for _, k := range []string{"a", "a", "b", "c", "a", "d"} {
		s.Add(k, 1)
	}
	// d took the least counter (b's or c's, 1), so it holds 2 with error 1.
	got := Top(3, s)
	if len(got) != 3 || got[0] != (Count{Key: "a", N: 3, Low: 3, High: 3}) || got[1].Key != "d" || got[1].N != 2 || got[1].Low != 1 || got[1].High != 2 {
		t.Errorf("got %+v", got)
	}
	s.Add("e", 0) // nothing
	if s.Total() != 6 {
		t.Errorf("Total %d, want 6", s.Total())
	}
	if got := Top(10); len(got) != 0 {
		t.Errorf("Top of no sketch: %+v", got)
	}
}

// BenchmarkAdd: a counted denial, on a sketch of 100 counters full of a
// skewed stream's keys.
func BenchmarkAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 1, 99_999)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", zipf.Uint64())
	}
	s := New(100)
	i := 0
	for b.Loop() {
		s.Add(keys[i%len(keys)], 1)
		i++
	}
}

// TestWindow: a window of three slots of a minute counts what came in the
// minute now falls in and the two before, and forgets the rest.
func TestWindow(t *testing.T) {
	at := func(minute int) time.Time { return time.Unix(int64(minute)*60+7, 0) }
	w := NewWindow(10, time.Minute, 3)
	w.Add(at(100), "old", 5) // out of the window by minute 103
	w.Add(at(101), "a", 1)
	w.Add(at(102), "a", 2)
	w.Add(at(103), "b", 4)
	w.Add(at(103), "a", 1)
	got := Top(10, w.Sketches(at(103))...)
	if len(got) != 2 || got[0] != (Count{Key: "a", N: 4, Low: 4, High: 4}) || got[1] != (Count{Key: "b", N: 4, Low: 4, High: 4}) {
		t.Errorf("at minute 103: %+v, want a 4 and b 4", got)
	}
	if got := Top(10, w.Sketches(at(105))...); len(got) != 2 || got[0].Key != "b" || got[1] != (Count{Key: "a", N: 1, Low: 1, High: 1}) {
		t.Errorf("at minute 105: %+v, want b 4 and a 1 (of minute 103)", got)
	}
	if got := Top(10, w.Sketches(at(99))...); len(got) != 0 {
		t.Errorf("before anything was counted: %+v", got)
	}
	w.Add(at(106), "c", 1) // takes the slot minute 103 held
	if got := Top(10, w.Sketches(at(106))...); len(got) != 1 || got[0].Key != "c" {
		t.Errorf("at minute 106: %+v, want c alone", got)
	}
}

// TestMergeOfSummaries: three instances each summarize their sketches
// (a slot each) cut to their 100 keys counted most, and the summaries
// merge: every key of the merged top 20 has its true count within its
// range; the range is at most N/k wide, N the units of every sketch;
// and the top 10 are the 10 keys counted most in truth.
func TestMergeOfSummaries(t *testing.T) {
	const k, keys, units, instances = 256, 20_000, 300_000, 3
	rng := rand.New(rand.NewPCG(3, 5))
	zipf := rand.NewZipf(rng, 1.2, 1, keys-1)
	sketches := make([][]*Sketch, instances)
	for i := range sketches {
		sketches[i] = []*Sketch{New(k), New(k), New(k)}
	}
	truth := map[string]int64{}
	for range units {
		key := fmt.Sprint("key-", zipf.Uint64())
		sketches[rng.IntN(instances)][rng.IntN(3)].Add(key, 1)
		truth[key]++
	}
	summaries := make([]Summary, instances)
	var total int64
	for i, s := range sketches {
		summaries[i] = Summarize(100, s...)
		if len(summaries[i].Counts) != 100 {
			t.Fatalf("a summary holds %d keys, want 100", len(summaries[i].Counts))
		}
		total += summaries[i].Total
	}
	if total != units {
		t.Fatalf("the summaries counted %d units, want %d", total, units)
	}
	top := Merge(20, summaries...)
	for _, c := range top {
		if tc := truth[c.Key]; tc < c.Low || tc > c.High {
			t.Errorf("%s: true count %d outside [%d, %d]", c.Key, tc, c.Low, c.High)
		}
		if c.High-c.Low > total/k {
			t.Errorf("%s: range [%d, %d] wider than N/k = %d", c.Key, c.Low, c.High, total/k)
		}
	}
	type kv struct {
		k string
		n int64
	}
	var byTruth []kv
	for key, n := range truth {
		byTruth = append(byTruth, kv{key, n})
	}
	slices.SortFunc(byTruth, func(a, b kv) int { return cmp.Compare(b.n, a.n) })
	for i := range 10 {
		if top[i].Key != byTruth[i].k {
			t.Errorf("the merged top %d is %s (%d), the true one %s (%d)", i+1, top[i].Key, top[i].N, byTruth[i].k, byTruth[i].n)
		}
	}
	t.Logf("N=%d, N/k=%d; first: %+v (true %d)", total, total/k, top[0], truth[top[0].Key])
}
