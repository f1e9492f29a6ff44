package main

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// limitSpec is the limit a workload asks every contender to enforce, per
// key: Quota requests per Window, with a burst (capacity) of Quota.
// Contenders translate it into their own API as closely as it allows.
type limitSpec struct {
	Quota  int
	Window time.Duration
}

// workload says which keys the callers use and under which limit.
type workload struct {
	id    string // used in -only and the table
	title string
	limit limitSpec
	keys  []string // caller g starts at keys[g*len/callers] and walks round-robin
	// exhaust, when set, names a key to spend with one untimed call
	// before the cell, so that every timed decision is a denial.
	exhaust string
	// wantAllowed is what every timed decision should be: true for the
	// all-allowed workload, false for the all-denied one. Decisions that
	// disagree are counted and reported.
	wantAllowed bool
}

// numKeys is the size of the many-keys workload's key space.
const numKeys = 100_000

func workloads() []workload {
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%06d", i)
	}
	return []workload{
		{
			id:          "many-keys",
			title:       "many keys, all allowed",
			limit:       limitSpec{Quota: 100_000, Window: time.Hour},
			keys:        keys,
			wantAllowed: true,
		},
		{
			id:          "hot-key",
			title:       "one hot key, all denied",
			limit:       limitSpec{Quota: 1, Window: time.Hour},
			keys:        []string{"hot"},
			exhaust:     "hot",
			wantAllowed: false,
		},
	}
}

// cellResult is what one (workload, contender, callers) cell measured.
type cellResult struct {
	workload  *workload
	contender *contender
	callers   int

	decisions uint64
	allowed   uint64
	denied    uint64
	errors    uint64 // returned errors, plus errors the contender hides (see instance.hiddenErrors)
	firstErr  string
	elapsed   time.Duration
	mallocs   uint64
	p50, p99  time.Duration
	// redisCPU is the Redis server's CPU time (INFO cpu, used_cpu_sys +
	// used_cpu_user) over the timed run, when redisCPUOK: Redis rows
	// only, and all of the server's work, whoever asked for it.
	redisCPU   time.Duration
	redisCPUOK bool
	// warmup reports the exhausting call of the all-denied workload.
	warmupAllowed bool
	warmupErr     error
	skipped       string // why the cell did not run, if it did not
}

func (r *cellResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.decisions) / r.elapsed.Seconds()
}

// wrong counts decisions that contradict the workload: denials in the
// all-allowed workload, admissions in the all-denied one.
func (r *cellResult) wrong() uint64 {
	if r.workload.wantAllowed {
		return r.denied
	}
	return r.allowed
}

// callerStats is one caller goroutine's tally, padded so that callers do
// not share cache lines.
type callerStats struct {
	decisions, allowed, denied, errors uint64
	firstErr                           error
	hist                               histogram
	_                                  [64]byte
}

// runCell builds a fresh instance of c for w, warms it up, then runs
// callers goroutines calling it in a loop for d, timing every call.
func runCell(ctx context.Context, env *env, w *workload, c *contender, callers int, d time.Duration) *cellResult {
	res := &cellResult{workload: w, contender: c, callers: callers}
	if c.redis {
		if err := env.redis.flush(ctx); err != nil {
			res.skipped = "FLUSHALL failed: " + err.Error()
			return res
		}
	}
	inst, err := c.build(env, w.limit)
	if err != nil {
		res.skipped = "setup failed: " + err.Error()
		return res
	}
	defer inst.close()

	bg := context.Background() // calls are never canceled: a canceled call would count as an error
	if w.exhaust != "" {
		res.warmupAllowed, res.warmupErr = inst.allow(bg, w.exhaust)
	}

	// Warm up untimed: connections get dialed, scripts loaded, maps grown.
	warm := min(max(d/10, 50*time.Millisecond), 500*time.Millisecond)
	var wg sync.WaitGroup
	var stop atomic.Bool
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st callerStats // the warm-up's tally is thrown away
			callLoop(bg, inst, w, g, callers, time.Now().Add(warm), &stop, &st, false)
		}()
	}
	wg.Wait()

	hidden0 := inst.hidden()
	stats := make([]callerStats, callers) // allocated before the MemStats snapshot
	start := make(chan struct{})
	ready := make(chan struct{}, callers)
	var deadline time.Time
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready <- struct{}{}
			<-start
			callLoop(bg, inst, w, g, callers, deadline, &stop, &stats[g], true)
		}()
	}
	for range callers {
		<-ready
	}
	var meter *cpuMeter
	var cpu0 time.Duration
	if c.redis {
		meter = env.redis.newCPUMeter()
		defer meter.close()
		var err error
		cpu0, err = meter.read(bg)
		res.redisCPUOK = err == nil
	}
	// Stop early if the user interrupts; the cell is then discarded.
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-start:
		}
	}()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	deadline = t0.Add(d)
	close(start)
	wg.Wait()
	res.elapsed = time.Since(t0)
	runtime.ReadMemStats(&after)
	res.mallocs = after.Mallocs - before.Mallocs
	if res.redisCPUOK {
		cpu1, err := meter.read(bg)
		res.redisCPU, res.redisCPUOK = cpu1-cpu0, err == nil
	}

	var hist histogram
	for i := range stats {
		st := &stats[i]
		res.decisions += st.decisions
		res.allowed += st.allowed
		res.denied += st.denied
		res.errors += st.errors
		if st.firstErr != nil && res.firstErr == "" {
			res.firstErr = st.firstErr.Error()
		}
		hist.merge(&st.hist)
	}
	if h := inst.hidden() - hidden0; h > 0 {
		res.errors += h
		if res.firstErr == "" {
			res.firstErr = fmt.Sprintf("%d errors logged by the library and not returned", h)
		}
	}
	res.p50 = hist.quantile(0.50)
	res.p99 = hist.quantile(0.99)
	return res
}

// callLoop is one caller: it calls inst.allow with its keys until the
// deadline, timing each call when timed is set.
func callLoop(ctx context.Context, inst instance, w *workload, g, callers int, deadline time.Time, stop *atomic.Bool, st *callerStats, timed bool) {
	n := len(w.keys)
	k := g * n / callers
	for !stop.Load() {
		key := w.keys[k]
		k++
		if k == n {
			k = 0
		}
		t := time.Now()
		if !t.Before(deadline) {
			return
		}
		ok, err := inst.allow(ctx, key)
		if timed {
			st.hist.record(time.Since(t))
		}
		st.decisions++
		switch {
		case err != nil:
			st.errors++
			if st.firstErr == nil {
				st.firstErr = err
			}
		case ok:
			st.allowed++
		default:
			st.denied++
		}
	}
}

// histogram records durations in log-linear buckets: exact below 64 ns,
// then 64 buckets per power of two (at most 1.6% relative error), in
// constant memory whatever the number of calls.
type histogram struct {
	counts [64 << subBits]uint64
	n      uint64
}

const subBits = 6

func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(v) - 1  // ≥ subBits
	m := v >> (e - subBits) // in [64, 128)
	return (e-subBits+1)<<subBits + int(m-1<<subBits)
}

// bucketMid returns the middle of bucket i's range.
func bucketMid(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	e := i>>subBits - 1 + subBits
	m := uint64(i&(1<<subBits-1)) + 1<<subBits
	lo := m << (e - subBits)
	width := uint64(1) << (e - subBits)
	return lo + width/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 < q ≤ 1), or 0 for no samples.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(bucketMid(i))
		}
	}
	return time.Duration(bucketMid(len(h.counts) - 1))
}
