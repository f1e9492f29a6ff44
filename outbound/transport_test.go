package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/outbound"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// upstream is a server that counts what it answers, by status.
type upstream struct {
	*httptest.Server
	ok, limited atomic.Int64
}

// newUpstream starts h as an upstream.
func newUpstream(t *testing.T, h http.Handler) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusTooManyRequests {
			u.limited.Add(1)
		} else if rec.status < 300 {
			u.ok.Add(1)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// limited returns a handler of this library, limiting by limits the
// requests of every client together.
func limited(t *testing.T, limits ...ratelimit.Limit) http.Handler {
	t.Helper()
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, "upstream", ratelimit.WithLimits(limits...),
		ratelimit.WithKey(func(ratelimit.Request) (string, error) { return "everyone", nil }))
	if err != nil {
		t.Fatal(err)
	}
	return l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

// newTransport returns a Transport on a Memory store of its own.
func newTransport(t *testing.T, opts ...outbound.Option) *outbound.Transport {
	t.Helper()
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := outbound.New(nil, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// send sends n requests to u through c from workers goroutines, each
// with a context of timeout, and returns how many came back 200 and 429
// and how many RoundTrip refused with an *outbound.Error.
func send(t *testing.T, c *http.Client, u string, workers, n int, timeout time.Duration) (ok, limited, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	for range workers {
		wg.Go(func() {
			for range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
				resp, err := c.Do(req)
				var e *outbound.Error
				mu.Lock()
				switch {
				case errors.As(err, &e):
					refused++
				case err != nil:
					t.Errorf("request: %v", err)
				case resp.StatusCode == http.StatusTooManyRequests:
					limited++
				case resp.StatusCode == http.StatusOK:
					ok++
				}
				mu.Unlock()
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	return ok, limited, refused
}

// TestLearnsFromDraft11: an upstream of this library, 5 requests a
// minute, and 16 workers sending 64 requests without waiting: the first
// request goes alone and teaches the policy; 5 are served, the 59 others
// refused before they are sent, none refused by the upstream; a refusal
// names the upstream's policy and when to retry.
func TestLearnsFromDraft11(t *testing.T) {
	u := newUpstream(t, limited(t, ratelimit.PerMinute(5).Named("api")))
	tr := newTransport(t, outbound.WithoutWaiting())
	ok, limited, refused := send(t, &http.Client{Transport: tr}, u.URL, 16, 64, 10*time.Second)
	if ok != 5 || limited != 0 || refused != 59 {
		t.Errorf("got %d served, %d refused by the upstream, %d refused before sending; want 5, 0, 59", ok, limited, refused)
	}
	if got := u.ok.Load() + u.limited.Load(); got != 5 {
		t.Errorf("the upstream answered %d requests, want 5", got)
	}
	req, _ := http.NewRequest("GET", u.URL, nil)
	_, err := tr.RoundTrip(req)
	var e *outbound.Error
	if !errors.As(err, &e) {
		t.Fatalf("a sixth request: got %v, want an *outbound.Error", err)
	}
	host := strings.TrimPrefix(u.URL, "http://")
	if e.Upstream != host || (e.Policy != "api" && e.Policy != "hold") || e.RetryAfter <= 0 || e.RetryAfter > time.Minute {
		t.Errorf("got %+v, want upstream %s, policy api or hold, and a retry within a minute", e, host)
	}
	if st := tr.Stats(); st.Sent != 5 || st.Refused != 60 || st.Limited != 0 {
		t.Errorf("stats %+v: want 5 sent, 60 refused, 0 limited", st)
	}
}

// TestWaitsForRoom: 8 workers send 30 requests, waiting, to an upstream
// of 10 requests a second: every one is served, in about 3 seconds, and
// the upstream refuses few if any, at most 6 (a request that the
// Transport counts before a slot of the upstream's window ends and the
// upstream after it may be refused; without the Transport, 20 would be).
func TestWaitsForRoom(t *testing.T) {
	u := newUpstream(t, limited(t, ratelimit.PerSecond(10).Named("rps")))
	tr := newTransport(t)
	c := &http.Client{Transport: tr}
	served := 0
	for served < 30 {
		ok, _, refused := send(t, c, u.URL, 8, 30-served, 20*time.Second)
		if refused != 0 {
			t.Fatalf("%d refused, waiting within 20s", refused)
		}
		served += ok
	}
	if got := u.limited.Load(); got > 6 {
		t.Errorf("the upstream refused %d of %d requests; want at most 6", got, u.limited.Load()+u.ok.Load())
	}
	if st := tr.Stats(); st.Waited == 0 {
		t.Errorf("stats %+v: no request waited", st)
	}
}

// TestRetryAfterOnly: an upstream that says nothing but a 429's
// Retry-After, in seconds or as a date: the next requests are held back
// until then, refused at once without waiting, and sent once it has
// passed when waiting.
func TestRetryAfterOnly(t *testing.T) {
	for _, form := range []string{"seconds", "date"} {
		t.Run(form, func(t *testing.T) {
			var calls atomic.Int64
			var third atomic.Int64 // when the third call came, in Unix ns
			u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch calls.Add(1) {
				case 2:
				case 3:
					third.Store(time.Now().UnixNano())
					return
				default:
					return
				}
				if form == "seconds" {
					w.Header().Set("Retry-After", "2")
				} else {
					w.Header().Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
				}
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fast, err := outbound.New(nil, s, outbound.WithoutWaiting())
			if err != nil {
				t.Fatal(err)
			}
			ok, limited, refused := send(t, &http.Client{Transport: fast}, u.URL, 1, 6, 5*time.Second)
			if ok != 1 || limited != 1 || refused != 4 || calls.Load() != 2 {
				t.Fatalf("got %d served, %d limited, %d refused, %d calls; want 1, 1, 4, 2", ok, limited, refused, calls.Load())
			}
			req, _ := http.NewRequest("GET", u.URL, nil)
			asked := time.Now() // the hold ends no sooner than RetryAfter from here
			_, err = fast.RoundTrip(req)
			var e *outbound.Error
			if !errors.As(err, &e) || e.Policy != "hold" || e.RetryAfter <= 0 || e.RetryAfter > 3*time.Second {
				t.Fatalf("got %v, want a hold of at most 3s", err)
			}
			// The same budget, through another Transport on the store, one
			// that waits: it sends once the hold has passed.
			slow, err := outbound.New(nil, s)
			if err != nil {
				t.Fatal(err)
			}
			if ok, _, _ := send(t, &http.Client{Transport: slow}, u.URL, 1, 1, 10*time.Second); ok != 1 || calls.Load() != 3 {
				t.Errorf("waiting: got %d served, %d calls; want 1 and 3", ok, calls.Load())
			}
			if early := asked.Add(e.RetryAfter).Sub(time.Unix(0, third.Load())); early > time.Millisecond {
				t.Errorf("the request waiting was sent %v before the hold ended", early)
			}
		})
	}
}

// TestXRateLimitOnly: an upstream that sends only X-RateLimit-*, its
// reset a Unix time as GitHub sends it: the first response teaches 3
// per the window its reset shows, counted ahead, and once Remaining is
// 0, nothing is sent until the reset. (TestRealUpstreams runs
// express-rate-limit's X-RateLimit-* with many workers.)
func TestXRateLimitOnly(t *testing.T) {
	var calls atomic.Int64
	reset := time.Now().Add(30 * time.Second).Unix()
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("X-RateLimit-Limit", "3")
		w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(max(3-n, 0), 10))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		if n > 3 {
			w.WriteHeader(http.StatusForbidden) // as GitHub answers
		}
	}))
	tr := newTransport(t, outbound.WithoutWaiting())
	ok, _, refused := send(t, &http.Client{Transport: tr}, u.URL, 1, 20, 5*time.Second)
	if ok != 3 || refused != 17 || calls.Load() != 3 {
		t.Errorf("got %d served, %d refused, %d calls; want 3, 17, 3", ok, refused, calls.Load())
	}
	req, _ := http.NewRequest("GET", u.URL, nil)
	b, err := tr.Budget(context.Background(), req)
	if err != nil || len(b.Limits) != 1 || b.Limits[0].Quota != 3 || b.Limits[0].Window < 29*time.Second || b.Limits[0].Window > 30*time.Second || b.Held == 0 {
		t.Errorf("Budget: %+v, %v; want 3 per the window the reset shows (about 30s), held", b, err)
	}
}

// TestMalformedFieldsIgnored: an upstream whose fields are malformed,
// duplicated or hostile: nothing is held back on their word, every
// request is sent, and the reasons are counted.
func TestMalformedFieldsIgnored(t *testing.T) {
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Retry-After"] = []string{"soon"}
		h["Ratelimit"] = []string{`"api";r=-4;t=banana`}
		h["Ratelimit-Policy"] = []string{`"api";q=0;w=-60`}
		h["X-Ratelimit-Remaining"] = []string{"0", "7"}
		h["X-Ratelimit-Reset"] = []string{"-5"}
	}))
	tr := newTransport(t, outbound.WithoutWaiting())
	ok, limited, refused := send(t, &http.Client{Transport: tr}, u.URL, 4, 40, 5*time.Second)
	if ok != 40 || limited != 0 || refused != 0 {
		t.Errorf("got %d served, %d limited, %d refused; want 40, 0, 0", ok, limited, refused)
	}
	st := tr.Stats()
	total := int64(0)
	for _, n := range st.Ignored {
		total += n
	}
	if total < 40 {
		t.Errorf("ignored %v: want the reasons of at least 40 responses counted", st.Ignored)
	}
}

// TestRetryAfterCapped: a Retry-After of a year holds the budget back for
// WithMaxRetryAfter, and says so.
func TestRetryAfterCapped(t *testing.T) {
	var calls atomic.Int64
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(365*24*3600))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	tr := newTransport(t, outbound.WithoutWaiting(), outbound.WithMaxRetryAfter(2*time.Second))
	send(t, &http.Client{Transport: tr}, u.URL, 1, 1, 5*time.Second)
	req, _ := http.NewRequest("GET", u.URL, nil)
	_, err := tr.RoundTrip(req)
	var e *outbound.Error
	if !errors.As(err, &e) || e.RetryAfter > 2*time.Second {
		t.Fatalf("got %v, want a hold of at most 2s", err)
	}
	if st := tr.Stats(); st.Ignored["capped"] == 0 {
		t.Errorf("ignored %v: want the cap counted", st.Ignored)
	}
}

// TestMonthlyQuotaNotCapped: an upstream with a monthly quota, whose
// reset is weeks away, is not counted as capped on every response while
// the quota has units left; spent, it holds the budget back for
// WithMaxRetryAfter, counted as capped once, and the refusal says when
// to retry in words a person reads.
func TestMonthlyQuotaNotCapped(t *testing.T) {
	var spent atomic.Bool
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"month";q=1000000;w=2592000`)
		if spent.Load() {
			w.Header().Set("RateLimit", `"month";r=0;t=1814400`)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("RateLimit", `"month";r=999000;t=1814400`)
	}))
	tr := newTransport(t, outbound.WithoutWaiting(), outbound.WithMaxRetryAfter(2*time.Second))
	client := &http.Client{Transport: tr}
	if ok, _, _ := send(t, client, u.URL, 1, 20, 5*time.Second); ok != 20 {
		t.Fatalf("%d of 20 requests went through, want all", ok)
	}
	if st := tr.Stats(); st.Ignored["capped"] != 0 {
		t.Errorf("ignored %v after 20 responses of a monthly quota with units left: want nothing capped", st.Ignored)
	}
	spent.Store(true)
	send(t, client, u.URL, 1, 1, 5*time.Second)
	req, _ := http.NewRequest("GET", u.URL, nil)
	_, err := tr.RoundTrip(req)
	var e *outbound.Error
	if !errors.As(err, &e) || e.RetryAfter > 2*time.Second || e.RetryAfter <= 0 {
		t.Fatalf("got %v, want a hold of at most 2s", err)
	}
	if st := tr.Stats(); st.Ignored["capped"] != 1 {
		t.Errorf("ignored %v: want the cut hold counted as capped once", st.Ignored)
	}
}

// TestErrorForPeople: an Error's text rounds its wait up to what a
// person reads.
func TestErrorForPeople(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{56999978 * time.Microsecond, "retry in 57s"},
		{345600 * time.Microsecond, "retry in 346ms"},
		{1234 * time.Millisecond, "retry in 1.3s"},
		{2*time.Hour + 3*time.Minute + 4500*time.Millisecond, "retry in 2h3m5s"},
		{time.Minute, "retry in 1m0s"},
	} {
		e := &outbound.Error{Upstream: "api.example.com", Policy: "month", RetryAfter: tt.d}
		if got := e.Error(); !strings.HasSuffix(got, tt.want) {
			t.Errorf("RetryAfter %v: got %q, want it to end %q", tt.d, got, tt.want)
		}
	}
}

// TestDeclaredLimits: limits declared for an upstream that publishes
// none, 3 requests and 100 tokens a minute, tokens read from each
// response: the first response's 60 tokens leave room for one more
// request, which puts the tokens in debt; the third is refused by the
// tokens.
func TestDeclaredLimits(t *testing.T) {
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Tokens", "60")
	}))
	host := strings.TrimPrefix(u.URL, "http://")
	tr := newTransport(t, outbound.WithoutWaiting(),
		outbound.WithLimits(host, ratelimit.PerMinute(3).Named("rpm"),
			ratelimit.Limit{Quota: 100, Window: time.Minute, Usage: true, Name: "tpm"}),
		outbound.WithUsage(func(resp *http.Response) int {
			n, _ := strconv.Atoi(resp.Header.Get("X-Tokens"))
			return n
		}))
	ok, _, refused := send(t, &http.Client{Transport: tr}, u.URL, 1, 3, 5*time.Second)
	if ok != 2 || refused != 1 {
		t.Fatalf("got %d served, %d refused; want 2, 1", ok, refused)
	}
	req, _ := http.NewRequest("GET", u.URL, nil)
	_, err := tr.RoundTrip(req)
	var e *outbound.Error
	if !errors.As(err, &e) || e.Policy != "tpm" {
		t.Errorf("got %v, want a refusal by tpm", err)
	}
}

// TestOptionsRefused: wrong options are refused, naming what is wrong.
func TestOptionsRefused(t *testing.T) {
	s, _ := store.NewMemory(store.MemoryOptions{})
	for _, tt := range []struct {
		opt  outbound.Option
		want string
	}{
		{outbound.WithLimits(""), "upstream is empty"},
		{outbound.WithLimits("https://api.example.com", ratelimit.PerMinute(1)), `the upstream is a URL; give its host, "api.example.com"`},
		{outbound.WithLimits("http://localhost:8080/v1", ratelimit.PerMinute(1)), `give its host, "localhost:8080"`},
		{outbound.WithLimits("api.example.com/v1", ratelimit.PerMinute(1)), `"/" is not a host`},
		{outbound.WithLimits("a.example", ratelimit.Limit{Quota: 0, Window: time.Minute}), "Quota"},
		{outbound.WithLimits("a.example", ratelimit.PerMinute(1).Named("hold")), `"hold"`},
		{outbound.WithMaxWait(0), "WithMaxWait"},
		{outbound.WithMaxRetryAfter(time.Millisecond), "WithMaxRetryAfter"},
		{outbound.WithCost(nil), "WithCost"},
		{outbound.WithUsage(nil), "WithUsage"},
		{outbound.WithPartition(nil), "WithPartition"},
	} {
		_, err := outbound.New(nil, s, tt.opt)
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want ErrInvalid naming %s", err, tt.want)
		}
	}
	for _, upstream := range []string{"api.example.com", "localhost:8080", "[::1]:8080", "192.0.2.1"} {
		if _, err := outbound.New(nil, s, outbound.WithLimits(upstream, ratelimit.PerMinute(1))); err != nil {
			t.Errorf("WithLimits(%q): %v, want it accepted", upstream, err)
		}
	}
	if _, err := outbound.New(nil, nil); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("a nil store: got %v, want ErrInvalid", err)
	}
}

// TestRefusedBodyClosed: a request refused before it is sent has its
// body closed, as a RoundTripper must.
func TestRefusedBodyClosed(t *testing.T) {
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	tr := newTransport(t, outbound.WithoutWaiting())
	send(t, &http.Client{Transport: tr}, u.URL, 1, 1, 5*time.Second)
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest("POST", u.URL, body)
	if _, err := tr.RoundTrip(req); err == nil || body.closed != 1 {
		t.Errorf("got %v with the body closed %d times; want a refusal and 1", err, body.closed)
	}
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestCatchesUp: another client spends the same quota of an upstream of
// 10 a minute: once a response says less is left than the Transport
// counted, it takes the difference, and sends no more than is left.
func TestCatchesUp(t *testing.T) {
	for name, h := range map[string]http.Handler{
		"draft 11":      limited(t, ratelimit.PerMinute(10).Named("api")),
		"X-RateLimit-*": xRateLimit(10, time.Minute), // a policy it names not
	} {
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t, h)
			tr := newTransport(t, outbound.WithoutWaiting())
			c := &http.Client{Transport: tr}
			if ok, _, _ := send(t, c, u.URL, 1, 1, 5*time.Second); ok != 1 {
				t.Fatal("the first request was not served")
			}
			if ok, _, _ := send(t, http.DefaultClient, u.URL, 1, 5, 5*time.Second); ok != 5 {
				t.Fatal("the other client's 5 were not served")
			}
			// 6 counted upstream, 1 here: this one is told 3 are left.
			if ok, _, _ := send(t, c, u.URL, 1, 1, 5*time.Second); ok != 1 {
				t.Fatal("the request told 3 are left was not served")
			}
			// 8 at once, which no answer can stop in time.
			ok, limited, refused := send(t, c, u.URL, 8, 10, 5*time.Second)
			if ok != 3 || limited != 0 || refused != 7 {
				t.Errorf("got %d served, %d refused by the upstream, %d refused before sending; want 3, 0, 7", ok, limited, refused)
			}
		})
	}
}

// xRateLimit is an upstream that allows quota requests in one window
// from now, and says so in X-RateLimit-* alone, with a reset as a Unix
// time (as express-rate-limit's legacy headers and GitHub).
func xRateLimit(quota int64, window time.Duration) http.Handler {
	var n atomic.Int64
	reset := strconv.FormatInt(time.Now().Add(window).Unix(), 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		w.Header().Set("X-RateLimit-Limit", strconv.FormatInt(quota, 10))
		w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(max(quota-k, 0), 10))
		w.Header().Set("X-RateLimit-Reset", reset)
		if k > quota {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
}

// TestFreshProcessFacingASpentUpstream: a fresh Transport, 16 workers at
// once, and an upstream whose quota is spent for the next 30 seconds: the
// first request goes alone, as the probe, and its refusal holds every
// request waiting on it, so that the upstream sees that one request, not
// one per worker woken before the hold was written; a second fresh
// process then sends none.
func TestFreshProcessFacingASpentUpstream(t *testing.T) {
	var hits atomic.Int64
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("RateLimit-Policy", `"api";q=10;w=60`)
		w.Header().Set("RateLimit", `"api";r=0;t=30`)
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	c := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr})
	t.Cleanup(func() { c.Close() })
	for round := range 10 {
		for i, opts := range [][]outbound.Option{{outbound.WithoutWaiting()}, {outbound.WithMaxWait(time.Second)}} {
			hits.Store(0)
			s, err := store.NewRedis(c, store.RedisOptions{Prefix: fmt.Sprintf("fresh%d-%d-%d:", time.Now().UnixNano(), round, i)})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := outbound.New(nil, s, opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, limited, refused := send(t, &http.Client{Transport: tr}, u.URL, 16, 16, 5*time.Second)
			if n := hits.Load(); n != 1 || limited != 1 || refused != 15 {
				t.Errorf("round %d, %d: the upstream saw %d requests (%d refused by it, %d before they were sent), want 1: the probe alone", round, i, n, limited, refused)
			}
			// A second process, fresh too, sends nothing: the hold and what
			// the first learned are in the store.
			other, err := outbound.New(nil, s, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, refused := send(t, &http.Client{Transport: other}, u.URL, 16, 16, 5*time.Second); hits.Load() != 1 || refused != 16 {
				t.Errorf("round %d, %d: a second process: the upstream saw %d requests in all, %d refused before they were sent; want 1 and 16", round, i, hits.Load(), refused)
			}
		}
	}
}

// TestBudgetAndLift: after a 429 with Retry-After, the budget says it is
// held, for how long and why; Lift ends the hold in every process of the
// store, and the next request is sent. On the Memory store and Redis.
func TestBudgetAndLift(t *testing.T) {
	srv := redistest.Shared(t)
	for name, newStore := range map[string]func(t *testing.T) ratelimit.Store{
		"memory": func(t *testing.T) ratelimit.Store {
			s, err := store.NewMemory(store.MemoryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis": func(t *testing.T) ratelimit.Store {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { c.Close() })
			s, err := store.NewRedis(c, store.RedisOptions{Prefix: "lift-" + t.Name() + ":"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int64
			u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := calls.Add(1); n == 1 || n == 3 {
					w.Header().Set("Retry-After", "30")
					w.WriteHeader(http.StatusTooManyRequests)
				}
			}))
			s := newStore(t)
			tr, err := outbound.New(nil, s, outbound.WithoutWaiting())
			if err != nil {
				t.Fatal(err)
			}
			other, err := outbound.New(nil, s, outbound.WithoutWaiting()) // another process of the store
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			req, _ := http.NewRequest("GET", u.URL, nil)
			if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 429 {
				t.Fatalf("first request: %v, %v; want the upstream's 429", resp, err)
			}
			b, err := tr.Budget(ctx, req)
			if err != nil || !b.Known || b.Held < 29*time.Second || b.Held > 30*time.Second || !strings.Contains(b.Why, "429 with Retry-After") {
				t.Fatalf("Budget after the 429: %+v, %v; want held for about 30s by the 429", b, err)
			}
			if _, err := other.RoundTrip(req); !errors.As(err, new(*outbound.Error)) {
				t.Fatalf("another Transport of the store during the hold: %v, want it refused", err)
			}
			if err := other.Lift(ctx, req); err != nil {
				t.Fatal(err)
			}
			if b, err := tr.Budget(ctx, req); err != nil || b.Held != 0 {
				t.Errorf("Budget after Lift: %+v, %v; want not held", b, err)
			}
			if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 200 || calls.Load() != 2 {
				t.Errorf("after Lift: %v, %v, %d calls; want the request sent and served", resp, err, calls.Load())
			}
			// The same Retry-After again, most likely ending in the same
			// second as the hold lifted: it holds again.
			if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 429 {
				t.Fatalf("third request: %v, %v; want the upstream's 429", resp, err)
			}
			if b, err := other.Budget(ctx, req); err != nil || b.Held < 29*time.Second {
				t.Errorf("Budget after a second 429: %+v, %v; want held again for about 30s", b, err)
			}
		})
	}
}

// slowHold is a store whose End of the hold (see outbound's hold.go)
// waits until release is closed, having closed entered.
type slowHold struct {
	ratelimit.Store
	entered, release chan struct{}
	once             sync.Once
}

func (s *slowHold) End(ctx context.Context, key string, usage int, limits *ratelimit.Limits, d ratelimit.Decision) (ratelimit.Decision, error) {
	if all := limits.All(); len(all) == 1 && all[0].Name == "hold" {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.Store.End(ctx, key, usage, limits, d)
}

// TestBridgeHoldsUntilTheStoreDoes: from the moment a 429 comes to the
// moment the store holds the budget, a request of the same process is
// not sent: it waits for the hold, or, told not to wait, is refused.
func TestBridgeHoldsUntilTheStoreDoes(t *testing.T) {
	var calls atomic.Int64
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	mem, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &slowHold{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
	host := strings.TrimPrefix(u.URL, "http://")
	tr, err := outbound.New(nil, s, outbound.WithoutWaiting(), outbound.WithLimits(host, ratelimit.PerMinute(1000))) // known: no probe
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", u.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err == nil && resp.StatusCode != 429 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		first <- err
	}()
	<-s.entered // the 429 has come; the store does not hold yet
	req, _ := http.NewRequest("GET", u.URL, nil)
	var refused *outbound.Error
	if _, err := tr.RoundTrip(req); !errors.As(err, &refused) || refused.Policy != "hold" || refused.RetryAfter < 29*time.Second {
		t.Errorf("a request while the hold is written: %v; want it refused by the hold, for about 30s", err)
	}
	close(s.release)
	if err := <-first; err != nil {
		t.Fatalf("first request: %v; want the upstream's 429", err)
	}
	if _, err := tr.RoundTrip(req); !errors.As(err, &refused) || refused.Policy != "hold" {
		t.Errorf("a request once the store holds: %v; want it refused by the hold", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the upstream got %d requests, want 1: none after its 429", n)
	}
}

// TestSharedLearning: what one process learned of an upstream is in the
// store (the Redis store's, or a Fallback's over it), so that another
// process knows the budget before its first request, sends no probe of
// its own, and counts against the same budget; an upstream that
// publishes nothing is known as such too.
func TestSharedLearning(t *testing.T) {
	srv := redistest.Shared(t)
	for _, name := range []string{"redis", "fallback"} {
		t.Run(name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() })
			r, err := store.NewRedis(c, store.RedisOptions{Prefix: "shared-" + t.Name() + ":"})
			if err != nil {
				t.Fatal(err)
			}
			var s ratelimit.Store = r
			if name == "fallback" {
				f, err := store.NewFallback(r, store.FallbackOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				s = f
			}
			ctx := context.Background()
			for _, up := range []struct {
				name    string
				handler http.Handler
				want    []ratelimit.Limit
			}{
				{"publishing", limited(t, ratelimit.PerMinute(20).Named("api")), []ratelimit.Limit{{Quota: 20, Window: time.Minute, Name: "api"}}},
				{"silent", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil},
			} {
				u := newUpstream(t, up.handler)
				first, err := outbound.New(nil, s, outbound.WithoutWaiting())
				if err != nil {
					t.Fatal(err)
				}
				second, err := outbound.New(nil, s, outbound.WithoutWaiting()) // another process of the store
				if err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequest("GET", u.URL, nil)
				if resp, err := first.RoundTrip(req); err != nil || resp.StatusCode != 200 {
					t.Fatalf("%s: first request: %v, %v", up.name, resp, err)
				}
				b, err := second.Budget(ctx, req)
				if err != nil || !b.Known || !slices.Equal(b.Limits, up.want) {
					t.Fatalf("%s: the other process's Budget before its first request: %+v, %v; want known, with %v", up.name, b, err, up.want)
				}
				if up.want == nil {
					continue
				}
				// The other process spends the same budget: 19 left, and no
				// probe goes alone first.
				var wg sync.WaitGroup
				var sent, refused atomic.Int64
				for range 25 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						req, _ := http.NewRequest("GET", u.URL, nil)
						resp, err := second.RoundTrip(req)
						switch {
						case errors.As(err, new(*outbound.Error)):
							refused.Add(1)
						case err != nil || resp.StatusCode != 200:
							t.Errorf("%s: %v, %v", up.name, resp, err)
						default:
							sent.Add(1)
						}
					}()
				}
				wg.Wait()
				if sent.Load() != 19 || refused.Load() != 6 || u.limited.Load() != 0 {
					t.Errorf("%s: the other process sent %d and refused %d, the upstream refused %d; want 19, 6 and 0", up.name, sent.Load(), refused.Load(), u.limited.Load())
				}
			}
		})
	}
}

// TestSharedWindowKept: a window-less policy (X-RateLimit-*) whose window
// another process inferred keeps that window in a process whose own
// responses, later in the window, show a shorter reset: a window that
// changed would start the limit's count afresh.
func TestSharedWindowKept(t *testing.T) {
	var resetAt atomic.Int64
	resetAt.Store(time.Now().Add(time.Minute).Unix())
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "20")
		w.Header().Set("X-RateLimit-Remaining", "10")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(resetAt.Load(), 10))
	}))
	c := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr})
	t.Cleanup(func() { c.Close() })
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: "window-" + strconv.FormatInt(time.Now().UnixNano(), 10) + ":"})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := outbound.New(nil, s)
	second, _ := outbound.New(nil, s) // another process of the store
	ctx := context.Background()
	req, _ := http.NewRequest("GET", u.URL, nil)
	if _, err := first.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	learned, err := first.Budget(ctx, req)
	if err != nil || len(learned.Limits) != 1 || learned.Limits[0].Window < 59*time.Second {
		t.Fatalf("the first process learned %+v, %v; want a window of about a minute", learned, err)
	}
	resetAt.Store(time.Now().Add(30 * time.Second).Unix()) // later in the window
	if _, err := second.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if b, err := second.Budget(ctx, req); err != nil || !slices.Equal(b.Limits, learned.Limits) {
		t.Errorf("the second process's limits after its own response: %+v, %v; want the window the first kept, %v", b, err, learned.Limits)
	}
}

// peekTogether holds back each of the first two Peeks of the hold until
// both have come: two processes that read the hold before either writes.
type peekTogether struct {
	ratelimit.Store
	n    atomic.Int64
	both chan struct{}
}

func (s *peekTogether) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	if all := limits.All(); len(all) == 1 && all[0].Name == "hold" {
		switch s.n.Add(1) {
		case 1:
			<-s.both
		case 2:
			close(s.both)
		}
	}
	return s.Store.Peek(ctx, key, cost, limits)
}

// TestHoldsOnceWhenTwoWriteAtOnce: two processes on one redis-server,
// told by the upstream to wait (2s and 3s, so that neither's claim of
// the hold's end keeps the other out), both read the hold before either
// writes it. Each charged
// the hold what it read, so that it held for as long as the hold is
// deep (about 18 minutes); the second to write now finds the hold far
// past what it was told, and writes it anew: the budget is held for
// seconds.
func TestHoldsOnceWhenTwoWriteAtOnce(t *testing.T) {
	u := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", r.Header.Get("X-Retry"))
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	c := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr})
	t.Cleanup(func() { c.Close() })
	r, err := store.NewRedis(c, store.RedisOptions{Prefix: fmt.Sprintf("together%d:", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	s := &peekTogether{Store: r, both: make(chan struct{})}
	host := strings.TrimPrefix(u.URL, "http://")
	var trs [2]*outbound.Transport
	for i := range trs {
		if trs[i], err = outbound.New(nil, s, outbound.WithoutWaiting(), outbound.WithLimits(host, ratelimit.PerMinute(1000))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i, tr := range trs {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", u.URL, nil)
			req.Header.Set("X-Retry", strconv.Itoa(2+i))
			resp, err := tr.RoundTrip(req)
			if err != nil || resp.StatusCode != 429 {
				t.Errorf("process %d: %v; want the upstream's 429", i, err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	req, _ := http.NewRequest("GET", u.URL, nil)
	b, err := trs[0].Budget(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held %v, %d peeks of the hold", b.Held, s.n.Load())
	if b.Held < time.Second || b.Held > 4*time.Second {
		t.Errorf("the budget is held for %v; want the 2 or 3 seconds the upstream said", b.Held)
	}
}
