package ratefields_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/ratefields"
	"github.com/ratelimit-go/ratelimit/store"
)

// start is when the Limiters of these tests decide: a month's first
// second, so that the monthly quota resets in 31 days.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// serverDelay caps no reset a Limiter sends: the longest is a month's.
const serverDelay = 32 * 24 * time.Hour

// upstream serves limiter's handler over HTTP; each request takes 100
// units of a limit charged from usage.
func upstream(t *testing.T, opts ...ratelimit.Option) *httptest.Server {
	t.Helper()
	m, err := store.NewMemory(store.MemoryOptions{Clock: func() time.Time { return start }})
	if err != nil {
		t.Fatal(err)
	}
	return upstreamOn(t, m, opts...)
}

func upstreamOn(t *testing.T, s ratelimit.Store, opts ...ratelimit.Option) *httptest.Server {
	t.Helper()
	l, err := ratelimit.New(s, "upstream", opts...)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ratelimit.Charge(r.Context(), 100)
		w.Write([]byte("ok"))
	})))
	t.Cleanup(srv.Close)
	return srv
}

// fetch sends a GET to srv, asking for problem details when
// problemJSON, and parses the response as a client would.
func fetch(t *testing.T, srv *httptest.Server, problemJSON bool) (int, ratefields.Info, []ratefields.Problem) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if problemJSON {
		req.Header.Set("Accept", "application/problem+json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, ratefields.MaxBody+1))
	if err != nil {
		t.Fatal(err)
	}
	info, problems := ratefields.Parse(resp.Header, resp.StatusCode, body, start, serverDelay)
	return resp.StatusCode, info, problems
}

// TestParsesThisModulesLimiter parses what a Limiter sends, on a route
// of four limits: a rate of requests, a rate of tokens charged from
// usage, a monthly quota and a cap of requests in flight, with partition
// keys; allowed, then denied with problem details and with plain text.
func TestParsesThisModulesLimiter(t *testing.T) {
	srv := upstream(t,
		ratelimit.WithLimits(
			ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("api"),
			ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 40_000, Window: time.Minute, Usage: true, Name: "tokens"},
			ratelimit.Limit{Algorithm: ratelimit.Monthly, Quota: 1_000_000, Name: "month"},
			ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 4, Name: "inflight"},
		),
		ratelimit.WithHeaders(ratelimit.Headers{PartitionKey: []byte("a secret of thirty-two bytes....")}),
	)
	var pk string
	month := 31 * 24 * time.Hour
	for i, tc := range []struct {
		problemJSON bool
		status      int
		limits      []ratefields.Limit // with the partition key added
		violated    []string
		retryAfter  time.Duration
	}{
		// The handler reports its tokens before it writes: its headers
		// tell them.
		{false, 200, limits(lim("api", 2, time.Minute, ""), lim("tokens", 39_900, time.Minute, ""), lim("month", 999_999, month, ""), lim("inflight", 3, 0, "")), nil, 0},
		{true, 200, limits(lim("api", 1, time.Minute, ""), lim("tokens", 39_800, time.Minute, ""), lim("month", 999_998, month, ""), lim("inflight", 3, 0, "")), nil, 0},
		{false, 200, limits(lim("api", 0, time.Minute, ""), lim("tokens", 39_700, time.Minute, ""), lim("month", 999_997, month, ""), lim("inflight", 3, 0, "")), nil, 0},
		{true, 429, limits(lim("api", 0, time.Minute, ""), lim("tokens", 39_700, time.Minute, ""), lim("month", 999_997, month, ""), lim("inflight", 4, 0, "")), []string{"api"}, time.Minute},
		{false, 429, limits(lim("api", 0, time.Minute, ""), lim("tokens", 39_700, time.Minute, ""), lim("month", 999_997, month, ""), lim("inflight", 4, 0, "")), nil, time.Minute},
	} {
		status, info, problems := fetch(t, srv, tc.problemJSON)
		if len(problems) != 0 {
			t.Errorf("response %d: got problems %v, want none", i, problems)
		}
		if status != tc.status {
			t.Errorf("response %d: got status %d, want %d", i, status, tc.status)
		}
		if i == 0 && len(info.Policies) > 0 {
			pk = info.Policies[0].Partition
			if len(pk) != 16 {
				t.Fatalf("got a partition key of %d bytes, want 16", len(pk))
			}
		}
		want := ratefields.Info{
			Policies: policies(
				pol("api", 3, time.Minute, "", pk),
				pol("tokens", 40_000, time.Minute, "", pk),
				pol("month", 1_000_000, 0, "", pk),
				pol("inflight", 4, 0, "concurrent-requests", pk),
			),
			Limits:     slices.Clone(tc.limits),
			RetryAfter: tc.retryAfter,
			Limited:    tc.status == 429,
			Violated:   tc.violated,
		}
		for j := range want.Limits {
			want.Limits[j].Partition = pk
		}
		if !equalInfo(info, want) {
			t.Errorf("response %d:\ngot  %+v\nwant %+v", i, info, want)
		}
	}
}

// TestParsesThisModulesBan parses the 429s of a key denied, then banned
// (the problem type abnormal-usage-detected), from a Limiter that sends
// no partition key and no unit.
func TestParsesThisModulesBan(t *testing.T) {
	srv := upstream(t,
		ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Quota: 1, Window: 10 * time.Second, Name: "login"}),
		ratelimit.WithBan(ratelimit.Ban{After: 2, Within: time.Minute, For: time.Hour}),
	)
	for i, tc := range []struct {
		status int
		info   ratefields.Info
	}{
		{200, ratefields.Info{Policies: policies(pol("login", 1, 10*time.Second, "", "")), Limits: limits(lim("login", 0, 10*time.Second, ""))}},
		{429, ratefields.Info{Policies: policies(pol("login", 1, 10*time.Second, "", "")), Limits: limits(lim("login", 0, 10*time.Second, "")),
			RetryAfter: 10 * time.Second, Limited: true, Violated: []string{"login"}}},
		{429, ratefields.Info{Policies: policies(pol("login", 1, 10*time.Second, "", "")), Limits: limits(lim("login", 0, time.Hour, "")),
			RetryAfter: time.Hour, Limited: true, Violated: []string{"login"}}},
	} {
		status, info, problems := fetch(t, srv, true)
		if len(problems) != 0 {
			t.Errorf("response %d: got problems %v, want none", i, problems)
		}
		if status != tc.status {
			t.Errorf("response %d: got status %d, want %d", i, status, tc.status)
		}
		if !equalInfo(info, tc.info) {
			t.Errorf("response %d:\ngot  %+v\nwant %+v", i, info, tc.info)
		}
	}
}

// TestParsesThisModulesFailClosed parses the 503 of a Limiter whose store
// is down and that refuses requests meanwhile: Retry-After and the
// problem type temporary-reduced-capacity, naming the policies it could
// not decide.
func TestParsesThisModulesFailClosed(t *testing.T) {
	srv := upstreamOn(t, downStore{},
		ratelimit.WithLimits(ratelimit.PerMinute(100).Named("api")),
		ratelimit.WithErrorHandler(ratelimit.FailClosed),
		ratelimit.WithLogger(slog.New(slog.DiscardHandler)),
	)
	status, info, problems := fetch(t, srv, true)
	want := ratefields.Info{RetryAfter: time.Second, Limited: true, Violated: []string{"api"}}
	if status != 503 || len(problems) != 0 || !equalInfo(info, want) {
		t.Errorf("got status %d, %+v, problems %v; want 503, %+v, none", status, info, problems, want)
	}
}

// equalInfo compares two Infos field by field, nil and empty slices alike.
func equalInfo(a, b ratefields.Info) bool {
	return slices.Equal(a.Policies, b.Policies) && slices.Equal(a.Limits, b.Limits) &&
		a.RetryAfter == b.RetryAfter && a.Limited == b.Limited && slices.Equal(a.Violated, b.Violated)
}

// downStore is a store whose backend is down.
type downStore struct{}

var errDown = errors.New("ratefields_test: the store is down")

func (downStore) Allow(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errDown
}

func (downStore) Peek(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errDown
}

func (downStore) Reset(context.Context, string, *ratelimit.Limits) error { return errDown }

func (downStore) End(context.Context, string, int, *ratelimit.Limits, ratelimit.Decision) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errDown
}
