package ratelimit_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// streamStores returns a Memory store, a Redis store on a real
// redis-server and a Fallback over another, for the tests of streams.
func streamStores(t *testing.T) map[string]ratelimit.Store {
	t.Helper()
	memory := newMemory(t)
	c, prefix := sharedRedis(t)
	fallback, err := store.NewFallback(newRedisStore(t, c, prefix+"f:"), steadyFallback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fallback.Close() })
	return map[string]ratelimit.Store{"memory": memory, "redis": newRedisStore(t, c, prefix), "fallback": fallback}
}

// TestStreamChargesAsItGoes: a stream spends its reservation, asks for
// more as it goes past it, is told no when the limit has no room beside
// another request's reservation, and is charged the excess at once as
// debt; at the end exactly what it used is charged, once, and its asks
// count as no request. On every store, over 1,000 tokens an hour beside
// 10 requests an hour: the stream reserves 100 and uses 60 a chunk,
// beside a request that holds 700.
func TestStreamChargesAsItGoes(t *testing.T) {
	t.Parallel()
	for name, s := range streamStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			limit := ratelimit.Limit{Quota: 1000, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Usage: true, Name: "tokens"}
			var mu sync.Mutex
			charged := 0
			requests := ratelimit.Limit{Quota: 10, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Cost: 1, Name: "requests"}
			l := newLimiter(t, s, "stream", ratelimit.WithLimits(limit, requests), quietLogs(),
				ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
					if e.Outcome == "charged" {
						mu.Lock()
						charged += e.Cost
						mu.Unlock()
					}
				}))
			ctx := context.Background()
			left := func() int {
				t.Helper()
				d, err := l.Peek(ratelimit.Key(ctx, "gen", "client", 1))
				if err != nil {
					t.Fatal(err)
				}
				return d.Results()[0].Remaining
			}
			other := l.Decide(ratelimit.Key(ctx, "gen", "client", 700))
			stream := l.Decide(ratelimit.Key(ctx, "gen", "client", 100))
			if !other.Allowed || !stream.Allowed {
				t.Fatalf("admitted %v and %v; want both: 800 of 1,000 held", other.Allowed, stream.Allowed)
			}
			if n := left(); n != 200 {
				t.Fatalf("%d left with 800 held; want 200", n)
			}
			// 60 a chunk: the reservation of 100 covers the first; the
			// second asks for 100 more, the fourth for 100 more again; the
			// sixth finds 700 + 300 held and is told no, its 60 charged now.
			wantLeft := []int{200, 100, 100, 0, 0, 0}
			for i, want := range wantLeft {
				goOn := ratelimit.Charge(stream.Context, 60)
				if goOn != (i < 5) {
					t.Fatalf("chunk %d: Charge says %v; want %v", i+1, goOn, i < 5)
				}
				if n := left(); n != want {
					t.Fatalf("after chunk %d (%d used), %d left; want %d", i+1, 60*(i+1), n, want)
				}
			}
			// Told no, and from then on: a chunk more goes into debt too.
			if ratelimit.Charge(stream.Context, 40) {
				t.Fatal("a Charge after the store said no says true")
			}
			if err := l.End(stream.Context); err != nil {
				t.Fatal(err)
			}
			// 400 used, the other's 700 held: 100 in debt.
			if n := left(); n != 0 {
				t.Fatalf("after the stream ended, %d left; want 0 (100 in debt)", n)
			}
			ratelimit.Charge(other.Context, 0)
			if err := l.End(other.Context); err != nil {
				t.Fatal(err)
			}
			if n := left(); n != 600 {
				t.Fatalf("after both ended, %d left; want 600: the stream's 400, exactly", n)
			}
			if err := l.End(stream.Context); err != nil { // again: nothing
				t.Fatal(err)
			}
			if n := left(); n != 600 {
				t.Fatalf("after the stream ended again, %d left; want 600", n)
			}
			// The asks for more are not requests: the two took one each.
			d, err := l.Peek(ratelimit.Key(ctx, "gen", "client", 1))
			if err != nil {
				t.Fatal(err)
			}
			if n := d.Results()[1].Remaining; n != 8 {
				t.Errorf("requests: %d left; want 8, one taken by each request", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if charged != 400 {
				t.Errorf("the observer saw %d charged; want 400", charged)
			}
		})
	}
}

// TestStreamWithinItsReservation: a stream whose usage stays within what
// it reserved makes no store call before it ends, however many chunks it
// charges, and other requests see its reservation meanwhile.
func TestStreamWithinItsReservation(t *testing.T) {
	t.Parallel()
	s := &countingStore{Store: newMemory(t)}
	limit := ratelimit.Limit{Quota: 1000, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Usage: true, Name: "tokens"}
	l := newLimiter(t, s, "stream", ratelimit.WithLimits(limit))
	ctx := context.Background()
	v := l.Decide(ratelimit.Key(ctx, "gen", "client", 500))
	if !v.Allowed {
		t.Fatal("denied")
	}
	if d := l.Decide(ratelimit.Key(ctx, "gen", "client", 501)); d.Allowed {
		t.Fatal("a request of 501 was admitted beside a reservation of 500 of 1,000")
	}
	before := s.calls.Load() + s.ends.Load()
	for range 50 {
		if !ratelimit.Charge(v.Context, 10) {
			t.Fatal("Charge within the reservation says false")
		}
	}
	if n := s.calls.Load() + s.ends.Load() - before; n != 0 {
		t.Fatalf("50 charges within the reservation made %d store calls; want 0", n)
	}
	if err := l.End(v.Context); err != nil {
		t.Fatal(err)
	}
	if n := s.calls.Load() + s.ends.Load() - before; n != 1 {
		t.Fatalf("the end made %d store calls; want 1", n)
	}
}

// TestStreamOverHTTP is a server-sent event stream on a real server, on
// Redis: each event charges its tokens; the stream stops cleanly when
// told no, and the client has every event sent before it. The limit
// ends charged exactly what was sent.
func TestStreamOverHTTP(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	s := newRedisStore(t, c, prefix)
	limit := ratelimit.Limit{Quota: 500, Window: time.Hour, Algorithm: ratelimit.SlidingWindow, Usage: true, Name: "tokens"}
	var mu sync.Mutex
	charged := 0
	one := func(ratelimit.Request) (string, error) { return "one", nil }
	l := newLimiter(t, s, "sse", ratelimit.WithLimits(limit), ratelimit.WithKey(one), ratelimit.WithCost(func(r ratelimit.Request) int {
		n, _ := strconv.Atoi(r.(*http.Request).URL.Query().Get("max_tokens"))
		return max(n, 1)
	}), ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
		if e.Outcome == "charged" {
			mu.Lock()
			charged += e.Cost
			mu.Unlock()
		}
	}))
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 100 {
			fmt.Fprintf(w, "data: 30 tokens\n\n")
			w.(http.Flusher).Flush()
			if !ratelimit.Charge(r.Context(), 30) {
				return
			}
		}
	})))
	defer srv.Close()
	events := func(path string, maxTokens int) (int, string) {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("%s%s?max_tokens=%d", srv.URL, path, maxTokens))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, sc := 0, bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		return n, resp.Header.Get("RateLimit")
	}
	// 500 tokens: the stream reserves 100 and asks for 100 at a time; the
	// asks past 500 are refused, so it stops at the first chunk past 500:
	// 17 chunks, 510 tokens, 10 in debt.
	got, header := events("/first", 100)
	if got != 17 {
		t.Fatalf("the client got %d events; want 17 (510 tokens, the last past 500)", got)
	}
	if want := `"tokens";r=400;t=`; !strings.HasPrefix(header, want) {
		t.Errorf("RateLimit %q; want it to start %q: 500 less the 100 reserved", header, want)
	}
	// The debt of 10 was charged at once, the 500 held at the end: 510
	// in all, exactly.
	waitUntil(t, "the stream's end", func() bool { mu.Lock(); defer mu.Unlock(); return charged >= 510 })
	mu.Lock()
	if charged != 510 {
		t.Errorf("charged %d; want 510, what the stream sent", charged)
	}
	mu.Unlock()
	d, err := l.Peek(httptest.NewRequest("GET", "/?max_tokens=1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Results()[0].Remaining != 0 {
		t.Fatalf("after 510 of 500, Peek says allowed %v, %d left; want a denial, 0", d.Allowed, d.Results()[0].Remaining)
	}
	if n, _ := events("/second", 1); n != 0 {
		t.Fatalf("a stream after the limit was spent sent %d events; want 0 (denied)", n)
	}
}

// TestStreamsAtOnce is the figure of docs/limits.md, on a real
// redis-server with two instances: 100 streams at once, each reserving
// 1,000 tokens against 40,000 an hour and wanting to send 1,500 in
// chunks of 100. Exactly 40 are admitted; each is told no at its 11th
// chunk, when its reservation is spent and the others hold the rest, so
// the limit ends 4,000 in debt, and charged exactly what was sent. A
// stream that ignores the answer sends its 1,500: 20,000 in debt.
func TestStreamsAtOnce(t *testing.T) {
	t.Parallel()
	for _, heed := range []bool{true, false} {
		t.Run(fmt.Sprintf("heeding Charge %v", heed), func(t *testing.T) {
			t.Parallel()
			c, prefix := sharedRedis(t)
			limit := ratelimit.Limit{Quota: 40_000, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Usage: true, Name: "tokens"}
			var limiters [2]*ratelimit.Limiter
			for i := range limiters {
				limiters[i] = newLimiter(t, newRedisStore(t, newClient(t, c.Options().Addr), prefix), "gen", ratelimit.WithLimits(limit))
			}
			ctx := context.Background()
			verdicts := make([]ratelimit.Verdict, 100)
			var wg sync.WaitGroup
			for i := range verdicts {
				wg.Go(func() { verdicts[i] = limiters[i%2].Decide(ratelimit.Key(ctx, "gen", "client", 1000)) })
			}
			wg.Wait()
			admitted := 0
			for _, v := range verdicts {
				if v.Err != nil {
					t.Fatal(v.Err)
				}
				if v.Allowed {
					admitted++
				}
			}
			var mu sync.Mutex
			sent, told := 0, 0
			for i, v := range verdicts {
				if !v.Allowed {
					continue
				}
				wg.Go(func() {
					n, stopped := 0, false
					for n < 1500 {
						n += 100
						if !ratelimit.Charge(v.Context, 100) && heed {
							stopped = true
							break
						}
					}
					if err := limiters[i%2].End(v.Context); err != nil {
						t.Error(err)
					}
					mu.Lock()
					sent += n
					if stopped {
						told++
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			d, err := limiters[0].Peek(ratelimit.Key(ctx, "gen", "client", 1))
			if err != nil {
				t.Fatal(err)
			}
			used, err := c.Get(ctx, prefix+"{gen|*|client}:f3600000/u").Int()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("100 streams at once: %d admitted, %d told no, %d tokens sent, %d charged (%d in debt), %d left",
				admitted, told, sent, used, used-40_000, d.Results()[0].Remaining)
			wantSent, wantTold := 40*1100, 40
			if !heed {
				wantSent, wantTold = 40*1500, 0
			}
			if admitted != 40 || told != wantTold || sent != wantSent || used != sent {
				t.Errorf("admitted %d, told no %d, sent %d, charged %d; want 40, %d, %d, and charged what was sent", admitted, told, sent, used, wantTold, wantSent)
			}
		})
	}
}

// TestStreamClientGone: a stream whose client went away is told no when
// it asks for more, logs nothing (no store failed), and is charged what
// it used, the excess at once and the rest at its end.
func TestStreamClientGone(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	limit := ratelimit.Limit{Quota: 1000, Window: time.Hour, Algorithm: ratelimit.FixedWindow, Usage: true, Name: "tokens"}
	c, prefix := sharedRedis(t)
	l := newLimiter(t, newRedisStore(t, c, prefix), "gone", ratelimit.WithLimits(limit), ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx, cancel := context.WithCancel(context.Background())
	v := l.Decide(ratelimit.Key(ctx, "gen", "client", 100))
	if !v.Allowed {
		t.Fatal("denied")
	}
	cancel()
	if ratelimit.Charge(v.Context, 150) {
		t.Error("a stream whose client went away was given more")
	}
	if err := l.End(v.Context); err != nil {
		t.Fatal(err)
	}
	d, err := l.Peek(ratelimit.Key(context.Background(), "gen", "client", 1))
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Results()[0].Remaining; n != 850 {
		t.Errorf("%d left; want 850: the 150 used, charged", n)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %q; want nothing: the client went away, no store failed", logs.String())
	}
}
