// Package topkeys counts the keys seen most in a stream of bounded memory:
// the Space-Saving sketch (Metwally, Agrawal and El Abbadi, 2005), which
// keeps k counters whatever the number of keys, and sums of sketches, so
// that the counts of several instances, or of several minutes, merge.
//
// The bound: over a stream of N units, a sketch of k counters holds every
// key whose true count is above N/k, and overcounts none by more than N/k.
// Merged sketches keep it, N being the units of all of them: each key's
// true count lies within [Count.Low, Count.High], at most N/k apart.
package topkeys

import (
	"cmp"
	"container/heap"
	"maps"
	"math"
	"slices"
	"time"
)

// A Count is a key's estimated count and the range its true count lies in.
type Count struct {
	Key  string `json:"k"`
	N    int64  `json:"n"` // the estimate: the sum of the counters holding the key
	Low  int64  `json:"l"` // Low and High bound the true count
	High int64  `json:"h"`
}

// A Sketch counts a stream's keys in k counters. It is not safe for
// concurrent use; the zero Sketch is not usable: build one with New.
type Sketch struct {
	k     int
	total int64
	byKey map[string]*counter
	mins  minHeap // the counters, least first
}

type counter struct {
	key   string
	n     int64
	err   int64 // what it held before it took this key: the most it overcounts
	index int   // in the heap
}

// New returns a sketch of k counters, at least 1.
func New(k int) *Sketch {
	k = max(k, 1)
	return &Sketch{k: k, byKey: make(map[string]*counter, k)}
}

// Add counts n units (at least 1) of key. A key not held takes a free
// counter, or else the least one, whose count becomes its error.
func (s *Sketch) Add(key string, n int64) {
	if n < 1 {
		return
	}
	s.total += n
	if c := s.byKey[key]; c != nil {
		c.n += n
		heap.Fix(&s.mins, c.index)
		return
	}
	if len(s.mins) < s.k {
		c := &counter{key: key, n: n}
		s.byKey[key] = c
		heap.Push(&s.mins, c)
		return
	}
	c := s.mins[0]
	delete(s.byKey, c.key)
	c.key, c.err, c.n = key, c.n, c.n+n
	s.byKey[key] = c
	heap.Fix(&s.mins, 0)
}

// Total returns the units counted.
func (s *Sketch) Total() int64 { return s.total }

// floor is the most a key the sketch does not hold may have had.
func (s *Sketch) floor() int64 {
	if len(s.mins) < s.k {
		return 0
	}
	return s.mins[0].n
}

// Top is Merge of the sketches' summaries: the n keys counted most, with their ranges.
func Top(n int, sketches ...*Sketch) []Count {
	return Merge(n, Summarize(-1, sketches...))
}

// A Summary is what some sketches counted, cut to the keys counted most:
// what an instance tells the others. Its counts sum those of the
// sketches; a key it leaves out was counted at most Rest times.
type Summary struct {
	Counts []Count `json:"c"`
	Rest   int64   `json:"r"`
	Total  int64   `json:"t"`
}

// Summarize returns the summary of sketches with their m keys counted
// most (every key they hold when m is negative): the merge of each
// sketch's own summary, whose Rest is its floor.
func Summarize(m int, sketches ...*Sketch) Summary {
	var sum Summary
	own := make([]Summary, len(sketches))
	for i, s := range sketches {
		own[i] = Summary{Counts: make([]Count, 0, len(s.byKey)), Rest: s.floor(), Total: s.total}
		for key, c := range s.byKey {
			own[i].Counts = append(own[i].Counts, Count{Key: key, N: c.n, Low: c.n - c.err, High: c.n})
		}
		sum.Rest += own[i].Rest
		sum.Total += s.total
	}
	counts := Merge(math.MaxInt, own...)
	sum.Counts = counts
	if m >= 0 && m < len(counts) {
		for _, c := range counts[m:] {
			sum.Rest = max(sum.Rest, c.High)
		}
		sum.Counts = counts[:m]
	}
	return sum
}

// Merge returns the n keys of the sum of summaries counted most, most
// first (by estimate, then key), each with the range of its true count:
// a summary that leaves a key out adds nothing to its estimate or its
// least, and its Rest to its most.
func Merge(n int, summaries ...Summary) []Count {
	all := make(map[string]Count)
	var rests int64
	for _, s := range summaries {
		rests += s.Rest
	}
	for _, s := range summaries {
		for _, c := range s.Counts {
			e, ok := all[c.Key]
			if !ok {
				e = Count{Key: c.Key, High: rests}
			}
			e.N += c.N
			e.Low += c.Low
			e.High += c.High - s.Rest
			all[c.Key] = e
		}
	}
	counts := slices.SortedFunc(maps.Values(all), func(a, b Count) int {
		return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Key, b.Key))
	})
	return counts[:min(n, len(counts))]
}

type minHeap []*counter

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].n < h[j].n }
func (h minHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *minHeap) Push(x any) {
	c := x.(*counter)
	c.index = len(*h)
	*h = append(*h, c)
}
func (h *minHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// A Window counts keys over the last n slots of a width: a ring of
// sketches, each of k counters, one per slot, a slot's sketch started
// afresh when its time comes round again. Time is a parameter. It is not
// safe for concurrent use; build one with NewWindow.
type Window struct {
	k     int
	width int64 // ns
	ring  []slot
}

type slot struct {
	index  int64 // time / width of what it counts; -1 none
	sketch *Sketch
}

// NewWindow returns a window of n slots (at least 1) of width (at least
// 1ns), each counted in k counters: for example 60 slots of a minute, an
// hour, in 60k counters at most.
func NewWindow(k int, width time.Duration, n int) *Window {
	w := &Window{k: k, width: max(int64(width), 1), ring: make([]slot, max(n, 1))}
	for i := range w.ring {
		w.ring[i].index = -1
	}
	return w
}

// Add counts units of key at now.
func (w *Window) Add(now time.Time, key string, units int64) {
	i := now.UnixNano() / w.width
	s := &w.ring[i%int64(len(w.ring))]
	if s.index != i {
		s.index, s.sketch = i, New(w.k)
	}
	s.sketch.Add(key, units)
}

// Sketches returns the sketches of the window ending at now: now's slot and the n-1 before.
func (w *Window) Sketches(now time.Time) []*Sketch {
	i := now.UnixNano() / w.width
	var in []*Sketch
	for _, s := range w.ring {
		if s.index >= 0 && s.index <= i && s.index > i-int64(len(w.ring)) {
			in = append(in, s.sketch)
		}
	}
	return in
}
