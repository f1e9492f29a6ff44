package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

func TestAlgorithmString(t *testing.T) {
	tests := []struct {
		a    ratelimit.Algorithm
		want string
	}{
		{ratelimit.SlidingWindow, "sliding-window"},
		{ratelimit.FixedWindow, "fixed-window"},
		{ratelimit.SlidingLog, "sliding-log"},
		{ratelimit.TokenBucket, "token-bucket"},
		{ratelimit.Daily, "daily"},
		{ratelimit.Weekly, "weekly"},
		{ratelimit.Monthly, "monthly"},
		{ratelimit.Algorithm(9), "Algorithm(9)"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("Algorithm(%d).String(): got %q, want %q", uint8(tt.a), got, tt.want)
		}
	}
	if got := (ratelimit.Limit{}).Algorithm; got != ratelimit.SlidingWindow {
		t.Errorf("the zero Limit's algorithm: got %v, want sliding-window", got)
	}
}

// TestTokenBucketRefillIsExact: a token bucket refills in exact integer
// steps, whatever its rate, so a token comes back at the first whole
// microsecond its share of the window has passed, not a rounding later or
// earlier. The store's clock is pinned.
func TestTokenBucketRefillIsExact(t *testing.T) {
	tests := []struct {
		limit ratelimit.Limit
		full  time.Duration // from empty to full
		token time.Duration // from empty to one token
	}{
		{ratelimit.PerSecond(10).Using(ratelimit.TokenBucket), time.Second, 100 * time.Millisecond},
		{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 3, Window: time.Second, Burst: 5}, 1_666_667 * time.Microsecond, 333_334 * time.Microsecond},
		{ratelimit.PerMinute(7).Using(ratelimit.TokenBucket), time.Minute, 8_571_429 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.limit.String(), func(t *testing.T) {
			start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			s, err := store.NewMemory(store.MemoryOptions{Clock: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			limits, err := ratelimit.NewLimits(tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			allow := func(cost int) ratelimit.Result {
				t.Helper()
				d, err := s.Allow(context.Background(), "k", cost, limits)
				if err != nil {
					t.Fatalf("Allow: %v", err)
				}
				return d.Results()[0]
			}
			burst := capacity(tt.limit)
			if r := allow(burst); !r.Allowed || r.Remaining != 0 || r.ResetAfter != tt.full {
				t.Fatalf("taking the whole burst: got %+v, want allowed, 0 remaining, reset after %v", r, tt.full)
			}
			now = start.Add(tt.token - time.Microsecond)
			if r := allow(1); r.Allowed || r.RetryAfter != time.Microsecond {
				t.Fatalf("1µs before a token is back: got %+v, want denied, retry after 1µs", r)
			}
			now = start.Add(tt.token)
			if r := allow(1); !r.Allowed || r.Remaining != 0 {
				t.Fatalf("when a token is back: got %+v, want allowed, 0 remaining", r)
			}
		})
	}
}

// The bounds a Limit's fields must keep; see its documentation.
const (
	maxQuota           = 1<<53 - 1
	maxSlots           = 1000
	maxSlidingLogQuota = 100_000
)

func TestNewLimitsAcceptsValidLimits(t *testing.T) {
	valid := []ratelimit.Limit{
		ratelimit.PerMinute(1),
		ratelimit.Limit{Quota: 1, Window: time.Millisecond},
		ratelimit.Limit{Quota: maxQuota, Window: time.Hour}.Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(maxSlidingLogQuota).Using(ratelimit.SlidingLog),
		{Quota: 1, Window: time.Second, Precision: time.Second / maxSlots},
		{Quota: 1, Window: 3 * time.Millisecond, Precision: 1500 * time.Microsecond},
		ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: 24 * time.Hour, Burst: 100_000},
		ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Second, Burst: maxQuota / 1_000_000},
		ratelimit.PerMinute(1).Named(strings.Repeat("n", 64)),
		ratelimit.PerMinute(1).Named(` !"#$%&'()*+,-./0123456789:;<=>?@AZ[\]^_` + "`az{|}~"),
	}
	for _, l := range valid {
		s, err := ratelimit.NewLimits(l)
		if err != nil {
			t.Errorf("%v: got %v, want nil", l, err)
			continue
		}
		if all := s.All(); len(all) != 1 || all[0] != l {
			t.Errorf("%v: the set holds %v", l, all)
		}
	}
}

func TestNewLimitsReportsTheField(t *testing.T) {
	tests := []struct {
		name   string
		limits []ratelimit.Limit
		want   string
	}{
		{"none", nil, "no limits given"},
		{"zero limit", []ratelimit.Limit{{}}, "limits[0].Quota"},
		{"unknown algorithm", []ratelimit.Limit{ratelimit.PerMinute(1).Using(ratelimit.Algorithm(200))}, "limits[0].Algorithm"},
		{"calendar with a window", []ratelimit.Limit{ratelimit.PerMinute(1).Using(ratelimit.Daily)}, "limits[0].Window"},
		{"unknown zone", []ratelimit.Limit{{Algorithm: ratelimit.Monthly, Quota: 1, Zone: "Mars/Olympus_Mons"}}, "limits[0].Zone"},
		{"zone that is no name", []ratelimit.Limit{{Algorithm: ratelimit.Monthly, Quota: 1, Zone: "../../etc/passwd x"}}, "limits[0].Zone"},
		{"zone without a calendar", []ratelimit.Limit{{Quota: 1, Window: time.Second, Zone: "UTC"}}, "limits[0].Zone"},
		{"weekday of a daily limit", []ratelimit.Limit{{Algorithm: ratelimit.Daily, Quota: 1, Weekday: time.Monday}}, "limits[0].Weekday"},
		{"weekday out of range", []ratelimit.Limit{{Algorithm: ratelimit.Weekly, Quota: 1, Weekday: 7}}, "limits[0].Weekday"},
		{"burst of a calendar", []ratelimit.Limit{{Algorithm: ratelimit.Weekly, Quota: 1, Burst: 2}}, "limits[0].Burst"},
		{"negative cost", []ratelimit.Limit{{Quota: 5, Window: time.Second, Cost: -1}}, "limits[0].Cost"},
		{"cost past the capacity", []ratelimit.Limit{{Quota: 5, Window: time.Second, Cost: 6}}, "limits[0].Cost"},
		{"cost of a usage limit", []ratelimit.Limit{{Quota: 5, Window: time.Second, Cost: 1, Usage: true}}, "limits[0].Cost"},
		{"cost of slots", []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 5, Cost: 1}}, "limits[0].Cost"},
		{"usage of slots", []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 5, Usage: true}}, "limits[0].Usage"},
		{"usage of a sliding log", []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Quota: 5, Window: time.Second, Usage: true}}, "limits[0].Usage"},
		{"a leased sliding log", []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Quota: 5, Window: time.Second, Leased: true}}, "limits[0].Leased cannot lease a sliding-log"},
		{"a leased calendar", []ratelimit.Limit{{Algorithm: ratelimit.Monthly, Quota: 5, Leased: true}}, "limits[0].Leased is for fixed-window"},
		{"leased slots", []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 5, Leased: true}}, "limits[0].Leased is for fixed-window"},
		{"leased and charged from usage", []ratelimit.Limit{{Quota: 5, Window: time.Second, Leased: true, Usage: true}}, "limits[0].Leased cannot be set with Usage"},
		{"leased and not", []ratelimit.Limit{{Quota: 50, Window: time.Second, Leased: true}, {Quota: 5, Window: time.Minute}}, "limits[0] is leased and limits[1] is not"},
		{"a leased bucket within its refill", []ratelimit.Limit{{Algorithm: ratelimit.TokenBucket, Quota: 100, Window: time.Second, Burst: 10, Leased: true}}, "limits[0].Burst 10 is too small to lease: a slice is taken only from what the bucket holds beyond its refill in 100ms (10), and at most an eighth of it, so it would never take one; raise Burst to at least 19"},
		{"a leased bucket of costly requests", []ratelimit.Limit{{Algorithm: ratelimit.TokenBucket, Quota: 80, Window: time.Minute, Cost: 10, Leased: true}}, "raise Burst to at least 91"},
		{"a leased quota too small", []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Quota: 8, Window: time.Minute, Leased: true}}, "limits[0].Quota 8 is too small to lease"},
		{"a leased window too short", []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Quota: 1000, Window: 9 * time.Millisecond, Leased: true}}, "limits[0].Window 9ms is too short to lease"},
		{"leased slots too fine", []ratelimit.Limit{{Quota: 1000, Window: time.Second, Precision: 5 * time.Millisecond, Leased: true}}, "limits[0].Precision 5ms is too fine to lease"},
		{"too many slots", []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 10_001}}, "limits[0].Quota"},
		{"a slot life too short", []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 5, Window: 100 * time.Millisecond}}, "limits[0].Window"},
		{"two concurrent limits", []ratelimit.Limit{{Algorithm: ratelimit.Concurrent, Quota: 5}, {Algorithm: ratelimit.Concurrent, Quota: 2, Window: time.Second}}, "would count into one place"},
		{"two calendars of one zone", []ratelimit.Limit{{Algorithm: ratelimit.Monthly, Quota: 1}, {Algorithm: ratelimit.Monthly, Quota: 2, Zone: "UTC"}}, "would count into one place"},
		{"quota too large", []ratelimit.Limit{ratelimit.Limit{Quota: maxQuota + 1, Window: time.Hour}.Using(ratelimit.FixedWindow)}, "limits[0].Quota"},
		{"window under a millisecond", []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: time.Microsecond}}, "limits[0].Window"},
		{"window not in whole milliseconds", []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: 1500 * time.Microsecond}}, "limits[0].Window"},
		{"precision not in whole microseconds", []ratelimit.Limit{{Quota: 1, Window: time.Minute, Precision: 1500 * time.Nanosecond}}, "limits[0].Precision"},
		{"precision not dividing the window", []ratelimit.Limit{{Quota: 1, Window: time.Minute, Precision: 7 * time.Second}}, "limits[0].Precision"},
		{"precision over the window", []ratelimit.Limit{{Quota: 1, Window: time.Second, Precision: 2 * time.Second}}, "limits[0].Precision"},
		{"too many slots", []ratelimit.Limit{{Quota: 1, Window: 2 * time.Second, Precision: time.Second / maxSlots}}, "limits[0].Precision"},
		{"precision of another algorithm", []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Minute, Precision: time.Second}}, "limits[0].Precision"},
		{"sliding log too long", []ratelimit.Limit{ratelimit.PerMinute(maxSlidingLogQuota + 1).Using(ratelimit.SlidingLog)}, "limits[0].Quota"},
		{"negative burst", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Minute, Burst: -3}}, "limits[0].Burst"},
		{"burst too large", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Minute, Burst: maxQuota + 1}}, "limits[0].Burst"},
		// 7 per day and a millisecond: a token is 86,400,001 units, and a
		// burst this large overflows 53 bits.
		{"bucket level over 53 bits", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 7, Window: 24*time.Hour + time.Millisecond, Burst: maxQuota / 2}}, "limits[0].Burst"},
		{"bucket level just over 53 bits", []ratelimit.Limit{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 1, Window: time.Second, Burst: maxQuota/1_000_000 + 1}}, "limits[0].Burst"},
		{"burst of another algorithm", []ratelimit.Limit{ratelimit.Limit{Quota: 1, Window: time.Minute, Burst: 2}}, "limits[0].Burst"},
		{"name too long", []ratelimit.Limit{ratelimit.PerMinute(1).Named(strings.Repeat("n", 65))}, "limits[0].Name"},
		{"name not ASCII", []ratelimit.Limit{ratelimit.PerMinute(1).Named("café")}, "limits[0].Name"},
		{"name with a newline", []ratelimit.Limit{ratelimit.PerMinute(1).Named("a\nb")}, "limits[0].Name"},
		{"second limit invalid", []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerSecond(0)}, "limits[1].Quota"},
		{"names repeated", []ratelimit.Limit{ratelimit.PerMinute(1).Named("x"), ratelimit.PerSecond(9).Named("x")}, "limits[1].Name"},
		{"same window and algorithm", []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerMinute(2)}, "limits[0] (1 per 1m, sliding-window) and limits[1] (2 per 1m, sliding-window) would count into one place"},
		{"same window, explicit default precision", []ratelimit.Limit{ratelimit.PerMinute(1), {Quota: 2, Window: time.Minute, Precision: 6 * time.Second}}, "would count into one place"},
		{"same bucket, other bursts", []ratelimit.Limit{
			ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: time.Minute, Burst: 5},
			ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: time.Minute, Burst: 9},
		}, "would count into one place"},
		{"same bucket, default burst", []ratelimit.Limit{
			ratelimit.PerMinute(5).Using(ratelimit.TokenBucket),
			ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 5, Window: time.Minute, Burst: 5},
		}, "would count into one place"},
		{"same window, other names", []ratelimit.Limit{
			ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("a"),
			ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("b"),
		}, "would count into one place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ratelimit.NewLimits(tt.limits...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid saying %q", s, err, tt.want)
			}
		})
	}
}

// TestNewLimitsKeepsLimitsApart: limits that differ in algorithm, window,
// precision or a bucket's rate count apart, so a set may hold them all.
func TestNewLimitsKeepsLimitsApart(t *testing.T) {
	limits := []ratelimit.Limit{
		ratelimit.PerMinute(1),
		{Quota: 1, Window: time.Minute, Precision: time.Second},
		ratelimit.PerMinute(1).Using(ratelimit.FixedWindow),
		ratelimit.PerMinute(1).Using(ratelimit.SlidingLog),
		ratelimit.PerMinute(5).Using(ratelimit.TokenBucket),
		ratelimit.PerMinute(6).Using(ratelimit.TokenBucket),
		ratelimit.PerSecond(1),
	}
	s, err := ratelimit.NewLimits(limits...)
	if err != nil {
		t.Fatalf("NewLimits: %v", err)
	}
	if len(s.All()) != len(limits) {
		t.Fatalf("All: got %d limits, want %d", len(s.All()), len(limits))
	}
	for i, l := range limits {
		if got := s.All()[i]; got != l {
			t.Errorf("At(%d): got %v, want %v", i, got, l)
		}
	}
}

// TestNewLimitsCopies: the set does not change with the slice it was
// built from.
func TestNewLimitsCopies(t *testing.T) {
	limits := []ratelimit.Limit{ratelimit.PerMinute(1), ratelimit.PerSecond(1)}
	s, err := ratelimit.NewLimits(limits...)
	if err != nil {
		t.Fatalf("NewLimits: %v", err)
	}
	limits[0] = ratelimit.PerMinute(0)
	if got, want := s.All()[0], ratelimit.PerMinute(1); got != want {
		t.Errorf("At(0) after the slice changed: got %v, want %v", got, want)
	}
}

func TestBanIsChecked(t *testing.T) {
	good := ratelimit.Ban{After: 3, Within: time.Minute, For: time.Minute, Max: time.Hour}
	tests := []struct {
		ban  ratelimit.Ban
		want string // in the error; "" when valid
	}{
		{good, ""},
		{ratelimit.Ban{After: 1, Within: time.Second, For: time.Second}, ""},
		{ratelimit.Ban{Within: time.Minute, For: time.Minute}, "Ban.After must be at least 1, got 0"},
		{ratelimit.Ban{After: 1, For: time.Minute}, "Ban.Within must be from 1ms to"},
		{ratelimit.Ban{After: 1, Within: time.Minute}, "Ban.For must be from 1ms to"},
		{ratelimit.Ban{After: 1, Within: time.Minute, For: 1500 * time.Microsecond}, "Ban.For must be a whole number of milliseconds"},
		{ratelimit.Ban{After: 1, Within: time.Minute, For: time.Minute, Max: time.Second}, "Ban.Max must not be shorter than For"},
		{ratelimit.Ban{After: 1, Within: time.Minute, For: time.Minute, Max: 400 * 24 * time.Hour}, "Ban.Max must be from 1ms to"},
		{ratelimit.Ban{After: 1, Within: -time.Minute, For: time.Minute}, "Ban.Within"},
	}
	limits, err := ratelimit.NewLimits(ratelimit.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		withBan, err := limits.WithBan(tt.ban)
		_, newErr := ratelimit.New(newMemory(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(5)), ratelimit.WithBan(tt.ban))
		if tt.want == "" {
			if err != nil || newErr != nil {
				t.Errorf("%v: got %v and %v, want no error", tt.ban, err, newErr)
				continue
			}
			if b, ok := withBan.Ban(); !ok || b != tt.ban {
				t.Errorf("Ban() = %v, %v; want %v", b, ok, tt.ban)
			}
			continue
		}
		for _, e := range []error{err, newErr} {
			if !errors.Is(e, ratelimit.ErrInvalid) || !strings.Contains(e.Error(), tt.want) {
				t.Errorf("%+v: got %v, want an ErrInvalid saying %q", tt.ban, e, tt.want)
			}
		}
	}
	if _, ok := limits.Ban(); ok {
		t.Error("WithBan changed the set it was called on")
	}
	if _, err := (*ratelimit.Limits)(nil).WithBan(good); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("WithBan on nil limits: got %v, want ErrInvalid", err)
	}
}

// banScript is a store that answers Allow from a script of
// decisions and records the calls.
type banScript struct {
	allow  ratelimit.Decision
	calls  []string
	banned []bool // whether the limits of each call carried a ban
}

func (s *banScript) record(call string, limits *ratelimit.Limits) {
	s.calls = append(s.calls, call)
	_, ok := limits.Ban()
	s.banned = append(s.banned, ok)
}

func (s *banScript) Allow(_ context.Context, _ string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	s.record("allow", limits)
	return s.allow, nil
}

func (s *banScript) Peek(_ context.Context, _ string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	s.record("peek", limits)
	return s.allow, nil
}

func (s *banScript) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

func (s *banScript) End(_ context.Context, _ string, _ int, limits *ratelimit.Limits, _ ratelimit.Decision) (ratelimit.Decision, error) {
	s.record("end", limits)
	return s.allow, nil
}

// TestBanWithCountOnly: with WithCountOnly and a ban, a request the peek
// denies is decided again by Allow, so that the denial counts towards the
// ban; when that Allow admits it (the quota came back meanwhile) it has
// spent the cost, and the response spends nothing more. Every set the
// store sees carries the ban.
func TestBanWithCountOnly(t *testing.T) {
	denied := ratelimit.MakeDecision(ratelimit.Result{RetryAfter: time.Second})
	allowed := ratelimit.MakeDecision(ratelimit.Result{Allowed: true, Remaining: 1})
	ban := ratelimit.Ban{After: 2, Within: time.Minute, For: time.Minute}
	tests := []struct {
		name      string
		allow     ratelimit.Decision
		status    int // the handler's
		wantCode  int
		wantCalls string
		noBan     bool
	}{
		{"allowed, a failure counted after", allowed, 401, 401, "allow end", false},
		{"allowed, a success not counted", allowed, 200, 200, "allow", false},
		{"denied: the store decided it, so it counts towards the ban", denied, 401, 429, "allow", false},
		{"without a ban", denied, 401, 429, "allow", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &banScript{allow: tt.allow}
			opts := []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(2)), ratelimit.WithCountOnly(nil)}
			if !tt.noBan {
				opts = append(opts, ratelimit.WithBan(ban))
			}
			l := newLimiter(t, s, "test", opts...)
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tt.status) }))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
			if w.Code != tt.wantCode || strings.Join(s.calls, " ") != tt.wantCalls {
				t.Errorf("got %d after %q, want %d after %q", w.Code, s.calls, tt.wantCode, tt.wantCalls)
			}
			for i, b := range s.banned {
				if b == tt.noBan {
					t.Errorf("call %d (%s): the limits carry a ban: %v, want %v", i, s.calls[i], b, !tt.noBan)
				}
			}
		})
	}
}

// TestBanEscalatesOnRealRedis runs the production configuration, Redis
// behind a Fallback, with a count-only login Limiter and a ban: failed
// logins spend the limit, denials past it ban the client, each ban of a
// series lasts twice the last (exactly: the request that starts a ban sees
// its whole length), the deny handler sees Decision.Banned, the ban's
// state in Redis has a TTL, and a correct login cannot get through while
// banned.
func TestBanEscalatesOnRealRedis(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	fallback, err := store.NewFallback(newRedisStore(t, c, prefix), steadyFallback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fallback.Close() })
	const first = 300 * time.Millisecond
	var banned []time.Duration // Decision.Banned of each denial
	l := newLimiter(t, fallback, "login",
		ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow)),
		ratelimit.WithCountOnly(nil),
		ratelimit.WithBan(ratelimit.Ban{After: 2, Within: time.Minute, For: first, Max: time.Minute}),
		ratelimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d ratelimit.Decision) {
			banned = append(banned, d.Banned)
			ratelimit.Deny(w, r, d)
		}))
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	login := func(password string) int {
		r := httptest.NewRequest("POST", "/login", nil)
		r.Header.Set("X-Password", password)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i, want := range []int{401, 401, 429, 429} { // two failures spend the limit, two denials ban
		if got := login("wrong"); got != want {
			t.Fatalf("attempt %d: got %d, want %d", i, got, want)
		}
	}
	if len(banned) != 2 || banned[0] != 0 || banned[1] != first {
		t.Fatalf("the denials saw Banned %v, want 0 then exactly %v", banned, first)
	}
	keys := scanKeys(t, c, prefix+"{login|*}:b")
	if len(keys) != 1 {
		t.Fatalf("ban state keys %q, want one", keys)
	}
	if ttl := c.PTTL(t.Context(), keys[0]).Val(); ttl <= 0 || ttl > time.Minute+first {
		t.Errorf("the ban state's TTL is %v, want one no longer than the strikes' minute and the ban", ttl)
	}
	if got := login("right"); got != 429 || banned[2] <= 0 || banned[2] > first {
		t.Fatalf("a correct login while banned: got %d, Banned %v; want 429 within the ban", got, banned[2])
	}
	// Wait for the ban to end, polling; the limit's minute still denies,
	// so two more denials start the next ban of the series: twice as long.
	waitUnbanned(t, l)
	banned = banned[:0]
	for i := range 2 {
		if got := login("wrong"); got != 429 {
			t.Fatalf("after the ban, attempt %d: got %d, want 429", i, got)
		}
	}
	if len(banned) != 2 || banned[0] != 0 || banned[1] != 2*first {
		t.Errorf("the second ban: the denials saw Banned %v, want 0 then exactly %v", banned, 2*first)
	}
}

// waitUnbanned polls l's Peek until a POST /login is no longer banned.
func waitUnbanned(t *testing.T, l *ratelimit.Limiter) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := l.Peek(httptest.NewRequest("POST", "/login", nil))
		if err != nil {
			t.Fatal(err)
		}
		if d.Banned == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still banned after 10s: %v left", d.Banned)
		}
		time.Sleep(min(d.Banned, 50*time.Millisecond))
	}
}

// TestLeasedRefusesBansAndCountOnly: a leased set is decided in process,
// where no strike of a ban is counted, and taken before the requests,
// where WithCountOnly charges after them: both are refused, by name.
func TestLeasedRefusesBansAndCountOnly(t *testing.T) {
	leased := ratelimit.Limit{Quota: 100, Window: time.Minute, Leased: true}
	limits, err := ratelimit.NewLimits(leased)
	if err != nil {
		t.Fatal(err)
	}
	ban := ratelimit.Ban{After: 3, Within: time.Minute, For: time.Minute}
	if _, err := limits.WithBan(ban); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "leased") {
		t.Errorf("Limits.WithBan of leased limits: got %v, want ErrInvalid naming Leased", err)
	}
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]ratelimit.Option{"WithBan": ratelimit.WithBan(ban), "WithCountOnly": ratelimit.WithCountOnly(func(status int) bool { return status >= 400 })} {
		if _, err := ratelimit.New(s, "api", ratelimit.WithLimits(leased), opt); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "leased") {
			t.Errorf("New with leased limits and %s: got %v, want ErrInvalid naming Leased", name, err)
		}
	}
}
