package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// The edges of leased limits, tried the way production meets them: four
// instance processes on one redis-server hammer one leased key in bursts
// timed on Redis's own clock (the key's expiry for a fixed window, slot
// ends on TIME for a sliding window), each recording when every
// edgeAdmission was asked for and answered, on the machine's clock, which
// Redis's TIME and expiry share. The test then counts, from the
// instances' side, what was admitted where Redis counts a limit, and
// holds it to the quota with nothing to spare.

// edgeEnv, when set, makes the test binary an instance of the edge tests
// (see runEdgeInstance), configured by the JSON of an edgeConfig.
const edgeEnv = "RATELIMIT_TEST_EDGE_INSTANCE"

// edgeConfig is what an edge instance does.
type edgeConfig struct {
	Addr     string
	Prefix   string
	Key      string
	Limits   []ratelimit.Limit
	Plan     string // "fixed", "sliding" or "bucket": when to burst
	Start    int64  // unix µs: when to start
	Stop     int64  // unix µs: when to stop
	Callers  int
	Every    int64  // µs between a slow caller's requests
	Scale    int64  // times the first run's windows and cycles
	Fallback bool   // decide through a Fallback
	Out      string // the admissions' file
}

// edgeReport is what an edge instance prints when it is done.
type edgeReport struct {
	Allowed, Denied, InProcess, Errors int64
	// Calls to Redis that ran out of time (those whose time ran out while
	// they waited for the runs under way to be sent too), and the
	// failures a Fallback counted: each failure must be such a call.
	Overran, Failures int64
	// Requests whose own budget ran out while they waited for the call
	// another request of their instance had under way: each is the
	// outcome of a call held past its budget, so an instance that counts
	// one must count such a call too. Without a Fallback they fail
	// (errSliceWait); through one they are decided in process, aside.
	Waited int64
	// Denials' latencies, µs: the slowest, the 99th percentile, and how
	// many took over 100ms.
	DenySlowest, DenyP99, DenyOver100ms int64
	FirstError                          string
}

// edgeAdmission is one admitted request: unix µs before it was asked and
// after it was answered.
type edgeAdmission struct{ before, after int64 }

func unixMicro() int64 { return time.Now().UnixMicro() }

// runEdgeInstance is an edge instance's whole life.
func runEdgeInstance() {
	var cfg edgeConfig
	if err := json.Unmarshal([]byte(os.Getenv(edgeEnv)), &cfg); err != nil {
		panic(err)
	}
	client := redis.NewClient(&redis.Options{Addr: cfg.Addr, PoolSize: 4 * cfg.Callers, ContextTimeoutEnabled: true})
	var overran atomic.Int64
	client.AddHook(slowHook{0, &overran})
	r, err := NewRedis(client, RedisOptions{Prefix: cfg.Prefix})
	if err != nil {
		panic(err)
	}
	var s ratelimit.Store = r
	var fallback *Fallback
	if cfg.Fallback {
		// A budget of a second, not 50ms: the run is of a healthy
		// Redis, and four instances of eight callers each, under the
		// race detector on a loaded machine (.ci/busy), held calls up
		// to half a second, which a Fallback rightly takes for an
		// outage; a run that meets one anyway tries no edge.
		f, err := NewFallback(r, FallbackOptions{Instances: 4, Budget: time.Second})
		if err != nil {
			panic(err)
		}
		defer f.Close()
		s, fallback = f, f
	}
	limits, err := ratelimit.NewLimits(cfg.Limits...)
	if err != nil {
		panic(err)
	}
	plan := newEdgePlan(&cfg, client)
	for unixMicro() < cfg.Start {
		time.Sleep(time.Millisecond)
	}
	ctx, stop := context.WithCancel(context.Background())
	go plan.watch(ctx)

	var (
		rep      edgeReport
		mu       sync.Mutex
		admitted []edgeAdmission
		denials  []int64
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	for g := range cfg.Callers {
		wg.Go(func() {
			var mine []edgeAdmission
			var slow []int64
			var allowed, denied, local, waited, failed int64
			next := int64(0) // a slow caller's next request
			for {
				now := unixMicro()
				if now >= cfg.Stop {
					break
				}
				switch plan.phase(now) {
				case edgeIdle:
					time.Sleep(50 * time.Microsecond)
					continue
				case edgeSlow:
					if g != 0 || now < next {
						time.Sleep(50 * time.Microsecond)
						continue
					}
					next = now + cfg.Every
				}
				d, err := s.Allow(context.Background(), cfg.Key, 1, limits)
				after := unixMicro()
				switch {
				case errors.Is(err, errSliceWait) && !cfg.Fallback: // through a Fallback, an error
					waited++
				case err != nil:
					failed++
					errOnce.Do(func() { rep.FirstError = err.Error() })
				case d.Allowed:
					allowed++
					mine = append(mine, edgeAdmission{now, after})
				default:
					denied++
					slow = append(slow, after-now)
				}
				if err == nil && d.Fallback {
					local++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			admitted = append(admitted, mine...)
			denials = append(denials, slow...)
			rep.Allowed += allowed
			rep.Denied += denied
			rep.InProcess += local
			rep.Waited += waited
			rep.Errors += failed
		})
	}
	wg.Wait()
	stop()
	rep.Overran = overran.Load() + r.batch.late.Load()
	if fallback != nil {
		rep.Failures = int64(fallback.Health().Failures)
		rep.Waited += int64(fallback.impl.Aside())
	}
	slices.Sort(denials)
	if n := len(denials); n > 0 {
		rep.DenySlowest = denials[n-1]
		rep.DenyP99 = denials[n*99/100]
		i, _ := slices.BinarySearch(denials, 100_000)
		rep.DenyOver100ms = int64(n - i)
	}
	out, err := os.Create(cfg.Out)
	if err != nil {
		panic(err)
	}
	w := bufio.NewWriter(out)
	for _, a := range admitted {
		binary.Write(w, binary.LittleEndian, [2]int64{a.before, a.after})
	}
	if err := w.Flush(); err != nil {
		panic(err)
	}
	out.Close()
	json.NewEncoder(os.Stdout).Encode(rep)
}

// What an instance's callers do at a moment of an edge plan.
type edgePhase int

const (
	edgeIdle  edgePhase = iota // nothing
	edgeSlow                   // one caller, a request every Every µs: slices stay out
	edgeBurst                  // every caller, back to back
)

// edgePlan times an instance's bursts.
type edgePlan struct {
	cfg    *edgeConfig
	client *redis.Client
	key    string // the limit's key on Redis, for a fixed window
	end    atomic.Int64
	until  atomic.Int64 // a fixed window's burst, while under way
}

func newEdgePlan(cfg *edgeConfig, client *redis.Client) *edgePlan {
	p := &edgePlan{cfg: cfg, client: client}
	if cfg.Plan == "fixed" {
		set, err := ratelimit.NewLimits(cfg.Limits...)
		if err != nil {
			panic(err)
		}
		_, cs, _ := limitset.Check(cfg.Key, 1, set)
		p.key = redisKey(cfg.Prefix, cfg.Key, cs.Limits[0].Suffix)
	}
	return p
}

// watch follows a fixed window's key: the end of the window under way,
// as unix µs, from Redis's own expiry. A key expires once Redis's clock,
// in ms, is past its PEXPIRETIME.
func (p *edgePlan) watch(ctx context.Context) {
	if p.key == "" {
		return
	}
	for ctx.Err() == nil {
		if ms, err := p.client.PExpireTime(ctx, p.key).Result(); err == nil && ms > 0 {
			p.end.Store((int64(ms/time.Millisecond) + 1) * 1000)
		}
		time.Sleep(time.Millisecond)
	}
}

// phase is what callers do at now (unix µs).
func (p *edgePlan) phase(now int64) edgePhase {
	w := p.cfg.Limits[0].Window.Microseconds()
	switch p.cfg.Plan {
	case "fixed":
		// A window whose end falls in an odd window's length, counted
		// from the epoch, is slow, with slices out when it ends; the
		// next is hammered from that end on for a window.
		if now < p.until.Load() {
			return edgeBurst
		}
		end := p.end.Load()
		if end == 0 {
			return edgeSlow // the first window opens
		}
		if (end/w)%2 == 1 {
			if now >= end {
				p.until.CompareAndSwap(p.until.Load(), end+w)
				return edgeBurst
			}
			return edgeSlow
		}
		if now >= end {
			return edgeSlow // opens the next window
		}
		return edgeIdle
	case "sliding":
		// Cycles of a window and a slot: slow through the first slot,
		// which ends with slices out, then hammered for a window from
		// its end on (its slices spent after it if they outlive it),
		// each slot's room, freed as an old slot leaves the window,
		// spent at once.
		slot := p.cfg.Limits[0].Precision.Microseconds()
		if now%(w+slot) < slot {
			return edgeSlow
		}
		return edgeBurst
	default: // a token bucket: cycles of a second (times Scale), slow (the bucket fills, slices out) then hammered
		if now%(1_000_000*p.cfg.Scale) < 800_000*p.cfg.Scale {
			return edgeSlow
		}
		return edgeBurst
	}
}

// edgeRun runs four edge instances with cfg (Start, Stop and Out filled
// in here) for d and returns their admissions, sorted by when they were
// asked for, and reports.
func edgeRun(t *testing.T, cfg edgeConfig, d time.Duration) ([]edgeAdmission, []edgeReport) {
	t.Helper()
	const instances = 4
	cfg.Start = unixMicro() + 500_000 // the processes' start, well before
	cfg.Stop = cfg.Start + d.Microseconds()
	dir := t.TempDir()
	var all []edgeAdmission
	var reports []edgeReport
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range instances {
		c := cfg
		c.Out = filepath.Join(dir, fmt.Sprint("admitted-", i))
		var rep edgeReport
		wait := startInstance(t, edgeEnv, c, &rep)
		wg.Go(func() {
			if err := wait(); err != nil {
				t.Errorf("instance %d: %v", i, err)
				return
			}
			f, err := os.ReadFile(c.Out)
			if err != nil {
				t.Errorf("instance %d: %v", i, err)
				return
			}
			mine := make([]edgeAdmission, len(f)/16)
			for j := range mine {
				mine[j] = edgeAdmission{int64(binary.LittleEndian.Uint64(f[16*j:])), int64(binary.LittleEndian.Uint64(f[16*j+8:]))}
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, mine...)
			reports = append(reports, rep)
		})
	}
	wg.Wait()
	slices.SortFunc(all, func(a, b edgeAdmission) int { return int(a.before - b.before) })
	return all, reports
}

// within counts the admissions surely asked for at from or later and
// answered before to: a lower bound of what was admitted in [from, to).
func within(all []edgeAdmission, from, to int64) int {
	i, _ := slices.BinarySearchFunc(all, from, func(a edgeAdmission, t int64) int { return int(a.before - t) })
	n := 0
	for _, a := range all[i:] {
		if a.before >= to {
			break
		}
		if a.after < to {
			n++
		}
	}
	return n
}

// asked counts the admissions asked for in [from, to): about what was
// admitted there, to tell whether a window was spent in full.
func asked(all []edgeAdmission, from, to int64) int {
	i, _ := slices.BinarySearchFunc(all, from, func(a edgeAdmission, t int64) int { return int(a.before - t) })
	j, _ := slices.BinarySearchFunc(all, to, func(a edgeAdmission, t int64) int { return int(a.before - t) })
	return j - i
}

// nearlyFull reports whether a window that admitted n of quota was spent
// in full but for the slices that lapse as slots end (a few units an
// instance): a window the bound is tried in, where units spent after
// their window or slot would show.
func nearlyFull(n, quota int) bool { return n >= quota*98/100 }

// bucketExcess returns the most that any span of the admissions exceeds
// what a token bucket of burst tokens refilling rate a µs admits in it:
// admissions i..j (sorted by when they were asked for) all fall within
// the asking of i and the latest answer among them, so that span admits
// at least j-i+1.
func bucketExcess(all []edgeAdmission, burst, rate float64) float64 {
	worst := -burst
	best := 0.0 // max over i of rate*before_i - i
	latest := int64(0)
	for j, a := range all {
		if v := rate*float64(a.before) - float64(j); j == 0 || v > best {
			best = v
		}
		latest = max(latest, a.after)
		if e := float64(j+1) - rate*float64(latest) + best; e > worst {
			worst = e
		}
	}
	return worst - burst
}

// TestLeasedAtEveryEdge: four instance processes hammer one leased key on
// a real redis-server in bursts timed on Redis's own clock, and what they
// admitted never exceeds the limit, counted from their side: a fixed
// window's quota between two ends of its key on Redis, a sliding
// window's quota in any run of a window's slots on Redis's TIME, a token
// bucket's burst plus its refill over any span. Each algorithm's bound is
// tried at edges met with slices out and the limit then spent in full:
// 20 or more with RATELIMIT_FAULTS=1, one or more otherwise. A machine
// too slow to spend a window in full meets fewer edges a run, so runs
// follow one another, up to four, each with windows and cycles twice as
// long as the last, until enough edges were met.
func TestLeasedAtEveryEdge(t *testing.T) {
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	edges := 2 // planned per run: window ends, slot ends or bursts
	want := 1
	if longRuns() {
		edges, want = 21, 20
	}
	tries := []struct {
		name string
		run  func(t *testing.T, cfg edgeConfig, edges int) int
	}{
		{"fixed", edgeFixed},
		{"fixed/fallback", edgeFixed}, // on a healthy Redis: nothing decided in process
		{"sliding", edgeSliding},
		{"bucket", edgeBucket},
	}
	for _, try := range tries {
		t.Run(try.name, func(t *testing.T) {
			met := 0
			for run := 0; met < want && run < 4; run++ {
				cfg := edgeConfig{Addr: srv.Addr, Prefix: fmt.Sprintf("edge%d-%s:", run, try.name), Key: "hot", Callers: 8, Every: 200,
					Scale: 1 << run, Fallback: strings.HasSuffix(try.name, "/fallback")}
				met += try.run(t, cfg, edges)
			}
			if met < want {
				t.Errorf("the bursts met %d edges with slices out in four runs, want %d or more: the bound was hardly tried", met, want)
			}
		})
	}
}

// edgeFixed runs a fixed window's edges and returns how many it met.
func edgeFixed(t *testing.T, cfg edgeConfig, edges int) int {
	const quota = 20_000
	l := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: quota, Window: time.Duration(cfg.Scale) * 300 * time.Millisecond, Leased: true}
	cfg.Limits, cfg.Plan = []ratelimit.Limit{l}, "fixed"
	client := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer client.Close()
	// The windows' ends, as Redis keeps them, watched while they run.
	var ends []int64
	ctx, stop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		plan := newEdgePlan(&cfg, client)
		for ctx.Err() == nil {
			if ms, err := client.PExpireTime(ctx, plan.key).Result(); err == nil && ms > 0 {
				if end := (int64(ms/time.Millisecond) + 1) * 1000; len(ends) == 0 || ends[len(ends)-1] != end {
					ends = append(ends, end)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	all, reports := edgeRun(t, cfg, time.Duration(edges)*3*l.Window)
	stop()
	<-watched
	if sum := edgeReports(t, reports); cfg.Fallback {
		// On a healthy Redis the Fallback decides nothing in process,
		// unless a call to Redis itself ran out of its budget, as a
		// machine loaded enough makes one: then it rightly did, the
		// limit holds only to the outage's bound, and this run tries no
		// edge. So too when requests that waited for such a call ran
		// out of their own budgets (see edgeReports).
		switch {
		case sum.Failures > sum.Overran:
			t.Errorf("a Fallback over a healthy Redis counted %d failures, but only %d calls ran out of time", sum.Failures, sum.Overran)
		case sum.InProcess > sum.Waited && sum.Failures == 0:
			t.Errorf("a Fallback over a healthy Redis decided %d of %d in process, with no failure and %d requests out of time waiting", sum.InProcess, sum.Allowed+sum.Denied, sum.Waited)
		case sum.InProcess > 0 || sum.Waited > 0:
			t.Logf("%d calls to Redis ran out of the budget: the Fallback decided %d in process, %d requests ran out of time waiting, and this run tries no edge", sum.Overran, sum.InProcess, sum.Waited)
			return 0
		}
	}
	worst, full, met := 0, 0, 0
	for i := 1; i < len(ends); i++ {
		n := within(all, ends[i-1], ends[i])
		if n > quota {
			t.Errorf("the window ending at %d admitted at least %d, over its quota of %d", ends[i], n, quota)
		}
		worst = max(worst, n)
		if nearlyFull(asked(all, ends[i-1], ends[i]), quota) {
			full++
			if (ends[i-1]/l.Window.Microseconds())%2 == 1 {
				met++ // a slow window's slices were out when it ended
			}
		}
	}
	t.Logf("fixed window: %d windows, %d spent in full (98%% or more), %d of them after a window that ended with slices out; the most admitted in one: %d of %d", len(ends)-1, full, met, worst, quota)
	return met
}

// edgeSliding runs a sliding window's edges and returns how many it met.
func edgeSliding(t *testing.T, cfg edgeConfig, edges int) int {
	const quota = 10_000
	l := ratelimit.Limit{Algorithm: ratelimit.SlidingWindow, Quota: quota, Window: time.Duration(cfg.Scale) * 400 * time.Millisecond, Precision: time.Duration(cfg.Scale) * 80 * time.Millisecond, Leased: true}
	cfg.Limits, cfg.Plan = []ratelimit.Limit{l}, "sliding"
	all, reports := edgeRun(t, cfg, time.Duration(edges+1)*(l.Window+l.Precision))
	edgeReports(t, reports)
	if len(all) == 0 {
		t.Error("nothing admitted")
		return 0
	}
	w, slot := l.Window.Microseconds(), l.Precision.Microseconds()
	worst, full, met := 0, 0, 0
	for from := all[0].before / slot * slot; from < all[len(all)-1].after; from += slot {
		n := within(all, from, from+w)
		if n > quota {
			t.Errorf("the slots from %d to %d admitted at least %d, over the quota of %d", from, from+w, n, quota)
		}
		worst = max(worst, n)
		if nearlyFull(asked(all, from, from+w), quota) {
			full++
			if from%(w+slot) == slot {
				met++ // from the end of a slot that had slices out
			}
		}
	}
	t.Logf("sliding window: %d windows of slots spent in full (98%% or more), %d of them from the end of a slot with slices out; the most admitted in one: %d of %d", full, met, worst, quota)
	return met
}

// edgeBucket runs a token bucket's bursts and returns how many drew the
// whole burst.
func edgeBucket(t *testing.T, cfg edgeConfig, edges int) int {
	const burst = 4_000
	l := ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 10_000, Window: time.Second, Burst: burst, Leased: true}
	cfg.Limits, cfg.Plan, cfg.Every = []ratelimit.Limit{l}, "bucket", 1000
	all, reports := edgeRun(t, cfg, time.Duration(int64(edges)*cfg.Scale)*time.Second)
	edgeReports(t, reports)
	if len(all) == 0 {
		t.Error("nothing admitted")
		return 0
	}
	rate := float64(l.Quota) / float64(l.Window.Microseconds())
	excess := bucketExcess(all, burst, rate)
	if excess > 0 {
		t.Errorf("a span admitted %.1f more than the bucket allows", excess)
	}
	met := 0
	cycle := 1_000_000 * cfg.Scale
	for from := all[0].before / cycle * cycle; from < all[len(all)-1].after; from += cycle {
		if asked(all, from+cycle*8/10, from+cycle) >= burst {
			met++
		}
	}
	t.Logf("token bucket: %d admitted, %d bursts drew the whole burst or more; excess over the bucket: %.1f (at most 0)", len(all), met, excess)
	return met
}

// edgeReports checks and logs what the instances said, and returns their
// sum.
func edgeReports(t *testing.T, reports []edgeReport) edgeReport {
	t.Helper()
	var sum edgeReport
	for _, r := range reports {
		sum.Allowed += r.Allowed
		sum.Denied += r.Denied
		sum.InProcess += r.InProcess
		sum.Overran += r.Overran
		sum.Failures += r.Failures
		sum.Waited += r.Waited
		if r.Waited > 0 && r.Overran == 0 {
			t.Errorf("an instance's requests ran out of time %d times waiting for another's call to Redis, but none of its calls ran out of time", r.Waited)
		}
		sum.Errors += r.Errors
		sum.DenyOver100ms += r.DenyOver100ms
		sum.DenySlowest = max(sum.DenySlowest, r.DenySlowest)
		sum.DenyP99 = max(sum.DenyP99, r.DenyP99)
		if sum.FirstError == "" {
			sum.FirstError = r.FirstError
		}
	}
	if sum.Errors > 0 {
		t.Errorf("%d errors; the first: %s", sum.Errors, sum.FirstError)
	}
	t.Logf("allowed %d, denied %d (slowest denial %dµs, 99th percentile %dµs, %d over 100ms), decided in process by a Fallback %d, out of time waiting for another's call %d",
		sum.Allowed, sum.Denied, sum.DenySlowest, sum.DenyP99, sum.DenyOver100ms, sum.InProcess, sum.Waited)
	return sum
}
