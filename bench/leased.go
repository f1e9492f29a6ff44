package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// The leased hot-key benchmark (-leased): several instance processes,
// each calling this library's Redis store on one hot key whose leased
// limit is far from spent, on one redis-server. It measures the admitted
// decisions a second of all the processes together, the Redis round
// trips they made per 1,000 decisions, and, from Redis's count, the units
// leased and not spent.

// leasedCommand runs one instance process of the leased benchmark.
const leasedCommand = "leased-instance"

// leasedLimit is the hot key's: 100 million a minute, leased.
var leasedLimit = ratelimit.Limit{Quota: 100_000_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true}

// spentLimits are the limits of the spent-key runs (issue 35's item 6): a
// fixed window spent in its first milliseconds, and token buckets
// drained at once that then refill 10 a millisecond and 100 a second,
// each leased.
var spentLimits = map[string]ratelimit.Limit{
	"fixed-window":      {Quota: 10_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true},
	"token-bucket":      {Quota: 10_000, Window: time.Second, Burst: 2_000, Algorithm: ratelimit.TokenBucket, Leased: true},
	"token-bucket-100s": {Quota: 100, Window: time.Second, Burst: 50, Algorithm: ratelimit.TokenBucket, Leased: true},
}

// nothingRun is the -spent run that times no store at all.
const nothingRun = "nothing"

// denialTimes is a histogram of how long denials took: 1µs buckets up to
// 10ms, then the slower ones themselves.
type denialTimes struct {
	under [10_000]uint64
	over  []time.Duration
}

func (h *denialTimes) add(d time.Duration) {
	if us := d / time.Microsecond; us < time.Duration(len(h.under)) {
		h.under[us]++
	} else {
		h.over = append(h.over, d)
	}
}

func (h *denialTimes) merge(o *denialTimes) {
	for i, n := range o.under {
		h.under[i] += n
	}
	h.over = append(h.over, o.over...)
}

// count returns how many denials h holds, and how many took longer than d.
func (h *denialTimes) count(d time.Duration) (n, over uint64) {
	for i, c := range h.under {
		n += c
		if time.Duration(i)*time.Microsecond >= d {
			over += c
		}
	}
	return n + uint64(len(h.over)), over + uint64(len(h.over))
}

// quantile returns the time q of the denials took at most, and the
// slowest.
func (h *denialTimes) quantile(q float64) (at, slowest time.Duration) {
	var n uint64
	for _, c := range h.under {
		n += c
	}
	n += uint64(len(h.over))
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	at = -1
	for i, c := range h.under {
		if c > 0 {
			slowest = time.Duration(i) * time.Microsecond
		}
		if seen += c; at < 0 && seen >= want && want > 0 {
			at = time.Duration(i) * time.Microsecond
		}
	}
	slices.Sort(h.over)
	if len(h.over) > 0 {
		slowest = h.over[len(h.over)-1]
		if at < 0 {
			at = h.over[want-seen-1]
		}
	}
	return max(at, 0), slowest
}

// leasedResult is what an instance process reports, as JSON on stdout.
type leasedResult struct {
	Decisions uint64 `json:"decisions"`
	Admitted  uint64 `json:"admitted"` // units
	Errors    uint64 `json:"errors"`
	Trips     uint64 `json:"trips"` // commands and pipelines sent to Redis
	Elapsed   time.Duration
	// Of a spent key's run: how long denials took, µs buckets to 10ms,
	// and the slower ones.
	Denials []uint64        `json:"denials,omitempty"`
	Slow    []time.Duration `json:"slow,omitempty"`
}

// tripCounter counts, through a go-redis hook, the round trips a client makes.
type tripCounter struct{ n atomic.Uint64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// leasedMain is an instance process: it decides the hot key from callers
// goroutines from the given start for the given duration.
func leasedMain(args []string) int {
	fs := flag.NewFlagSet(leasedCommand, flag.ContinueOnError)
	addr := fs.String("addr", "", "redis-server address")
	callers := fs.Int("callers", 4, "goroutines")
	start := fs.Int64("start", 0, "when to start, in Unix ns")
	duration := fs.Duration("duration", 5*time.Second, "how long")
	spent := fs.String("spent", "", "decide a spent key under this one of spentLimits instead, timing each denial")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	limit, key := leasedLimit, "hot"
	if *spent != "" {
		limit, key = spentLimits[*spent], "spent-"+*spent
	}
	if *spent == nothingRun {
		limit = spentLimits["fixed-window"]
	}
	client := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 128})
	defer client.Close()
	trips := &tripCounter{}
	client.AddHook(trips)
	s, err := store.NewRedis(client, store.RedisOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	allow := s.Allow
	if *spent == nothingRun {
		// The machine's own tail: the same loop, timing a call that
		// denies at once without the store.
		allow = func(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
			return ratelimit.Decision{}, nil
		}
	}
	limits, err := ratelimit.NewLimits(limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	// Warm up: the library loaded and a connection a caller dialed
	// before the start, so that the run times decisions, not dials.
	var warm sync.WaitGroup
	for range *callers {
		warm.Go(func() { s.Allow(ctx, "warm-up", 1, limits) })
	}
	warm.Wait()
	time.Sleep(time.Until(time.Unix(0, *start)))
	var res leasedResult
	var decisions, admitted, errs atomic.Uint64
	var mu sync.Mutex
	var times denialTimes
	began := time.Now()
	end := began.Add(*duration)
	var wg sync.WaitGroup
	for range *callers {
		wg.Go(func() {
			var n, a, e uint64
			var mine denialTimes
			for ; n%256 != 0 || time.Now().Before(end); n++ {
				asked := time.Now()
				d, err := allow(ctx, key, 1, limits)
				switch {
				case err != nil:
					e++
				case d.Allowed:
					a++
				case *spent != "":
					mine.add(time.Since(asked))
				}
			}
			decisions.Add(n)
			admitted.Add(a)
			errs.Add(e)
			mu.Lock()
			times.merge(&mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	if *spent != "" {
		res.Denials, res.Slow = times.under[:], times.over
	}
	res.Elapsed = time.Since(began)
	res.Decisions, res.Admitted, res.Errors, res.Trips = decisions.Load(), admitted.Load(), errs.Load(), trips.n.Load()
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// runLeased runs the leased benchmark: processes instance processes of
// callers goroutines each, for duration, and writes the report.
func runLeased(ctx context.Context, cfg *config) int {
	srv, err := startRedis()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer srv.Kill()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	callers := cfg.callers[len(cfg.callers)-1]
	if len(cfg.callers) == 3 && cfg.callers[2] == 64 { // the default list: 4 a process
		callers = 4
	}
	results, err := leasedInstances(ctx, exe, srv.Addr, cfg.processes, callers, cfg.duration)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	var keys []string
	if keys, err = c.Keys(ctx, "rl:{hot}*").Result(); err != nil || len(keys) != 1 {
		fmt.Fprintln(os.Stderr, "bench: the hot key on Redis:", keys, err)
		return 1
	}
	counted, err := c.Get(ctx, keys[0]).Uint64()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: the hot key's count:", err)
		return 1
	}
	version, _ := (&redisTarget{opts: &redis.Options{Addr: srv.Addr}}).version(ctx)

	var sum leasedResult
	var longest time.Duration
	for _, r := range results {
		sum.Decisions += r.Decisions
		sum.Admitted += r.Admitted
		sum.Errors += r.Errors
		sum.Trips += r.Trips
		longest = max(longest, r.Elapsed)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Leased hot key\n\n")
	fmt.Fprintf(&b, "`cd bench && go run . -leased%s` on %s, %d cores, GOMAXPROCS %d per process, %s, redis-server %s.\n\n",
		flagsNote(cfg), cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), version)
	fmt.Fprintf(&b, "%d instance processes of %d callers each, one hot key under `ratelimit.Limit{Quota: 100_000_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true}`, for %v, on one redis-server.\n\n", cfg.processes, callers, cfg.duration)
	fmt.Fprintf(&b, "| Process | Decisions | Admitted | Errors | Decisions/s | Redis round trips | Decisions per round trip |\n|---|---|---|---|---|---|---|\n")
	for i, r := range results {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", i, formatCount(r.Decisions), formatCount(r.Admitted), formatCount(r.Errors),
			formatCount(uint64(float64(r.Decisions)/r.Elapsed.Seconds())), formatCount(r.Trips), formatCount(r.Decisions/max(1, r.Trips)))
	}
	rate := uint64(float64(sum.Admitted) / longest.Seconds())
	fmt.Fprintf(&b, "| **all** | %s | %s | %s | **%s** | %s | **%s** |\n\n", formatCount(sum.Decisions), formatCount(sum.Admitted), formatCount(sum.Errors),
		formatCount(rate), formatCount(sum.Trips), formatCount(sum.Decisions/max(1, sum.Trips)))
	unspent := int64(counted) - int64(sum.Admitted)
	fmt.Fprintf(&b, "- Admitted decisions a second, all processes: **%s** (target: at least 1,000,000).\n", formatCount(rate))
	fmt.Fprintf(&b, "- Redis round trips per 1,000 decisions: **%.3f** (target: at most 1).\n", 1000*float64(sum.Trips)/float64(max(1, sum.Decisions)))
	fmt.Fprintf(&b, "- Redis counts %s units; the processes admitted %s: **%d** leased and not spent, %.4f%% of the limit (target: at most 1%%); more admitted than counted: %v.\n",
		formatCount(counted), formatCount(sum.Admitted), unspent, 100*float64(unspent)/float64(leasedLimit.Quota), sum.Admitted > counted)
	if longest > leasedLimit.Window {
		fmt.Fprintf(&b, "- The run outlasted a window: the counts above span windows.\n")
	}
	fmt.Fprintf(&b, "\n## A spent leased key\n\nThe same processes and callers, each on a key spent at once (issue 35's item 6), for %v a limit: how long each denial took, from the call to its answer.\n\n", cfg.duration)
	fmt.Fprintf(&b, "| Limit | Denials | Admitted | 99th percentile | Slowest | 1ms or more | Redis round trips per 1,000 denials |\n|---|---|---|---|---|---|---|\n")
	for _, name := range append(slices.Sorted(maps.Keys(spentLimits)), nothingRun) {
		results, err := leasedInstances(ctx, exe, srv.Addr, cfg.processes, callers, cfg.duration, "-spent", name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		var times denialTimes
		var admitted, trips uint64
		for _, r := range results {
			var h denialTimes
			copy(h.under[:], r.Denials)
			h.over = r.Slow
			times.merge(&h)
			admitted += r.Admitted
			trips += r.Trips
		}
		p99, slowest := times.quantile(0.99)
		n, over := times.count(time.Millisecond)
		label := "`" + spentLimits[name].String() + "`"
		if name == nothingRun {
			label = "no store: a call that denies at once (the machine's own tail)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | **%dµs** | **%.1fms** | %s | %.2f |\n", label, formatCount(n), formatCount(admitted), p99.Microseconds(), float64(slowest)/float64(time.Millisecond), formatCount(over), 1000*float64(trips)/float64(max(1, n)))
	}
	fmt.Fprintf(&b, "\nTargets: the 99th percentile at most 1ms, the slowest at most 10ms.\n")
	io.WriteString(os.Stdout, b.String())
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	return 0
}

// leasedInstances runs processes instance processes of callers
// goroutines each, all starting at one instant, for duration, with args
// besides, and returns what each reported.
func leasedInstances(ctx context.Context, exe, addr string, processes, callers int, duration time.Duration, args ...string) ([]leasedResult, error) {
	start := time.Now().Add(time.Second)
	results := make([]leasedResult, processes)
	errs := make([]error, processes)
	var wg sync.WaitGroup
	for i := range processes {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, exe, append([]string{leasedCommand, "-addr", addr, "-callers", fmt.Sprint(callers),
				"-start", fmt.Sprint(start.UnixNano()), "-duration", duration.String()}, args...)...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(out, &results[i])
			}
			if err != nil {
				errs[i] = fmt.Errorf("instance %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// flagsNote is the flags a report's command line shows beyond -leased.
func flagsNote(cfg *config) string {
	var s string
	if cfg.processes != 4 {
		s += fmt.Sprintf(" -processes %d", cfg.processes)
	}
	if cfg.duration != 3*time.Second {
		s += " -duration " + cfg.duration.String()
	}
	return s
}
