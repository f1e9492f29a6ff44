package ratelimit_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

// fixedStore answers every request with one preset result, for the
// first limit asked about, allowed when it has no RetryAfter.
func fixedStore(r ratelimit.Result) storeFunc {
	return func(_ context.Context, _ string, limits *ratelimit.Limits) (ratelimit.Decision, error) {
		r.Limit = limits.All()[0]
		r.Allowed = r.RetryAfter == 0
		return ratelimit.MakeDecision(r), nil
	}
}

// FuzzHeaders formats rate-limit headers for arbitrary limit names and
// results, with and without a quota unit and a partition key (bits 0-1
// of opts pick the unit, bit 2 turns pk on): a name New accepts must
// always give RateLimit-Policy and RateLimit values that parse as RFC 9651
// lists and name the limit back; t must be the fixed window's end
// (ResetAfter) rounded up, on a 429 (the limit denied) no later than
// Retry-After, a positive integer; X-RateLimit-Reset must be that t.
func FuzzHeaders(f *testing.F) {
	f.Add("api", 100, int64(60_000), 42, int64(17_000_000), int64(0), int64(2_999_000), uint8(0))
	f.Add(`a "quoted" \ name`, 1, int64(1), 0, int64(999), int64(1), int64(999), uint8(5))
	f.Add("", 1_000_000, int64(86_400_000), 999_999, int64(86_400_000_000), int64(86_400_000_000), int64(86_400_000_000), uint8(6))
	f.Add("\x7f\x00é", 5, int64(1500), -3, int64(-5), int64(-1), int64(-1), uint8(255))
	f.Add("deny", 10, int64(60_000), 0, int64(60_000_000), int64(1_200_000), int64(50_000_000), uint8(1))
	f.Add("long", 1, int64(1000), 0, int64(9_223_372_036_854_775), int64(9_223_372_036_854_775), int64(9_223_372_036_854_775), uint8(4))
	units := []string{"", "requests", "content-bytes", "concurrent-requests"}
	f.Fuzz(func(t *testing.T, name string, quota int, windowMS int64, remaining int, resetUS, retryUS, effectiveUS int64, opts uint8) {
		l := ratelimit.Limit{Quota: quota, Window: time.Duration(windowMS) * time.Millisecond}.Using(ratelimit.FixedWindow).Named(name)
		r := ratelimit.Result{
			Remaining:  remaining,
			Window:     time.Duration(effectiveUS) * time.Microsecond,
			ResetAfter: time.Duration(resetUS) * time.Microsecond,
			RetryAfter: time.Duration(retryUS) * time.Microsecond,
		}
		if r.Remaining < 0 || r.Window < 0 || r.ResetAfter < 0 || r.RetryAfter < 0 {
			return // not a result any store returns
		}
		hs := ratelimit.Headers{QuotaUnit: units[opts&3]}
		if opts&4 != 0 {
			hs.PartitionKey = []byte(pkSecret)
		}
		options := []ratelimit.Option{ratelimit.WithLimits(l), ratelimit.WithHeaders(hs)}
		lim, err := ratelimit.New(fixedStore(r), "fuzz", options...)
		if err != nil {
			return // refused when built: never formatted
		}
		w := serve(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "GET", "/")
		h := w.Header()
		policy, err := parseSF(h.Values("RateLimit-Policy"))
		if err != nil || len(policy) != 1 {
			t.Fatalf("RateLimit-Policy %q: %+v, %v", h.Values("RateLimit-Policy"), policy, err)
		}
		if name != "" && policy[0].name != name {
			t.Fatalf("RateLimit-Policy names %q, want %q", policy[0].name, name)
		}
		wantQU := any(nil)
		if unit := hs.QuotaUnit; unit != "" && unit != "requests" {
			wantQU = unit
		}
		if got := policy[0].params["qu"]; got != wantQU {
			t.Fatalf("RateLimit-Policy %q: qu %v, want %v", h.Get("RateLimit-Policy"), got, wantQU)
		}
		current, err := parseSF(h.Values("RateLimit"))
		if err != nil || len(current) != 1 || current[0].name != policy[0].name {
			t.Fatalf("RateLimit %q: %+v, %v", h.Get("RateLimit"), current, err)
		}
		wantT := min(ceilSeconds(r.ResetAfter), maxSFInt) // a fixed window resets at its end
		if w.Code == http.StatusTooManyRequests {
			retry, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
			if err != nil || retry < 1 {
				t.Fatalf("Retry-After %q on a 429", h.Get("Retry-After"))
			}
			wantT = min(wantT, retry)
		}
		if got, want := current[0].params, (map[string]any{"r": min(int64(remaining), maxSFInt), "t": wantT}); !reflect.DeepEqual(pkLess(got), want) {
			t.Fatalf("RateLimit %q: got %v, want %v", h.Get("RateLimit"), got, want)
		}
		pkPolicy, pkCurrent := policy[0].params["pk"], current[0].params["pk"]
		if opts&4 == 0 && (pkPolicy != nil || pkCurrent != nil) || opts&4 != 0 && (len(asBytes(pkPolicy)) != 16 || !bytes.Equal(asBytes(pkPolicy), asBytes(pkCurrent))) {
			t.Fatalf("pk on %v: RateLimit-Policy %q, RateLimit %q", opts&4 != 0, h.Get("RateLimit-Policy"), h.Get("RateLimit"))
		}
		if got, want := h.Get("X-RateLimit-Reset"), strconv.FormatInt(wantT, 10); got != want {
			t.Fatalf("X-RateLimit-Reset %q, want %q", got, want)
		}
	})
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// maxSFInt is the largest Integer of RFC 9651, which has 15 digits.
const maxSFInt = 999_999_999_999_999

// pkSecret is the Headers.PartitionKey of the tests, 32 bytes.
const pkSecret = "a partition key secret, 32 bytes"

// decisionStore answers every request with one preset decision, its
// results for the limits asked about, in order.
func decisionStore(d ratelimit.Decision) storeFunc {
	return func(_ context.Context, _ string, limits *ratelimit.Limits) (ratelimit.Decision, error) {
		rs := append([]ratelimit.Result(nil), d.Results()...)
		for i := range rs {
			rs[i].Limit = limits.All()[i]
		}
		answer := ratelimit.MakeDecision(rs...)
		answer.Allowed = d.Allowed
		return answer, nil
	}
}

// TestHeadersDescribeTheTightest: X-RateLimit-* describe the limit
// closest to denying: the one that denied, the latest to let the request
// through when several did; when allowed, the one with the fewest units
// left, ties going to the longest reset. RateLimit lists every limit, its
// t the effective window rounded up, capped by Retry-After on a 429 when
// the limit denied; X-RateLimit-Reset is the tightest limit's t.
func TestHeadersDescribeTheTightest(t *testing.T) {
	limits := ratelimit.WithLimits(
		ratelimit.PerSecond(1).Named("second"),
		ratelimit.PerMinute(10).Named("minute"),
		ratelimit.Limit{Quota: 100, Window: time.Hour}.Named("hour"))
	tests := []struct {
		name      string
		d         ratelimit.Decision
		status    int
		rateLimit string
		xReset    string // X-RateLimit-Reset
		xLimit    string // X-RateLimit-Limit
		retry     string // Retry-After
	}{
		{
			name: "allowed: the fewest remaining",
			d: ratelimit.MakeDecision(
				ratelimit.Result{Allowed: true, Remaining: 0, Window: 900 * time.Millisecond, ResetAfter: time.Second},
				ratelimit.Result{Allowed: true, Remaining: 5, Window: 6 * time.Second, ResetAfter: time.Minute},
				ratelimit.Result{Allowed: true, Remaining: 50, Window: 35 * time.Second, ResetAfter: time.Hour},
			),
			status: 200, rateLimit: `"second";r=0;t=1, "minute";r=5;t=6, "hour";r=50;t=35`, xReset: "1", xLimit: "1",
		},
		{
			name: "allowed: a tie on remaining goes to the longest reset",
			d: ratelimit.MakeDecision(
				ratelimit.Result{Allowed: true, Remaining: 1, Window: time.Second, ResetAfter: time.Second},
				ratelimit.Result{Allowed: true, Remaining: 1, Window: 59999 * time.Millisecond, ResetAfter: time.Minute},
				ratelimit.Result{Allowed: true, Remaining: 9, Window: time.Hour, ResetAfter: time.Hour},
			),
			status: 200, rateLimit: `"second";r=1;t=1, "minute";r=1;t=60, "hour";r=9;t=3600`, xReset: "60", xLimit: "10",
		},
		{
			name: "denied by one: its t at most Retry-After, the others their own",
			d: ratelimit.MakeDecision(
				ratelimit.Result{Allowed: true, Remaining: 1, Window: 400 * time.Millisecond, ResetAfter: time.Second},
				ratelimit.Result{Allowed: false, Remaining: 0, Window: 29500 * time.Millisecond, ResetAfter: time.Minute, RetryAfter: 29500 * time.Millisecond},
				ratelimit.Result{Allowed: true, Remaining: 0, Window: 45 * time.Minute, ResetAfter: time.Hour},
			),
			status: 429, rateLimit: `"second";r=1;t=1, "minute";r=0;t=30, "hour";r=0;t=2700`, xReset: "30", xLimit: "10", retry: "30",
		},
		{
			name: "denied by two: the later",
			d: ratelimit.MakeDecision(
				ratelimit.Result{Allowed: false, Remaining: 0, Window: time.Second, ResetAfter: time.Second, RetryAfter: time.Second},
				ratelimit.Result{Allowed: true, Remaining: 3, Window: 50 * time.Second, ResetAfter: time.Minute},
				ratelimit.Result{Allowed: false, Remaining: 0, Window: 1200 * time.Millisecond, ResetAfter: time.Hour, RetryAfter: 1200 * time.Millisecond},
			),
			status: 429, rateLimit: `"second";r=0;t=1, "minute";r=3;t=50, "hour";r=0;t=2`, xReset: "2", xLimit: "100", retry: "2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, decisionStore(tt.d), "test", limits)
			w := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/")
			h := w.Header()
			if w.Code != tt.status || h.Get("X-RateLimit-Reset") != tt.xReset || h.Get("X-RateLimit-Limit") != tt.xLimit || h.Get("Retry-After") != tt.retry {
				t.Errorf("got %d, X-RateLimit-Reset %q, X-RateLimit-Limit %q, Retry-After %q; want %d, %q, %q, %q",
					w.Code, h.Get("X-RateLimit-Reset"), h.Get("X-RateLimit-Limit"), h.Get("Retry-After"), tt.status, tt.xReset, tt.xLimit, tt.retry)
			}
			if got := h.Get("RateLimit"); got != tt.rateLimit {
				t.Errorf("got RateLimit %q, want %q", got, tt.rateLimit)
			}
			mustParse(t, h)
		})
	}
}

// TestResetIsOneInstant: a limit's t and X-RateLimit-Reset are one
// instant rounded up: the effective window (Result.Window, never
// ResetAfter) for the sliding window, the log and the bucket, the
// window's end (ResetAfter) for the fixed window.
func TestResetIsOneInstant(t *testing.T) {
	tests := []struct {
		algorithm          ratelimit.Algorithm
		window, resetAfter time.Duration
		want               string // t and X-RateLimit-Reset
	}{
		{ratelimit.SlidingWindow, 2999 * time.Millisecond, time.Minute, "3"},
		{ratelimit.SlidingWindow, 3 * time.Second, 3 * time.Second, "3"},
		{ratelimit.SlidingLog, 400 * time.Millisecond, 400 * time.Millisecond, "1"},
		{ratelimit.TokenBucket, 0, time.Hour, "0"},
		{ratelimit.SlidingLog, 59*time.Second + 999_999_999, 59*time.Second + 1, "60"},
		{ratelimit.TokenBucket, time.Hour, 2 * time.Hour, "3600"},
		// A fixed window's script reads the window's end to the
		// millisecond: Window the earliest it may be, ResetAfter the latest.
		{ratelimit.FixedWindow, 7 * time.Second, 7*time.Second + time.Millisecond, "8"},
		{ratelimit.FixedWindow, 6999 * time.Millisecond, 7 * time.Second, "7"},
		{ratelimit.FixedWindow, 29400 * time.Millisecond, 29401 * time.Millisecond, "30"},
	}
	for _, tt := range tests {
		t.Run(tt.algorithm.String()+"/"+tt.window.String(), func(t *testing.T) {
			s := fixedStore(ratelimit.Result{Remaining: 4, Window: tt.window, ResetAfter: tt.resetAfter})
			l := newLimiter(t, s, "test", ratelimit.WithLimits(ratelimit.Limit{Quota: 5, Window: time.Hour, Name: "api"}.Using(tt.algorithm)))
			w := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/")
			h := w.Header()
			if got, want := h.Get("RateLimit"), `"api";r=4;t=`+tt.want; got != want {
				t.Errorf("got RateLimit %q, want %q", got, want)
			}
			if got := h.Get("X-RateLimit-Reset"); got != tt.want {
				t.Errorf("got X-RateLimit-Reset %q, want %q", got, tt.want)
			}
			mustParse(t, h)
		})
	}
}

// TestRetryAfterBindsOnlyTheDenyingLimits: on a 429, the t of every
// limit that denied, of every Limiter that decided, is at most
// Retry-After (the draft's section 6), and every limit that admitted the
// request keeps its own t; a dry run's would-be denial is served without
// Retry-After, and its t are the effective windows.
func TestRetryAfterBindsOnlyTheDenyingLimits(t *testing.T) {
	deny := ratelimit.MakeDecision(
		ratelimit.Result{Allowed: false, Remaining: 0, Window: 1200 * time.Millisecond, ResetAfter: 10 * time.Second, RetryAfter: 1200 * time.Millisecond},
		ratelimit.Result{Allowed: true, Remaining: 7, Window: 50 * time.Second, ResetAfter: 50 * time.Second},
	)
	allow := ratelimit.MakeDecision(
		ratelimit.Result{Allowed: true, Remaining: 90, Window: 50 * time.Second, ResetAfter: time.Hour},
	)
	limits := ratelimit.WithLimits(ratelimit.PerSecond(10).Named("burst"), ratelimit.PerMinute(10).Named("minute"))
	global := ratelimit.WithLimits(ratelimit.Limit{Quota: 100, Window: time.Hour}.Named("global"))
	tests := []struct {
		name      string
		handler   func(t *testing.T) http.Handler
		status    int
		retry     string
		rateLimit string
	}{
		{
			name: "one Limiter, two limits",
			handler: func(t *testing.T) http.Handler {
				return newLimiter(t, decisionStore(deny), "test", limits).Handler(http.HandlerFunc(adaptertest.OK))
			},
			status: 429, retry: "2", rateLimit: `"burst";r=0;t=2, "minute";r=7;t=50`,
		},
		{
			name: "stacked: the outer allows, the inner denies",
			handler: func(t *testing.T) http.Handler {
				outer := newLimiter(t, decisionStore(allow), "outer", global)
				inner := newLimiter(t, decisionStore(deny), "inner", limits)
				return outer.Handler(inner.Handler(http.HandlerFunc(adaptertest.OK)))
			},
			status: 429, retry: "2", rateLimit: `"global";r=90;t=50, "burst";r=0;t=2, "minute";r=7;t=50`,
		},
		{
			name: "stacked: both allow, no cap",
			handler: func(t *testing.T) http.Handler {
				outer := newLimiter(t, decisionStore(allow), "outer", global)
				inner := newLimiter(t, decisionStore(allow), "inner", ratelimit.WithLimits(ratelimit.PerMinute(100).Named("inner")))
				return outer.Handler(inner.Handler(http.HandlerFunc(adaptertest.OK)))
			},
			status: 200, rateLimit: `"global";r=90;t=50, "inner";r=90;t=50`,
		},
		{
			name: "stacked: a dry run would deny, the inner denies",
			handler: func(t *testing.T) http.Handler {
				outer := newLimiter(t, decisionStore(deny), "outer", limits, quietLogs(), ratelimit.WithDryRun(nil))
				inner := newLimiter(t, decisionStore(allow), "inner", global)
				inner2 := newLimiter(t, decisionStore(deny), "inner2", ratelimit.WithLimits(ratelimit.PerSecond(5).Named("b"), ratelimit.PerMinute(5).Named("m")))
				return outer.Handler(inner.Handler(inner2.Handler(http.HandlerFunc(adaptertest.OK))))
			},
			status: 429, retry: "2", rateLimit: `"burst";r=0;t=2, "minute";r=7;t=50, "global";r=90;t=50, "b";r=0;t=2, "m";r=7;t=50`,
		},
		{
			name: "dry run: served without Retry-After, t uncapped",
			handler: func(t *testing.T) http.Handler {
				return newLimiter(t, decisionStore(deny), "test", limits, quietLogs(), ratelimit.WithDryRun(nil)).Handler(http.HandlerFunc(adaptertest.OK))
			},
			status: 200, rateLimit: `"burst";r=0;t=2, "minute";r=7;t=50`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(tt.handler(t), "GET", "/")
			h := w.Header()
			if w.Code != tt.status || h.Get("Retry-After") != tt.retry || h.Get("RateLimit") != tt.rateLimit {
				t.Errorf("got %d, Retry-After %q, RateLimit %q; want %d, %q, %q", w.Code, h.Get("Retry-After"), h.Get("RateLimit"), tt.status, tt.retry, tt.rateLimit)
			}
			items := mustParse(t, h)
			if retry, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64); err == nil {
				for _, it := range items {
					// Here r=0 is a limit that denied a request of 1.
					if it.params["r"].(int64) == 0 && it.params["t"].(int64) > retry {
						t.Errorf("%q: t=%d after Retry-After: %d", it.name, it.params["t"], retry)
					}
				}
			}
		})
	}
}

// TestHeaderStyles: WithHeaders picks the draft's fields, the X- ones,
// both, or none; a denial carries Retry-After in every case.
func TestHeaderStyles(t *testing.T) {
	draft := []string{"RateLimit-Policy", "RateLimit"}
	x := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	tests := []struct {
		style     ratelimit.Headers
		set, away []string
	}{
		{ratelimit.Headers{}, append(draft, x...), nil},
		{ratelimit.Headers{NoX: true}, draft, x},
		{ratelimit.Headers{NoDraft: true}, x, draft},
		{ratelimit.Headers{NoDraft: true, NoX: true}, nil, append(draft, x...)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.style), func(t *testing.T) {
			l := newLimiter(t, adaptertest.NewStore(t), "test", ratelimit.WithHeaders(tt.style),
				ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)))
			h := l.Handler(http.HandlerFunc(adaptertest.OK))
			for _, want := range []int{200, 429} {
				w := serve(h, "GET", "/")
				if w.Code != want {
					t.Fatalf("got %d, want %d", w.Code, want)
				}
				for _, name := range tt.set {
					if w.Header().Get(name) == "" {
						t.Errorf("%d: %s is missing", w.Code, name)
					}
				}
				for _, name := range tt.away {
					if v := w.Header().Get(name); v != "" {
						t.Errorf("%d: got %s %q, want none", w.Code, name, v)
					}
				}
				if got := w.Header().Get("Retry-After"); (want == 429) != (got != "") {
					t.Errorf("%d: got Retry-After %q", w.Code, got)
				}
			}
		})
	}
}

// TestHeadersAreStructuredFields formats policies with names of every
// printable ASCII byte, with and without a quota unit and a partition
// key, and parses them back with an RFC 9651 parser.
func TestHeadersAreStructuredFields(t *testing.T) {
	names := []string{"api", `a "quoted" name`, `back\slash`, " spaced ", "~!@#$%^&*()_+{}|:<>?"}
	for i := 0x20; i < 0x7f; i += 8 {
		var b strings.Builder
		for c := i; c < min(i+8, 0x7f); c++ {
			b.WriteByte(byte(c))
		}
		names = append(names, b.String())
	}
	for _, unit := range []string{"", "content-bytes"} {
		for _, pk := range []bool{false, true} {
			for _, name := range names {
				opts := []ratelimit.Option{ratelimit.WithLimits(
					ratelimit.PerMinute(7).Using(ratelimit.FixedWindow).Named(name),
					ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 3, Window: 1500 * time.Millisecond, Burst: 6})}
				hs := ratelimit.Headers{QuotaUnit: unit}
				if pk {
					hs.PartitionKey = []byte(pkSecret)
				}
				opts = append(opts, ratelimit.WithHeaders(hs))
				l := newLimiter(t, adaptertest.NewStore(t), "test", opts...)
				h := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/").Header()
				policy, err := parseSF(h.Values("RateLimit-Policy"))
				if err != nil {
					t.Fatalf("name %q: RateLimit-Policy %q: %v", name, h.Get("RateLimit-Policy"), err)
				}
				want := []sfItem{
					{name, map[string]any{"q": int64(7), "w": int64(60)}},
					{"3-per-1.5s", map[string]any{"q": int64(6), "w": int64(3)}}, // a burst of 6 refills in 3s
				}
				for _, it := range want {
					if unit != "" {
						it.params["qu"] = unit
					}
				}
				if got := pkLessItems(policy); !reflect.DeepEqual(got, want) {
					t.Errorf("name %q, qu %q, pk %v: RateLimit-Policy %q parses to %+v, want %+v", name, unit, pk, h.Get("RateLimit-Policy"), got, want)
				}
				current, err := parseSF(h.Values("RateLimit"))
				if err != nil || len(current) != 2 || current[0].name != name || current[1].name != "3-per-1.5s" || current[0].params["r"] != int64(6) || current[1].params["r"] != int64(5) {
					t.Errorf("name %q: RateLimit %q: %+v, %v", name, h.Get("RateLimit"), current, err)
				}
				for _, it := range append(policy, current...) {
					if got := it.params["pk"]; pk != (got != nil) || pk && len(asBytes(got)) != 16 {
						t.Errorf("name %q, pk %v: item %q has pk %v", name, pk, it.name, got)
					}
				}
			}
		}
	}
}

// TestQuotaUnit: Headers.QuotaUnit adds qu to every item of RateLimit-Policy,
// whether it comes before or after the limits, for the limits of
// WithLimits, WithRoutes and WithLimitsFunc, and never to RateLimit;
// "requests", the draft's default, adds nothing.
func TestQuotaUnit(t *testing.T) {
	plan := []ratelimit.Limit{ratelimit.PerMinute(1000).Named("plan")}
	limits := func(unit string) []ratelimit.Option {
		return []ratelimit.Option{
			ratelimit.WithLimits(ratelimit.PerMinute(100).Named("api"), ratelimit.PerSecond(10).Named("burst")),
			ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /upload": {ratelimit.Limit{Quota: 1_000_000, Window: time.Hour}.Named("upload")}}),
			ratelimit.WithLimitsFunc(func(r ratelimit.Request) []ratelimit.Limit {
				if r.(*http.Request).Header.Get("X-Plan") != "" {
					return plan
				}
				return nil
			}),
			ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: unit}),
		}
	}
	tests := []struct {
		name   string
		opts   []ratelimit.Option
		method string
		plan   bool
		want   string
	}{
		{"content-bytes", limits("content-bytes"), "GET", false, `"api";q=100;qu="content-bytes";w=60, "burst";q=10;qu="content-bytes";w=1`},
		{"content-bytes, option first", slices.Concat(limits("content-bytes")[3:], limits("")[:3]), "GET", false, `"api";q=100;qu="content-bytes";w=60, "burst";q=10;qu="content-bytes";w=1`},
		{"a route", limits("content-bytes"), "POST", false, `"upload";q=1000000;qu="content-bytes";w=3600`},
		{"a limits function", limits("concurrent-requests"), "GET", true, `"plan";q=1000;qu="concurrent-requests";w=60`},
		{"requests: the default, not sent", limits("requests"), "GET", false, `"api";q=100;w=60, "burst";q=10;w=1`},
		{"none", limits("")[:3], "POST", false, `"upload";q=1000000;w=3600`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newLimiter(t, newMemory(t), "test", tt.opts...).Handler(http.HandlerFunc(adaptertest.OK))
			for i := range 2 { // the limits function's set is compiled on the first request, reused on the second
				w := serve(h, tt.method, "/upload", func(r *http.Request) {
					if tt.plan {
						r.Header.Set("X-Plan", "gold")
					}
				})
				if got := w.Header().Get("RateLimit-Policy"); got != tt.want {
					t.Errorf("request %d: got RateLimit-Policy %q, want %q", i, got, tt.want)
				}
				if strings.Contains(w.Header().Get("RateLimit"), "qu=") {
					t.Errorf("request %d: RateLimit %q carries qu", i, w.Header().Get("RateLimit"))
				}
				mustParse(t, w.Header())
			}
		})
	}
}

// TestPartitionKey: Headers.PartitionKey adds pk, the first 16 bytes of the
// HMAC-SHA256 of the store key (namespace|route scope|client key), to
// every item of both fields: the same for requests that count against one
// quota, whatever the response, and different for another client, route
// or namespace; never the client's key.
func TestPartitionKey(t *testing.T) {
	mem := newMemory(t)
	user := ratelimit.WithKey(func(r ratelimit.Request) (string, error) {
		return "user:" + r.(*http.Request).Header.Get("X-User"), nil
	})
	routes := ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(2).Named("login")}})
	limits := ratelimit.WithLimits(ratelimit.PerMinute(3).Named("api"), ratelimit.PerSecond(10).Named("burst"))
	pk := ratelimit.WithHeaders(ratelimit.Headers{PartitionKey: []byte(pkSecret)})
	api := newLimiter(t, mem, "api", user, limits, routes, pk).Handler(http.HandlerFunc(adaptertest.OK))
	other := newLimiter(t, mem, "other", user, limits, pk).Handler(http.HandlerFunc(adaptertest.OK))
	as := func(u string) func(*http.Request) { return withHeader("X-User", u) }

	// partitionKey returns the pk of a response, checking that every item
	// of both fields carries it.
	partitionKey := func(t *testing.T, w *httptest.ResponseRecorder) string {
		t.Helper()
		items, policy := mustParse(t, w.Header()), w.Header().Get("RateLimit-Policy")
		parsed, _ := parseSF([]string{policy})
		var pk []byte
		for _, it := range append(items, parsed...) {
			got := asBytes(it.params["pk"])
			if len(got) != 16 || pk != nil && !bytes.Equal(got, pk) {
				t.Fatalf("RateLimit-Policy %q, RateLimit %q: item %q has pk %v, want 16 bytes, the same in every item", policy, w.Header().Get("RateLimit"), it.name, it.params["pk"])
			}
			pk = got
		}
		for _, v := range []string{policy, w.Header().Get("RateLimit")} {
			if strings.Contains(v, "alice") || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte("user:alice"))) {
				t.Fatalf("a field shows the client's key: %q", v)
			}
		}
		return string(pk)
	}
	mac := hmac.New(sha256.New, []byte(pkSecret))
	mac.Write([]byte("api|*|user:alice"))
	want := string(mac.Sum(nil)[:16])

	var first string
	for i, status := range []int{200, 200, 200, 429, 429} { // the pk stays, allowed or denied
		w := serve(api, "GET", "/", as("alice"))
		if w.Code != status {
			t.Fatalf("request %d: got %d, want %d", i, w.Code, status)
		}
		got := partitionKey(t, w)
		if i == 0 {
			first = got
		}
		if got != want || got != first {
			t.Fatalf("request %d: got pk %x, want %x: the HMAC-SHA256 of the store key, cut to 16 bytes", i, got, want)
		}
	}
	t.Logf("RateLimit-Policy: %s", serve(api, "GET", "/", as("alice")).Header().Get("RateLimit-Policy"))
	for _, tt := range []struct {
		name string
		w    *httptest.ResponseRecorder
	}{
		{"another client", serve(api, "GET", "/", as("bob"))},
		{"another route", serve(api, "POST", "/login", as("alice"))},
		{"another namespace", serve(other, "GET", "/", as("alice"))},
	} {
		if got := partitionKey(t, tt.w); got == first {
			t.Errorf("%s: got pk %x, the same as alice's on GET /", tt.name, got)
		}
	}
	if a, b := partitionKey(t, serve(api, "POST", "/login", as("carol"))), partitionKey(t, serve(api, "POST", "/login", as("carol"))); a != b {
		t.Errorf("two requests of carol to POST /login: pk %x, then %x", a, b)
	}

	// Stacked Limiters: each lists its own items with its own pk, or none.
	plain := newLimiter(t, mem, "plain", ratelimit.WithLimits(ratelimit.PerMinute(50).Named("plain")))
	w := serve(plain.Handler(newLimiter(t, mem, "api2", user, limits, pk).Handler(http.HandlerFunc(adaptertest.OK))), "GET", "/", as("alice"))
	items := mustParse(t, w.Header())
	if len(items) != 3 || items[0].params["pk"] != nil || len(asBytes(items[1].params["pk"])) != 16 || !bytes.Equal(asBytes(items[1].params["pk"]), asBytes(items[2].params["pk"])) {
		t.Errorf("stacked: RateLimit %q, want pk on the second Limiter's items only", w.Header().Get("RateLimit"))
	}
	if p := w.Header().Get("RateLimit-Policy"); !strings.HasPrefix(p, `"plain";q=50;w=60, "api";q=3;w=60;pk=:`) {
		t.Errorf("stacked: RateLimit-Policy %q", p)
	}
}

// sfItem is an Item of an RFC 9651 List whose value is a String.
type sfItem struct {
	name   string
	params map[string]any // int64, string, []byte, ... as httpsfv parses them
}

// parseSF parses the values of a header as one RFC 9651 List of Items
// whose values are Strings; it refuses anything else, and an empty list.
func parseSF(values []string) ([]sfItem, error) {
	list, err := httpsfv.UnmarshalList(values)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, errors.New("no items")
	}
	items := make([]sfItem, len(list))
	for i, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			return nil, fmt.Errorf("member %d is a %T, not an Item", i, m)
		}
		name, ok := it.Value.(string)
		if !ok {
			return nil, fmt.Errorf("item %d is a %T, not a String", i, it.Value)
		}
		items[i] = sfItem{name: name, params: map[string]any{}}
		for _, k := range it.Params.Names() {
			items[i].params[k], _ = it.Params.Get(k)
		}
	}
	return items, nil
}

// mustParse checks that RateLimit-Policy and RateLimit parse as lists
// that name the same limits, in order, the policy with q and w, RateLimit
// with r and t, all Integers; and returns the RateLimit items.
func mustParse(t *testing.T, h http.Header) []sfItem {
	t.Helper()
	policy, err := parseSF(h.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	current, err := parseSF(h.Values("RateLimit"))
	if err != nil {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	if len(policy) != len(current) {
		t.Fatalf("RateLimit-Policy %q and RateLimit %q list different limits", h.Get("RateLimit-Policy"), h.Get("RateLimit"))
	}
	for i := range policy {
		_, q := policy[i].params["q"].(int64)
		_, w := policy[i].params["w"].(int64)
		_, r := current[i].params["r"].(int64)
		_, tt := current[i].params["t"].(int64)
		if policy[i].name != current[i].name || !q || !w || !r || !tt {
			t.Fatalf("RateLimit-Policy %q and RateLimit %q: item %d is not a policy and its service limit", h.Get("RateLimit-Policy"), h.Get("RateLimit"), i)
		}
	}
	return current
}

// pkLess returns params without pk.
func pkLess(params map[string]any) map[string]any {
	c := maps.Clone(params)
	delete(c, "pk")
	return c
}

// pkLessItems returns items without their pk.
func pkLessItems(items []sfItem) []sfItem {
	c := make([]sfItem, len(items))
	for i, it := range items {
		c[i] = sfItem{it.name, pkLess(it.params)}
	}
	return c
}

// asBytes is v as a Byte Sequence, or nil.
func asBytes(v any) []byte {
	b, _ := v.([]byte)
	return b
}

// TestHeaderValuesOutliveLaterLimiters stacks Limiters deep enough that
// their header values outgrow the room the request's state keeps for them:
// a value an outer Limiter set, held by the code between the Limiters, is
// unchanged after the inner ones set theirs, and the final headers list
// every Limiter's policy, each parsed by a Structured Fields parser. Each
// Limiter is tighter than the one outside it, so each changes what the
// X-RateLimit fields say.
func TestHeaderValuesOutliveLaterLimiters(t *testing.T) {
	const depth = 8
	type held struct{ values, copies http.Header } // as set, and copied then
	var seen []held
	var h http.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for i := depth - 1; i >= 0; i-- {
		l := newLimiter(t, newMemory(t), fmt.Sprintf("stack%d", i),
			ratelimit.WithLimits(ratelimit.PerMinute(100-10*i).Named(fmt.Sprintf("a-rather-long-policy-name-%d", i))),
			ratelimit.WithHeaders(ratelimit.Headers{}))
		next := h
		h = l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v := held{values: http.Header{}, copies: http.Header{}}
			for name, values := range w.Header() {
				v.values[name] = values
				for _, s := range values {
					v.copies[name] = append(v.copies[name], strings.Clone(s))
				}
			}
			seen = append(seen, v)
			next.ServeHTTP(w, r)
		}))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if len(seen) != depth {
		t.Fatalf("%d Limiters ran, want %d", len(seen), depth)
	}
	for i, v := range seen {
		if !reflect.DeepEqual(v.values, v.copies) {
			t.Errorf("Limiter %d's header values changed under the inner Limiters:\nnow %q\nwas %q", i, v.values, v.copies)
		}
		if n := strings.Count(v.values.Get("RateLimit"), "a-rather-long-policy-name-"); n != i+1 {
			t.Errorf("after Limiter %d, RateLimit %q lists %d policies, want %d", i, v.values.Get("RateLimit"), n, i+1)
		}
	}
	items := mustParse(t, w.Header())
	if len(items) != depth {
		t.Fatalf("RateLimit %q: %d items, want %d", w.Header().Get("RateLimit"), len(items), depth)
	}
	for i, it := range items {
		if want := fmt.Sprintf("a-rather-long-policy-name-%d", i); it.name != want || it.params["r"] != int64(100-10*i-1) {
			t.Errorf("item %d: %s r=%v, want %s r=%d", i, it.name, it.params["r"], want, 100-10*i-1)
		}
	}
}

// TestHandlersAnswer: what Deny, FailOpen and FailClosed write, and
// whether the request is served.
func TestHandlersAnswer(t *testing.T) {
	denied := ratelimit.MakeDecision(ratelimit.Result{Limit: ratelimit.PerMinute(1), RetryAfter: 1500 * time.Millisecond})
	storeDown := errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
	noKey := fmt.Errorf("%w: header X-Api-Key is missing", ratelimit.ErrInvalid)
	badCost := fmt.Errorf("%w: cost must be at least 1, got 0", ratelimit.ErrInvalid)
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request) (served bool)
		served bool
		status int // 0: nothing written
		body   string
		retry  string
	}{
		{"Deny", func(w http.ResponseWriter, r *http.Request) bool { ratelimit.Deny(w, r, denied); return false }, false, 429, "retry in 2 s", ""},
		{"FailOpen, store down", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailOpen(w, r, storeDown) }, true, 0, "", ""},
		{"FailOpen, no key", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailOpen(w, r, noKey) }, false, 400, "cannot be rate limited", ""},
		{"FailOpen, bad cost", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailOpen(w, r, badCost) }, false, 400, "cannot be rate limited", ""},
		{"FailClosed, store down", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailClosed(w, r, storeDown) }, false, 503, "retry in 1 s", "1"},
		{"FailClosed, no key", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailClosed(w, r, noKey) }, false, 400, "cannot be rate limited", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			served := tt.answer(w, httptest.NewRequest("GET", "/", nil))
			if served != tt.served {
				t.Errorf("served: got %v, want %v", served, tt.served)
			}
			if tt.status == 0 {
				if w.Body.Len() != 0 || len(w.Header()) != 0 {
					t.Errorf("got %d %q with headers %v, want nothing written", w.Code, w.Body.String(), w.Header())
				}
				return
			}
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.body) || w.Header().Get("Retry-After") != tt.retry {
				t.Errorf("got %d %q, Retry-After %q; want %d with %q, Retry-After %q", w.Code, w.Body.String(), w.Header().Get("Retry-After"), tt.status, tt.body, tt.retry)
			}
			if strings.Contains(w.Body.String(), "10.9.8.7") || strings.Contains(w.Body.String(), "X-Api-Key") {
				t.Errorf("the body %q shows the error", w.Body.String())
			}
			if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options: got %q, want nosniff", got)
			}
		})
	}
}

// TestProblemJSON: a client that accepts JSON (with a q above 0) gets RFC
// 9457 problem JSON; any other gets plain text.
func TestProblemJSON(t *testing.T) {
	tests := []struct {
		accept []string
		json   bool
	}{
		{nil, false},
		{[]string{"text/html"}, false},
		{[]string{"application/json"}, true},
		{[]string{"application/problem+json"}, true},
		{[]string{"Application/JSON"}, true},
		{[]string{"text/html, application/json;q=0.5"}, true},
		{[]string{"text/html", "application/json"}, true},
		{[]string{"application/json;q=0"}, false},
		{[]string{"application/json; q=0.0, text/plain"}, false},
		{[]string{"application/json;charset=utf-8;q=0.1"}, true},
		{[]string{"application/jsonx"}, false},
		{[]string{"*/*"}, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		for _, line := range tt.accept {
			r.Header.Add("Accept", line)
		}
		w := httptest.NewRecorder()
		ratelimit.Deny(w, r, ratelimit.Decision{})
		isJSON := w.Header().Get("Content-Type") == "application/problem+json"
		if isJSON != tt.json {
			t.Errorf("Accept %q: got Content-Type %q, want JSON: %v", tt.accept, w.Header().Get("Content-Type"), tt.json)
			continue
		}
		if isJSON {
			if p, err := parseProblem(w.Body.Bytes()); err != nil || p.Status != 429 || p.Type != quotaExceeded {
				t.Errorf("Accept %q: body %q: got %+v, %v", tt.accept, w.Body.String(), p, err)
			}
		} else if got, want := w.Body.String(), "Too Many Requests: rate limit exceeded; retry in 1 s\n"; got != want {
			t.Errorf("Accept %q: got %q, want %q", tt.accept, got, want)
		}
	}
}

// The problem types of draft-ietf-httpapi-ratelimit-headers.
const (
	quotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	abnormalUsage   = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	reducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problemBody is an RFC 9457 body as the handlers write it; Violated is
// nil when the member is left out.
type problemBody struct {
	Type     string    `json:"type"`
	Title    string    `json:"title"`
	Status   int       `json:"status"`
	Detail   string    `json:"detail"`
	Violated *[]string `json:"violated-policies"`
}

// parseProblem decodes a problem JSON body, refusing unknown members and
// anything after the object.
func parseProblem(body []byte) (problemBody, error) {
	var p problemBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, err
	}
	if dec.More() {
		return p, errors.New("more after the object")
	}
	return p, nil
}

// policies is the violated-policies member holding names.
func policies(names ...string) *[]string {
	if names == nil {
		names = []string{}
	}
	return &names
}

// TestProblemDetails: the type, status, detail and violated-policies of
// each answer in problem JSON, and the plain text that stands in for it.
func TestProblemDetails(t *testing.T) {
	denied := func(l ratelimit.Limit) ratelimit.Result {
		return ratelimit.Result{Limit: l, RetryAfter: 1500 * time.Millisecond}
	}
	allowed := func(l ratelimit.Limit) ratelimit.Result {
		return ratelimit.Result{Limit: l, Allowed: true, Remaining: 3}
	}
	deny := func(d ratelimit.Decision) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) { ratelimit.Deny(w, r, d) }
	}
	storeDown := errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
	banned := ratelimit.MakeDecision(
		ratelimit.Result{Limit: ratelimit.PerSecond(10).Named("api-second"), RetryAfter: 10 * time.Minute},
		ratelimit.Result{Limit: ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("api-hour"), RetryAfter: 10 * time.Minute},
	)
	banned.Banned = 10 * time.Minute
	tests := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request)
		want   problemBody
		text   string
	}{
		{
			"one limit", deny(ratelimit.MakeDecision(denied(ratelimit.PerMinute(1).Named("login")))),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("login")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"several limits, some deny", deny(ratelimit.MakeDecision(
				allowed(ratelimit.PerSecond(10).Named("second")),
				denied(ratelimit.PerMinute(100).Named("minute")),
				allowed(ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("hour")),
				denied(ratelimit.Limit{Quota: 5000, Window: 24 * time.Hour}.Named("day")),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("minute", "day")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"names with quotes and backslashes", deny(ratelimit.MakeDecision(
				denied(ratelimit.PerMinute(1).Named(`say "hi"`)),
				denied(ratelimit.Limit{Quota: 1, Window: time.Hour}.Named(`C:\temp\`)),
				denied(ratelimit.Limit{Quota: 2, Window: time.Hour}.Named(`\"`)),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies(`say "hi"`, `C:\temp\`, `\"`)},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"unnamed limits of a Decision made by hand", deny(ratelimit.MakeDecision(
				denied(ratelimit.PerMinute(5)),
				denied(ratelimit.PerMinute(100)),
				denied(ratelimit.PerMinute(100).Using(ratelimit.TokenBucket)),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("5-per-1m", "100-per-1m-sliding-window", "100-per-1m-token-bucket")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"names a header cannot carry, in a Decision made by hand", deny(ratelimit.MakeDecision(
				denied(ratelimit.PerMinute(1).Named("caf\u00e9\t<b>")),
				denied(ratelimit.Limit{Quota: 1, Window: time.Hour}.Named("bad \xff byte")),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("caf\u00e9\t<b>", "bad \ufffd byte")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"no results", deny(ratelimit.Decision{}),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 1 s", policies()},
			"Too Many Requests: rate limit exceeded; retry in 1 s\n",
		},
		{
			"banned", deny(banned),
			problemBody{abnormalUsage, "Abnormal usage detected", 429, "banned after repeated denials; retry in 600 s", policies("api-second", "api-hour")},
			"Too Many Requests: banned after repeated denials; retry in 600 s\n",
		},
		{
			"FailClosed, store down", func(w http.ResponseWriter, r *http.Request) { ratelimit.FailClosed(w, r, storeDown) },
			problemBody{reducedCapacity, "Capacity temporarily reduced", 503, "rate limiting is unavailable; retry in 1 s", policies()},
			"Service Unavailable: rate limiting is unavailable; retry in 1 s\n",
		},
		{
			"FailClosed, no key", func(w http.ResponseWriter, r *http.Request) { ratelimit.FailClosed(w, r, ratelimit.ErrInvalid) },
			problemBody{"about:blank", "Bad Request", 400, "the request cannot be rate limited", nil},
			"Bad Request: the request cannot be rate limited\n",
		},
		{
			"FailOpen, bad cost", func(w http.ResponseWriter, r *http.Request) { ratelimit.FailOpen(w, r, ratelimit.ErrInvalid) },
			problemBody{"about:blank", "Bad Request", 400, "the request cannot be rate limited", nil},
			"Bad Request: the request cannot be rate limited\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept", "application/problem+json")
			w := httptest.NewRecorder()
			tt.answer(w, r)
			checkProblem(t, w, tt.want)

			w = httptest.NewRecorder()
			tt.answer(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.want.Status || w.Body.String() != tt.text || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("plain text: got %d %q (%s), want %d %q", w.Code, w.Body.String(), w.Header().Get("Content-Type"), tt.want.Status, tt.text)
			}
		})
	}
}

// checkProblem checks that w holds the problem JSON want.
func checkProblem(t *testing.T, w *httptest.ResponseRecorder, want problemBody) {
	t.Helper()
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type: got %q, want application/problem+json", got)
	}
	got, err := parseProblem(w.Body.Bytes())
	if err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if w.Code != want.Status {
		t.Errorf("status: got %d, want %d", w.Code, want.Status)
	}
	if got.Type != want.Type || got.Title != want.Title || got.Status != want.Status || got.Detail != want.Detail {
		t.Errorf("got %q %q %d %q, want %q %q %d %q", got.Type, got.Title, got.Status, got.Detail, want.Type, want.Title, want.Status, want.Detail)
	}
	switch {
	case want.Violated == nil && got.Violated != nil:
		t.Errorf("violated-policies: got %q, want none", *got.Violated)
	case want.Violated != nil && got.Violated == nil:
		t.Errorf("violated-policies: got none, want %q", *want.Violated)
	case want.Violated != nil && !slices.Equal(*got.Violated, *want.Violated):
		t.Errorf("violated-policies: got %q, want %q", *got.Violated, *want.Violated)
	}
}

// TestProblemThroughLimiter: the violated-policies of a Limiter's denial
// name the policies as RateLimit-Policy does, made-up names included.
func TestProblemThroughLimiter(t *testing.T) {
	l := newLimiter(t, newMemory(t), "problem", ratelimit.WithLimits(
		ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named(`say "hi" \ bye`),
		ratelimit.Limit{Quota: 100, Window: time.Hour},
		ratelimit.Limit{Quota: 1, Window: 24 * time.Hour}.Using(ratelimit.FixedWindow),
	))
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if w := serve(h, "GET", "/"); w.Code != 200 {
		t.Fatalf("first request: got %d, want 200", w.Code)
	}
	w := serve(h, "GET", "/", withHeader("Accept", "application/json"))
	if got, want := w.Header().Get("RateLimit-Policy"), `"say \"hi\" \\ bye";q=1;w=60, "100-per-1h";q=100;w=3600, "1-per-24h";q=1;w=86400`; got != want {
		t.Errorf("RateLimit-Policy: got %q, want %q", got, want)
	}
	checkProblem(t, w, problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 86400 s", policies(`say "hi" \ bye`, "1-per-24h")})
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,` +
		`"detail":"rate limit exceeded; retry in 86400 s","violated-policies":["say \"hi\" \\ bye","1-per-24h"]}` + "\n"
	if got := w.Body.String(); got != want {
		t.Errorf("body: got %s, want %s", got, want)
	}
}

// FuzzProblemName: any name in a Decision made by hand comes back from
// the problem JSON as encoding/json would have written it.
func FuzzProblemName(f *testing.F) {
	for _, name := range []string{"", "api", `a"b`, `a\b`, "\x00\x1f\x7f", "\u2028<&>", "\xff\xfe", "caf\u00e9"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		l := ratelimit.PerMinute(1).Named(name)
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept", "application/json")
		ratelimit.Deny(w, r, ratelimit.MakeDecision(ratelimit.Result{Limit: l}))
		want := "1-per-1m"
		if name != "" {
			q, err := json.Marshal(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(q, &want); err != nil {
				t.Fatal(err)
			}
		}
		p, err := parseProblem(w.Body.Bytes())
		if err != nil {
			t.Fatalf("body %q: %v", w.Body.String(), err)
		}
		if p.Violated == nil || len(*p.Violated) != 1 || (*p.Violated)[0] != want {
			t.Errorf("violated-policies of %q: got %v, want [%q]", name, p.Violated, want)
		}
	})
}

// BenchmarkDeny is the cost of the default denial's body, in plain text
// and in problem JSON.
func BenchmarkDeny(b *testing.B) {
	d := ratelimit.MakeDecision(
		ratelimit.Result{Limit: ratelimit.PerSecond(10).Named("api-second"), RetryAfter: 300 * time.Millisecond},
		ratelimit.Result{Limit: ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("api-hour"), Allowed: true, Remaining: 400},
	)
	for _, accept := range []string{"", "application/json"} {
		b.Run("accept="+accept, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/", nil)
			if accept != "" {
				r.Header.Set("Accept", accept)
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				ratelimit.Deny(w, r, d)
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps only its header.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// TestDenialHeaderFields: a 429 with the default headers sets eight
// fields, none of them Cache-Control (no cache stores a 429), so that
// net/http's header map, and its copy as the status is written, stay at
// the size that needs no growing. A ninth field would cost every denial.
func TestDenialHeaderFields(t *testing.T) {
	l, err := ratelimit.New(newMemory(t), "fields", ratelimit.WithLimits(ratelimit.PerMinute(1)))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, accept := range []string{"", "application/json"} {
		var w *httptest.ResponseRecorder
		for range 2 {
			w = httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/", nil)
			if accept != "" {
				r.Header.Set("Accept", accept)
			}
			h.ServeHTTP(w, r)
		}
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("Accept %q: got %d, want 429", accept, w.Code)
		}
		if len(w.Header()) != 8 || w.Header().Get("Cache-Control") != "" {
			t.Errorf("Accept %q: the 429 sets %d fields, want 8 without Cache-Control: %v", accept, len(w.Header()), w.Header())
		}
	}
}

// TestBadRequestSaysWhatIsMissing: the 400 for a request without a key
// names the header a built-in KeyFunc found missing, empty or malformed,
// in the text and in problem JSON, and never quotes the request's value;
// any other KeyFunc's error, whatever it says, gets the generic answer.
func TestBadRequestSaysWhatIsMissing(t *testing.T) {
	apiKey, err := ratelimit.HeaderKey("x-api-key", []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	proxied, err := ratelimit.IPKey{TrustedProxies: []string{"192.0.2.0/24"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	custom := func(r ratelimit.Request) (string, error) {
		return "", fmt.Errorf("%w: header X-Tenant %q is unknown", ratelimit.ErrInvalid, r.(*http.Request).Header.Get("X-Tenant"))
	}
	const generic = "the request cannot be rate limited"
	tests := []struct {
		name   string
		key    ratelimit.KeyFunc
		header [][2]string
		detail string
	}{
		{"header missing", apiKey, nil, generic + ": header X-Api-Key is missing"},
		{"header empty", apiKey, [][2]string{{"X-Api-Key", ""}}, generic + ": header X-Api-Key is empty"},
		{"joined, no route first", ratelimit.Join(ratelimit.Route, apiKey), nil, generic},
		{"joined, header first", ratelimit.Join(apiKey, ratelimit.Route), nil, generic + ": header X-Api-Key is missing"},
		{"forwarded garbage", proxied, [][2]string{{"X-Forwarded-For", "198.51.100.7, secret-value"}}, generic + ": header X-Forwarded-For holds an entry that is not an IP address"},
		{"custom KeyFunc", custom, [][2]string{{"X-Tenant", "secret-value"}}, generic},
		{"user missing", ratelimit.User("no such key"), nil, generic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, newMemory(t), "bad", ratelimit.WithKey(tt.key), ratelimit.WithLimits(ratelimit.PerMinute(5)), quietLogs())
			h := l.Handler(http.HandlerFunc(adaptertest.OK))
			mods := []func(*http.Request){}
			for _, kv := range tt.header {
				mods = append(mods, withHeader(kv[0], kv[1]))
			}
			w := serve(h, "GET", "/", mods...)
			if got, want := w.Body.String(), "Bad Request: "+tt.detail+"\n"; w.Code != 400 || got != want {
				t.Errorf("plain text: got %d %q, want 400 %q", w.Code, got, want)
			}
			w = serve(h, "GET", "/", append(mods, withHeader("Accept", "application/json"))...)
			checkProblem(t, w, problemBody{"about:blank", "Bad Request", 400, tt.detail, nil})
			if strings.Contains(w.Body.String(), "secret-value") {
				t.Errorf("the body %q quotes the request", w.Body.String())
			}
		})
	}
}

// TestXRateLimitSkipsTheConcurrentCap: on a route with a limit over time
// and a Concurrent cap, X-RateLimit-* describe the limit a client should
// wait for: the one over time, unless the cap alone denied, and then its
// Reset is the Retry-After, never the cap's t=0.
func TestXRateLimitSkipsTheConcurrentCap(t *testing.T) {
	limits := ratelimit.WithLimits(
		ratelimit.PerMinute(20).Named("rpm"),
		ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 4, Name: "slots"})
	rpm := func(allowed bool, remaining int, window time.Duration) ratelimit.Result {
		r := ratelimit.Result{Allowed: allowed, Remaining: remaining, Window: window, ResetAfter: window}
		if !allowed {
			r.RetryAfter = window
		}
		return r
	}
	slots := func(allowed bool, remaining int) ratelimit.Result {
		r := ratelimit.Result{Allowed: allowed, Remaining: remaining}
		if !allowed {
			r.RetryAfter = 700 * time.Millisecond
		}
		return r
	}
	tests := []struct {
		name                       string
		d                          ratelimit.Decision
		status                     int
		rateLimit                  string
		xLimit, xRemaining, xReset string
		retry                      string
	}{
		{"allowed: the limit over time, though the cap has fewer left", ratelimit.MakeDecision(rpm(true, 19, 57*time.Second), slots(true, 3)),
			200, `"rpm";r=19;t=57, "slots";r=3;t=0`, "20", "19", "57", ""},
		{"denied by the cap alone: the cap, reset at Retry-After", ratelimit.MakeDecision(rpm(true, 15, 40*time.Second), slots(false, 0)),
			429, `"rpm";r=15;t=40, "slots";r=0;t=0`, "4", "0", "1", "1"},
		{"denied by the limit over time alone", ratelimit.MakeDecision(rpm(false, 0, 30*time.Second), slots(true, 3)),
			429, `"rpm";r=0;t=30, "slots";r=3;t=0`, "20", "0", "30", "30"},
		{"denied by both: the limit over time", ratelimit.MakeDecision(rpm(false, 0, 30*time.Second), slots(false, 0)),
			429, `"rpm";r=0;t=30, "slots";r=0;t=0`, "20", "0", "30", "30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, decisionStore(tt.d), "test", limits)
			w := serve(l.Handler(http.HandlerFunc(adaptertest.OK)), "GET", "/")
			h := w.Header()
			got := []string{strconv.Itoa(w.Code), h.Get("RateLimit"), h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), h.Get("Retry-After")}
			want := []string{strconv.Itoa(tt.status), tt.rateLimit, tt.xLimit, tt.xRemaining, tt.xReset, tt.retry}
			if !slices.Equal(got, want) {
				t.Errorf("got status, RateLimit, X-RateLimit-Limit, -Remaining, -Reset, Retry-After %q; want %q", got, want)
			}
		})
	}
}

// TestFailClosedNamesTheUndecidedPolicies: the 503 of FailClosed carries
// the draft's violated-policies for temporary-reduced-capacity: the
// policies of the Limiter whose store failed, named as RateLimit-Policy
// names them, and not those of a Limiter that decided.
func TestFailClosedNamesTheUndecidedPolicies(t *testing.T) {
	down := failing{errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")}
	limits := ratelimit.WithLimits(ratelimit.PerMinute(60).Named("api-minute"), ratelimit.Limit{Quota: 1000, Window: time.Hour})
	closed := ratelimit.WithErrorHandler(ratelimit.FailClosed)
	tests := []struct {
		name    string
		handler func(t *testing.T) http.Handler
		want    *[]string
	}{
		{"one Limiter", func(t *testing.T) http.Handler {
			return newLimiter(t, down, "api", limits, closed, quietLogs()).Handler(http.HandlerFunc(adaptertest.OK))
		}, policies("api-minute", "1000-per-1h")},
		{"stacked: the outer decides, the inner's store fails", func(t *testing.T) http.Handler {
			outer := newLimiter(t, newMemory(t), "global", ratelimit.WithLimits(ratelimit.PerMinute(100).Named("global")), closed)
			inner := newLimiter(t, down, "api", limits, closed, quietLogs())
			return outer.Handler(inner.Handler(http.HandlerFunc(adaptertest.OK)))
		}, policies("api-minute", "1000-per-1h")},
		{"stacked: the outer's store fails", func(t *testing.T) http.Handler {
			outer := newLimiter(t, down, "global", ratelimit.WithLimits(ratelimit.PerMinute(100).Named("global")), closed, quietLogs())
			inner := newLimiter(t, newMemory(t), "api", limits, closed)
			return outer.Handler(inner.Handler(http.HandlerFunc(adaptertest.OK)))
		}, policies("global")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(tt.handler(t), "GET", "/", withHeader("Accept", "application/problem+json"))
			checkProblem(t, w, problemBody{reducedCapacity, "Capacity temporarily reduced", 503, "rate limiting is unavailable; retry in 1 s", tt.want})
			if strings.Contains(w.Body.String(), "10.9.8.7") {
				t.Errorf("the body %q shows the store's error", w.Body.String())
			}
		})
	}
}
