package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// The tests of bans that look into the stores; the conformance suite
// (storetest) holds every store to the semantics.

// withBan returns limits as a set with ban b, failing t if either is
// invalid.
var withBan = testkit.WithBan

// TestBanKeyTTL replays random traffic under two bans, one whose strikes
// outlive its bans (Within long) and one the other way round, and reads
// the ban key after every request: its TTL is exactly the time until
// nothing in it matters (the strikes Within after the first, the last
// ban's end Max after it), to Redis's millisecond; requests that are
// allowed or banned, and Peeks, change neither its fields nor its TTL;
// and a set without a ban makes no ban key.
func TestBanKeyTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bans := []ratelimit.Ban{
		{After: 2, Within: 900 * time.Millisecond, For: 60 * time.Millisecond, Max: 120 * time.Millisecond},
		{After: 2, Within: 80 * time.Millisecond, For: 60 * time.Millisecond, Max: 300 * time.Millisecond},
	}
	l := ratelimit.Limit{Quota: 1, Window: 50 * time.Millisecond}.Using(ratelimit.SlidingLog)
	for _, b := range []struct {
		name  string
		setup func(t *testing.T) (client *redis.Client, advance func(time.Duration))
		steps int
	}{
		{"miniredis", func(t *testing.T) (*redis.Client, func(time.Duration)) {
			m, clock := newMiniredis(t)
			return newClient(t, m.Addr()), clock.Advance
		}, 200},
		{"redis-server", func(t *testing.T) (*redis.Client, func(time.Duration)) {
			return newClient(t, redistest.Shared(t).Addr), time.Sleep
		}, 50},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			client, advance := b.setup(t)
			s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache}) // state is read from Redis
			sets := []*ratelimit.Limits{withBan(t, bans[0], l), withBan(t, bans[1], l)}
			plain := limitsOf(t, l)
			rng := rand.New(rand.NewPCG(5, 6))
			// A look at a ban key holds Redis's TIME before and after
			// it: on a real server, time passes between the reads, as
			// much as a loaded machine makes it, and the checks allow
			// what passed, as measured, not a fixed slack.
			type look struct {
				now    int64 // Redis's TIME, read first: the TTL is read no earlier
				fields map[string]string
				ttl    time.Duration
				end    int64 // Redis's TIME, read last: the TTL was read no later
			}
			read := func(key string) look {
				now := client.Time(ctx).Val().UnixMicro()
				fields, ttl := client.HGetAll(ctx, s.banKey(key)).Val(), client.PTTL(ctx, s.banKey(key)).Val()
				return look{now, fields, ttl, client.Time(ctx).Val().UnixMicro()}
			}
			// passed is the most time between before's TTL and after's.
			passed := func(before, after look) time.Duration {
				return time.Duration(after.end-before.now) * time.Microsecond
			}
			// expired reports whether before's key may have expired of
			// itself by after: its TTL ran out within the time passed. A
			// TTL of 0 is a key within its last millisecond, and none
			// (-2) beside its fields one that expired between the two
			// reads of the look.
			expired := func(before, after look) bool {
				return len(after.fields) == 0 && after.ttl == -2 && (before.ttl == -2 || before.ttl >= 0 && before.ttl <= passed(before, after)+time.Millisecond)
			}
			field := func(l look, name string) int64 {
				t.Helper()
				if len(l.fields) == 0 {
					return 0
				}
				n, err := strconv.ParseInt(l.fields[name], 10, 64)
				if err != nil {
					t.Fatalf("ban key %v: field %s: %v", l.fields, name, err)
				}
				return n
			}
			for i := range b.steps {
				if rng.IntN(2) == 0 {
					advance(time.Duration(rng.IntN(40_000)) * time.Microsecond)
				}
				k := rng.IntN(2)
				key := "k" + strconv.Itoa(k)
				before := read(key)
				if rng.IntN(4) == 0 {
					if _, err := s.Peek(ctx, key, 1, sets[k]); err != nil {
						t.Fatal(err)
					}
					if after := read(key); !expired(before, after) && (!reflect.DeepEqual(after.fields, before.fields) || after.ttl > before.ttl || after.ttl < before.ttl-passed(before, after)-time.Millisecond) {
						t.Fatalf("step %d: a Peek changed the ban key from %+v to %+v", i, before, after)
					}
				}
				before = read(key)
				d, err := s.Allow(ctx, key, 1, sets[k])
				if err != nil {
					t.Fatal(err)
				}
				after := read(key)
				ends := field(before, "u")
				if d.Allowed || ends > after.end {
					// Allowed, or banned since before.
					if d.Banned == 0 && !d.Allowed || !expired(before, after) && (!reflect.DeepEqual(after.fields, before.fields) || after.ttl > before.ttl) {
						t.Fatalf("step %d: %+v changed the ban key from %+v to %+v", i, d, before, after)
					}
					continue
				}
				if ends > before.now {
					continue // on a real clock the ban may have ended meanwhile
				}
				ban := limitset.Compile(sets[k]).Ban
				if len(after.fields) == 0 {
					// A denial's ban key lives at least the shorter of
					// Within (a strike) and Max (a ban's end) from when
					// Redis ran it, no earlier than before's time: a
					// machine stalled that long between the decision and
					// the read finds it expired of itself.
					if passed(before, after) >= time.Duration(min(ban.Within, ban.Max))*time.Microsecond {
						continue
					}
					t.Fatalf("step %d: a denial (%+v) left no ban key", i, d)
				}
				var expires int64
				if field(after, "s") > 0 {
					expires = field(after, "w") + ban.Within
				}
				if u := field(after, "u"); u > 0 {
					expires = max(expires, u+ban.Max)
				}
				want := time.Duration(expires-after.now) * time.Microsecond
				// A real server stores an absolute expiry in ms and PTTL
				// subtracts the current ms: each truncates once. The TTL is
				// read after the time, by at most what passed until end.
				// A server older than 7.2 counts PEXPIRE from when the
				// script calls it, not from its TIME: later by at most the
				// decision's own time, as long as a loaded machine makes it.
				decision := time.Duration(after.now-before.end) * time.Microsecond
				if after.ttl <= 0 || after.ttl > want+2*time.Millisecond+decision || after.ttl < want-time.Millisecond-time.Duration(after.end-after.now)*time.Microsecond {
					t.Fatalf("step %d: ban key %v has TTL %v, want %v, when nothing in it matters any more", i, after.fields, after.ttl, want)
				}
			}
			for range 3 {
				if _, err := s.Allow(ctx, "plain", 1, plain); err != nil {
					t.Fatal(err)
				}
			}
			if n := client.Exists(ctx, s.banKey("plain")).Val(); n != 0 {
				t.Errorf("denials under limits without a ban made a ban key")
			}
		})
	}
}

// TestBanKeyWrongType puts a foreign value in a key's ban key: a request
// and a Peek under limits with a ban get an error naming the key, write
// nothing, and leave the foreign value alone; limits without a ban never
// read it.
func TestBanKeyWrongType(t *testing.T) {
	ctx := context.Background()
	foreign := map[string]func(c *redis.Client, key string) error{
		"string": func(c *redis.Client, key string) error { return c.Set(ctx, key, "banned", 0).Err() },
		"list":   func(c *redis.Client, key string) error { return c.RPush(ctx, key, "x").Err() },
		"hash": func(c *redis.Client, key string) error {
			return c.HSet(ctx, key, "s", "x", "w", "1", "u", "2", "l", "1").Err()
		},
		"partial": func(c *redis.Client, key string) error { return c.HSet(ctx, key, "u", "99999999999999999").Err() },
	}
	limits := []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow), ratelimit.Limit{Quota: 5, Window: time.Hour}.Using(ratelimit.SlidingLog)}
	eachBackend(t, func(t *testing.T, client *redis.Client) {
		s := newStore(t, client, RedisOptions{Prefix: uniquePrefix()})
		for kind, put := range foreign {
			for _, n := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%d limits", kind, n), func(t *testing.T) {
					key := t.Name()
					if err := put(client, s.banKey(key)); err != nil {
						t.Fatal(err)
					}
					before := client.Dump(ctx, s.banKey(key)).Val()
					sum := sha256.Sum256([]byte(key))
					ref := fmt.Sprintf("key #%x", sum[:4])
					set := withBan(t, ratelimit.Ban{After: 1, Within: time.Hour, For: time.Hour}, limits[:n]...)
					_, err := s.Allow(ctx, key, 1, set)
					_, peekErr := s.Peek(ctx, key, 1, set)
					for call, err := range map[string]error{"Allow": err, "Peek": peekErr} {
						if err == nil {
							t.Fatalf("%s: got no error", call)
						}
						if errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), ref) || strings.Contains(err.Error(), key) {
							t.Errorf("%s: got %q, want a store error naming %s, and not the key %q itself", call, err, ref, key)
						}
					}
					for _, l := range limits {
						if client.Exists(ctx, limitKey(s, key, l)).Val() != 0 {
							t.Errorf("the key of %v was written", l)
						}
					}
					if after := client.Dump(ctx, s.banKey(key)).Val(); after != before {
						t.Errorf("the foreign value changed")
					}
					if d, err := s.Allow(ctx, key, 1, limitsOf(t, limits[:n]...)); err != nil || !d.Allowed {
						t.Errorf("limits without a ban: got %+v, %v; want allowed", d, err)
					}
				})
			}
		}
	})
}

// TestBanMemoryMatchesRedis replays traffic in which one key is decided
// under several sets of limits, with different bans or none, as routes
// limiting one client alike are: they count strikes in the key's one ban
// state, and each set with a ban reads it, down to when it expires. The
// Memory store must decide, and peek, as the Redis store does.
func TestBanMemoryMatchesRedis(t *testing.T) {
	t.Parallel() // a pinned clock: nothing here depends on the machine's speed
	mini, _ := newMiniredis(t)
	clock := testkit.NewClock(epoch, mini.SetTime)
	redisStore := newStore(t, newClient(t, mini.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
	mem := newMemory(t, clock, MemoryOptions{})
	rng := rand.New(rand.NewPCG(31, 32))
	windows := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, time.Second}
	var sets []*ratelimit.Limits // one without a ban, five with
	for len(sets) < 6 {
		limits := []ratelimit.Limit{randomLimit(rng, windows)}
		if rng.IntN(3) == 0 {
			limits = append(limits, randomLimit(rng, windows))
			if _, err := ratelimit.NewLimits(limits...); err != nil {
				continue // the two would share a state
			}
		}
		set := limitsOf(t, limits...)
		if len(sets) > 0 {
			b := ratelimit.Ban{After: 1 + rng.IntN(3), Within: windows[rng.IntN(3)], For: windows[rng.IntN(3)]}
			b.Max = b.For * time.Duration(1+rng.IntN(4))
			set = withBan(t, b, limits...)
		}
		sets = append(sets, set)
	}
	ctx := context.Background()
	var next time.Duration // from the last answer: a ban's end, or a limit's retry
	for step := range 800 {
		switch rng.IntN(5) {
		case 0, 1:
			clock.Advance(time.Duration(rng.IntN(300_000)) * time.Microsecond)
		case 2:
			clock.Advance(max(next+time.Duration(rng.IntN(3)-1)*time.Microsecond, 0)) // the Memory store's time never goes back
		case 3:
			if at := mem.BanExpires("k"); at > clock.Now().UnixMicro() {
				clock.Advance(time.Duration(at-clock.Now().UnixMicro()+int64(rng.IntN(3)-1)) * time.Microsecond)
			}
		}
		set := sets[rng.IntN(len(sets))]
		if rng.IntN(4) == 0 {
			peekMatches(t, redisStore, mem, "k", 1, set)
		}
		want, err := redisStore.Allow(ctx, "k", 1, set)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mem.Allow(ctx, "k", 1, set)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			ban, _ := set.Ban()
			limits := set.All()
			t.Fatalf("step %d, %v, %v at %v:\nmemory %+v\nredis  %+v", step, limits, ban, clock.Now().Sub(epoch), got, want)
		}
		next = max(got.Banned, got.RetryAfter)
	}
}

// TestBanStateExpiresAsOnRedis: a ban state Redis keeps to the end of a
// millisecond, the Memory store keeps as long. Two strikes under a ban
// whose strikes last 10ms, the second 0.5ms after the first, leave a state
// that matters until 10ms after the first, but that Redis, which keeps it
// for a whole number of milliseconds, drops at 10.5ms. A third denial at
// 10.2ms under a ban whose strikes last an hour finds the two strikes on
// both stores, and is banned.
func TestBanStateExpiresAsOnRedis(t *testing.T) {
	t.Parallel()
	mini, _ := newMiniredis(t)
	clock := testkit.NewClock(epoch, mini.SetTime)
	redisStore := newStore(t, newClient(t, mini.Addr()), RedisOptions{DenyCacheSize: noDenyCache})
	mem := newMemory(t, clock, MemoryOptions{})
	l := ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow)
	short := withBan(t, ratelimit.Ban{After: 3, Within: 10 * time.Millisecond, For: time.Minute}, l)
	long := withBan(t, ratelimit.Ban{After: 3, Within: time.Hour, For: time.Minute}, l)
	ctx := context.Background()
	for i, st := range []struct {
		advance time.Duration
		set     *ratelimit.Limits
		banned  time.Duration
	}{
		{0, short, 0}, // allowed
		{0, short, 0},
		{500 * time.Microsecond, short, 0},
		{9700 * time.Microsecond, long, time.Minute},
	} {
		clock.Advance(st.advance)
		want, err := redisStore.Allow(ctx, "k", 1, st.set)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mem.Allow(ctx, "k", 1, st.set)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || got.Banned != st.banned {
			t.Fatalf("request %d: got Banned %v from Memory, %v from Redis, want %v:\nmemory %+v\nredis  %+v", i, got.Banned, want.Banned, st.banned, got, want)
		}
	}
}

// TestDenyCacheBans: under limits with a ban, the deny cache keeps no
// denial that is not a ban, so every strike reaches Redis and the ban
// starts on time; it keeps the ban, for any cost, with the exact time
// left, until the ban ends, and not a moment longer.
func TestDenyCacheBans(t *testing.T) {
	t.Parallel()
	s, clock, hook := cachedStore(t)
	ctx := context.Background()
	set := withBan(t, ratelimit.Ban{After: 3, Within: time.Hour, For: time.Minute}, ratelimit.Limit{Quota: 2, Window: time.Hour}.Using(ratelimit.FixedWindow))
	allow := func(cost int) ratelimit.Decision {
		t.Helper()
		d, err := s.Allow(ctx, "k", cost, set)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	allow(2)
	for i := range 2 {
		before := hook.n
		if d := allow(1); d.Allowed || d.Banned != 0 || hook.n == before {
			t.Fatalf("denial %d: got %+v with %d calls to Redis; want a denial from Redis, no ban", i, d, hook.n-before)
		}
	}
	if d := allow(1); d.Banned != time.Minute {
		t.Fatalf("the third denial: got %+v, want a ban of 1m", d)
	}
	calls := hook.n
	clock.Advance(10 * time.Second)
	for _, cost := range []int{1, 2, 1} {
		d := allow(cost)
		if d.Banned != 50*time.Second || d.Results()[0].RetryAfter != 50*time.Second || d.Results()[0].ResetAfter != 50*time.Second || d.Results()[0].Remaining != 0 {
			t.Errorf("cost %d, 10s into the ban: got %+v, want Banned, RetryAfter and ResetAfter of 50s", cost, d)
		}
	}
	if hook.n != calls {
		t.Errorf("requests during a known ban sent %d commands to Redis, want 0", hook.n-calls)
	}
	clock.Advance(50*time.Second - time.Microsecond)
	if d := allow(1); d.Banned != time.Microsecond || hook.n != calls {
		t.Errorf("1µs before the ban ends: got %+v with %d calls to Redis; want Banned 1µs from the cache", d, hook.n-calls)
	}
	clock.Advance(time.Microsecond)
	if d := allow(1); d.Banned != 0 || d.Allowed || hook.n == calls {
		t.Errorf("as the ban ends: got %+v with %d calls to Redis; want Redis's denial, no ban", d, hook.n-calls)
	}
}

// TestBatchDecidesBans sends concurrent requests in batches to a real
// redis-server, under limits with a ban: for each key, exactly the quota
// passes, the next After denials are strikes (the last starting the ban,
// with the limit's longer wait), and the rest are banned; a key whose ban
// key holds a foreign value fails alone.
func TestBatchDecidesBans(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	s := newStore(t, client, RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
	s.batch.maxRuns = 1 // one run at a time: the others wait and go together
	ctx := context.Background()
	ban := ratelimit.Ban{After: 3, Within: time.Hour, For: time.Hour}
	sets := []*ratelimit.Limits{
		withBan(t, ban, ratelimit.Limit{Quota: 2, Window: 24 * time.Hour}.Using(ratelimit.SlidingLog)),
		withBan(t, ban, ratelimit.Limit{Quota: 2, Window: 24 * time.Hour}.Using(ratelimit.FixedWindow), ratelimit.Limit{Quota: 5, Window: 24 * time.Hour}.Using(ratelimit.TokenBucket)),
	}
	client.Set(ctx, s.banKey("bad"), "x", 0)
	keys := []string{"a", "b", "c", "d", "bad"}
	type tally struct{ passed, strikes, started, banned, failed int }
	var mu sync.Mutex
	tallies := map[string]*tally{}
	var wg sync.WaitGroup
	const perKey = 12
	gate := &batchGate{b: s.batch, waiting: 4*len(keys) - 1}
	client.AddHook(gate)
	for g := range 4 * len(keys) {
		key := keys[g%len(keys)]
		set := sets[g%len(keys)%2]
		wg.Go(func() {
			for range perKey / 4 {
				d, err := s.Allow(ctx, key, 1, set)
				mu.Lock()
				c := tallies[key]
				if c == nil {
					c = &tally{}
					tallies[key] = c
				}
				switch {
				case err != nil:
					c.failed++
				case d.Allowed:
					c.passed++
				case d.Banned == 0:
					c.strikes++
				case d.RetryAfter > ban.For: // the ban's first answer keeps the limit's wait
					c.started++
				default:
					c.banned++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, key := range keys[:4] {
		if got, want := *tallies[key], (tally{passed: 2, strikes: 2, started: 1, banned: perKey - 5}); got != want {
			t.Errorf("key %s: got %+v, want %+v", key, got, want)
		}
	}
	if got := *tallies["bad"]; got.failed != perKey {
		t.Errorf("the key whose ban key holds a foreign value: got %+v, want all %d to fail", got, perKey)
	}
	n, runs := 5*perKey, gate.runs.Load()
	if runs >= int64(n) {
		t.Errorf("%d requests sent %d commands: nothing was batched", n, runs)
	}
	t.Logf("%d requests, %d script runs", n, runs)
}

// batchGate is a hook that holds the first command until a number of
// requests wait for a batch (or 5s have passed), so that the next run
// takes them together; and then counts the commands.
type batchGate struct {
	b       *batcher
	waiting int
	once    sync.Once
	runs    atomic.Int64
}

func (g *batchGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *batchGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *batchGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.once.Do(func() {
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				g.b.mu.Lock()
				n := len(g.b.queue)
				g.b.mu.Unlock()
				if n >= g.waiting {
					return
				}
			}
		})
		g.runs.Add(1)
		return next(ctx, cmd)
	}
}

// TestFallbackBans: in process, with the limits divided among instances,
// a ban keeps its whole After; when Redis is back it gets the admissions
// but not the strikes nor the ban; and a Reset made during an outage ends
// on Redis a ban Redis holds.
func TestFallbackBans(t *testing.T) {
	t.Parallel()
	f, m, _ := newFallback(t, FallbackOptions{Instances: 2})
	ctx := context.Background()
	set := withBan(t, ratelimit.Ban{After: 2, Within: time.Hour, For: time.Hour}, ratelimit.Limit{Quota: 4, Window: time.Hour}.Using(ratelimit.SlidingLog))
	decide := func(key string) ratelimit.Decision {
		t.Helper()
		d, err := f.Allow(ctx, key, 1, set)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// "redis" is banned on Redis before the outage.
	for range 4 {
		decide("redis")
	}
	decide("redis")
	if d := decide("redis"); d.Fallback || d.Banned != time.Hour {
		t.Fatalf("Redis up: got %+v, want Redis's ban of 1h", d)
	}
	// "seen" is banned on Redis by a denial of the log that the bucket
	// admitted: the ban's answer, which reports nothing left of either,
	// does not count as what Redis said of the bucket.
	two := withBan(t, ratelimit.Ban{After: 1, Within: time.Hour, For: time.Hour}, ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.SlidingLog), ratelimit.Limit{Quota: 10, Window: time.Hour}.Using(ratelimit.TokenBucket))
	for i, want := range []time.Duration{0, time.Hour} {
		if d, err := f.Allow(ctx, "seen", 1, two); err != nil || d.Fallback || d.Banned != want {
			t.Fatalf("Redis up, request %d of seen: got %+v, %v; want Redis's answer, Banned %v", i, d, err, want)
		}
	}

	m.Close()
	// Half of 4 in process, then two strikes: banned here.
	for i, want := range []bool{true, true, false} {
		if d := decide("local"); !d.Fallback || d.Allowed != want || d.Banned != 0 {
			t.Fatalf("Redis down, request %d: got %+v, want allowed %v in process", i, d, want)
		}
	}
	if d := decide("local"); !d.Fallback || d.Banned != time.Hour {
		t.Fatalf("Redis down, the second denial: got %+v, want a ban of 1h in process", d)
	}
	if err := f.Reset(ctx, "redis", set); err != nil {
		t.Fatal(err)
	}
	// Of the 9 Redis left in the bucket, this instance may spend its half,
	// 5 of its share of 5.
	if p, err := f.Peek(ctx, "seen", 1, two); err != nil || !p.Fallback || p.Results()[1].Remaining != 5 {
		t.Errorf("Redis down, Peek of seen: got %+v, %v; want 5 left in the bucket, seeded from before the ban", p, err)
	}

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the probe to find Redis back and bring it the backlog", func() bool { return f.Health().Decisions == "redis" && !f.impl.Reconciling() })
	// Redis knows of the 2 admitted, not of the ban: 2 left.
	if d := decide("local"); d.Fallback || !d.Allowed || d.Banned != 0 || d.Results()[0].Remaining != 1 {
		t.Errorf("Redis back: got %+v, want Redis to allow with 1 left", d)
	}
	if d := decide("redis"); d.Fallback || !d.Allowed || d.Results()[0].Remaining != 3 {
		t.Errorf("Redis back, the key reset during the outage: got %+v, want Redis to allow with 3 left", d)
	}
}
