// Package adaptertest is the tables of HTTP cases that the net/http
// middleware and the Gin and Echo adapters must all pass, so that the
// three behave the same: Cases, run by Run, and RouteCases, route tables
// run by RunRoutes wherever a Limiter sits; and what every adapter must
// do besides, run by RunAdapter, with its benchmark, Benchmark.
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/store"
)

// Route is a route of the test app: a method and a path whose parameters
// are written ":name".
type Route struct{ Method, Path string }

// App is the test app: every route answers 200 "ok".
var App = []Route{{"GET", "/"}, {"POST", "/login"}, {"GET", "/api/:id"}, {"GET", "/healthz"}}

// OK is the app's handler: 200 "ok", or 401 when the request has an
// X-Fail header, as a failed login would. A request with an X-Use header
// reports that many units of usage (see ratelimit.Charge) before the
// response is written, one with X-Use-After after; one with X-Stream
// streams that many chunks, charging 1 unit after each and stopping when
// Charge says no, then writes "streamed" and the chunks sent. Then it
// writes a line
// per decision the request carries (see ratelimit.Decisions), in order:
// "decision", then name=remaining for each limit, and "banned=" the ban
// when there is one.
func OK(w http.ResponseWriter, r *http.Request) {
	if n, err := strconv.Atoi(r.Header.Get("X-Use")); err == nil {
		ratelimit.Charge(r.Context(), n)
	}
	if r.Header.Get("X-Fail") != "" {
		w.WriteHeader(http.StatusUnauthorized)
	}
	io.WriteString(w, "ok\n")
	if n, err := strconv.Atoi(r.Header.Get("X-Use-After")); err == nil {
		ratelimit.Charge(r.Context(), n)
	}
	if n, err := strconv.Atoi(r.Header.Get("X-Stream")); err == nil {
		sent := 0
		for sent < n {
			sent++
			io.WriteString(w, "chunk\n")
			if !ratelimit.Charge(r.Context(), 1) {
				break // told no: the limit has no room for more
			}
		}
		io.WriteString(w, "streamed "+strconv.Itoa(sent)+"\n")
	}
	for _, d := range ratelimit.Decisions(r.Context()) {
		io.WriteString(w, "decision")
		for _, res := range d.Results() {
			io.WriteString(w, " "+res.Limit.Name+"="+strconv.Itoa(res.Remaining))
		}
		if d.Banned > 0 {
			io.WriteString(w, " banned="+d.Banned.String())
		}
		io.WriteString(w, "\n")
	}
}

// Framework serves App through a Limiter.
type Framework struct {
	// Pattern writes a route as the framework's router names it, the form
	// the keys of its Routes option take: "GET /api/{id}" for net/http,
	// "GET /api/:id" for Gin and Echo. Whatever the syntax, the Limiter
	// sees it, and an observer is told it, as ServeMux writes it.
	Pattern func(Route) string
	// Routes is the option that takes a route table in the framework's
	// syntax: ratelimit.WithRoutes, ginlimit.Routes, echolimit.Routes.
	Routes func(map[string][]ratelimit.Limit) ratelimit.Option
	// Serve returns a handler serving App with the Limiters ls in front of
	// every route, ls[0] first.
	Serve func(t *testing.T, ls ...*ratelimit.Limiter) http.Handler
	// Syntax writes a pattern of ServeMux's syntax in the syntax Routes
	// takes, or returns false when that syntax has no way to write it;
	// nil when Routes takes ServeMux's.
	Syntax func(pattern string) (string, bool)
	// Placements are the places a Limiter can sit in the framework's
	// app, for RunRoutes: before routing and after.
	Placements []Placement

	// Name is an adapter's package, "ginlimit", whose Routes option's
	// errors say Name+".Routes"; for RunAdapter.
	Name string
	// Middleware, for an adapter, serves AdapterApp through the adapter's
	// middleware of l, exempting the requests skip says with the
	// adapter's WithSkipper when skip is not nil; for RunAdapter and
	// Benchmark.
	Middleware func(l *ratelimit.Limiter, skip func(*http.Request) bool) http.Handler
}

// Step is one request and what its response must be.
type Step struct {
	Method, Path string
	RemoteAddr   string            // default "192.0.2.1:1234"
	Header       map[string]string // request headers
	Status       int
	Want         map[string]string // response headers; "" means absent
	Body         string            // a substring of the body
	// Check, when set, checks what Want cannot say exactly: the
	// response headers, with an error saying what is wrong.
	Check func(h http.Header) error
}

// Case is a Limiter configuration and a sequence of requests.
type Case struct {
	Name    string
	Store   func(t *testing.T) ratelimit.Store // nil: a fresh Redis store on miniredis
	Options func(fw Framework) []ratelimit.Option
	// Inner, when set, configures a second Limiter, of namespace "inner",
	// that runs after the first, on the same store.
	Inner func(fw Framework) []ratelimit.Option
	Steps []Step
	// Observed, when set, is what an observer (ratelimit.WithObserver)
	// given to the first Limiter must have seen once the steps ran: one
	// "outcome route limits" line per event, limits being the names of
	// the limits that did not allow, joined by ",".
	Observed func(fw Framework) []string
}

// leasedRemaining checks the RateLimit field of the leased key "hot"
// (10,000 a minute): r is want when the slice the instance holds has
// lasted since the first step, and less by what it had left when it
// lapsed. A slice lasts 100ms, so on a busy machine it may lapse between
// two steps, before each of the lapses steps since the first: a slice
// then holds at most 4 times the units spent from the last one plus 16,
// which here is at most 24.
func leasedRemaining(want, lapses int) func(http.Header) error {
	return func(h http.Header) error {
		v := h.Get("RateLimit")
		var r int
		if _, err := fmt.Sscanf(v, `"hot";r=%d;t=60`, &r); err != nil {
			return fmt.Errorf("RateLimit = %q, want \"hot\";r=N;t=60", v)
		}
		if r > want || r < want-24*lapses {
			return fmt.Errorf("RateLimit = %q, want r=%d, or down to %d where slices lapsed", v, want, want-24*lapses)
		}
		return nil
	}
}

func get(path string, status int, want map[string]string) Step {
	return Step{Method: "GET", Path: path, Status: status, Want: want}
}

var quiet = ratelimit.WithLogger(slog.New(slog.DiscardHandler))

// apiKey keys requests by their X-API-Key header.
var apiKey, _ = ratelimit.HeaderKey("X-API-Key", []byte("a test secret, 32 bytes at least"))

// keyOf returns the key apiKey makes of an API key.
func keyOf(k string) string {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", k)
	key, err := apiKey(r)
	if err != nil {
		panic(err)
	}
	return key
}

// fixedOverrides returns the option of overrides of list.
func fixedOverrides(list ...override.Override) ratelimit.Option {
	t, err := override.NewTable(list)
	if err != nil {
		panic(err)
	}
	return ratelimit.WithOverrides(override.Fixed(t))
}

// Cases is the table every framework runs.
var Cases = []Case{
	{
		Name: "a shadow limit beside an enforced one: counted, never denying, named in X-RateLimit-Shadow",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{quiet, ratelimit.WithKey(apiKey), ratelimit.WithHeaders(ratelimit.Headers{Shadow: true}), ratelimit.WithLimits(
				ratelimit.PerMinute(3).Named("api"),
				ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Minute, Shadow: true, Name: "strict"})}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{
				"RateLimit-Policy": `"api";q=3;w=60, "strict";q=1;w=60`, "RateLimit": `"api";r=2;t=60, "strict";r=0;t=60`, "X-RateLimit-Shadow": ""}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{
				"RateLimit-Policy": `"api";q=3;w=60`, "RateLimit": `"api";r=1;t=60`, "X-RateLimit-Shadow": `"strict"`, "Retry-After": ""}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit": `"api";r=0;t=60`, "X-RateLimit-Shadow": `"strict"`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 429, Want: map[string]string{"RateLimit": `"api";r=0;t=60, "strict";r=0;t=60`, "X-RateLimit-Shadow": "", "Retry-After": "60"}},
		},
		Observed: func(Framework) []string {
			return []string{"allowed  ", "would_deny  strict", "would_deny  strict", "denied  api,strict"}
		},
	},
	{
		Name: "overrides: a key's quota raised, a key blocked, a prefix unlimited",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(apiKey), ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("api")),
				fixedOverrides(
					override.Override{Policy: "api", StoredKey: keyOf("k1"), Quota: 3},
					override.Override{Policy: "api", StoredKey: keyOf("bad"), Blocked: true},
					override.Override{Policy: "api", StoredKey: "header:X-Api-Key:*", Unlimited: true},
					override.Override{Policy: "api", StoredKey: keyOf("k2"), Quota: 2, Window: 2 * time.Minute},
				)}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit-Policy": `"api";q=3;w=60`, "RateLimit": `"api";r=2;t=60`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit": `"api";r=1;t=60`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit": `"api";r=0;t=60`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 429, Want: map[string]string{"RateLimit": `"api";r=0;t=60`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "bad"}, Status: 429, Want: map[string]string{"RateLimit-Policy": `"api";q=0;w=60`, "RateLimit": `"api";r=0;t=60`, "Retry-After": "60"}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k2"}, Status: 200, Want: map[string]string{"RateLimit-Policy": `"api";q=2;w=120`, "RateLimit": `"api";r=1;t=120`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k3"}, Status: 200, Want: map[string]string{"RateLimit-Policy": "", "RateLimit": ""}},
		},
	},
	{
		// One key for every client: the route's. The store leases units
		// of it, and the requests spend them in process; the headers
		// count down as they would without leasing.
		Name: "a leased hot key shared by every client",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(ratelimit.Route), ratelimit.WithLimits(
				ratelimit.Limit{Quota: 10_000, Window: time.Minute, Algorithm: ratelimit.FixedWindow, Leased: true, Name: "hot"})}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"RateLimit-Policy": `"hot";q=10000;w=60`, "RateLimit": `"hot";r=9999;t=60`, "X-RateLimit-Remaining": "9999"}),
			{Method: "GET", Path: "/", RemoteAddr: "192.0.2.2:999", Status: 200, Check: leasedRemaining(9998, 1)},
			{Method: "GET", Path: "/", RemoteAddr: "192.0.2.3:999", Status: 200, Check: leasedRemaining(9997, 2)},
		},
	},
	{
		Name: "limit per client IP, with headers",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("api"))}
		},
		Steps: []Step{
			get("/", 200, map[string]string{
				"RateLimit-Policy": `"api";q=3;w=60`, "RateLimit": `"api";r=2;t=60`,
				"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "60", "Retry-After": "",
			}),
			get("/", 200, map[string]string{"RateLimit": `"api";r=1;t=60`}),
			get("/", 200, map[string]string{"RateLimit": `"api";r=0;t=60`}),
			{Method: "GET", Path: "/", Status: 429, Body: "Too Many Requests", Want: map[string]string{
				"RateLimit": `"api";r=0;t=60`, "X-RateLimit-Remaining": "0", "Retry-After": "60",
				"Content-Type": "text/plain; charset=utf-8",
			}},
			{Method: "GET", Path: "/", RemoteAddr: "192.0.2.2:999", Status: 200, Want: map[string]string{"RateLimit": `"api";r=2;t=60`}},
		},
	},
	{
		// The store's clock reads 2026-01-01 00:00 UTC: 19:00 on New
		// Year's Eve in New York, whose December ends 5 hours later.
		Name: "a quota per calendar month in a time zone",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(apiKey), ratelimit.WithLimits(
				ratelimit.PerMinute(100).Named("rpm"),
				ratelimit.Limit{Algorithm: ratelimit.Monthly, Quota: 2, Zone: "America/New_York", Name: "month"},
			)}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{
				"RateLimit-Policy": `"rpm";q=100;w=60, "month";q=2`, "RateLimit": `"rpm";r=99;t=60, "month";r=1;t=18000`,
				"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "18000",
			}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit": `"rpm";r=98;t=60, "month";r=0;t=18000`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 429, Want: map[string]string{
				"RateLimit": `"rpm";r=98;t=60, "month";r=0;t=18000`, "Retry-After": "18000", "X-RateLimit-Reset": "18000",
			}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k2"}, Status: 200, Want: map[string]string{"RateLimit": `"rpm";r=99;t=60, "month";r=1;t=18000`}},
		},
	},
	{
		Name: "usage charged from the response: told before the header, said at once; after, by the next response; past the quota, a debt",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(apiKey), ratelimit.WithLimits(
				ratelimit.PerMinute(100).Named("rpm"),
				ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 10, Window: time.Minute, Usage: true, Name: "tpm"},
			)}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1", "X-Use": "4"}, Status: 200, Want: map[string]string{
				"RateLimit-Policy": `"rpm";q=100;w=60, "tpm";q=10;w=60`, "RateLimit": `"rpm";r=99;t=60, "tpm";r=6;t=60`,
				"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "6",
			}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1", "X-Use-After": "5"}, Status: 200, Want: map[string]string{
				// Told after the header: it says what remained once the
				// request reserved its cost of 1.
				"RateLimit": `"rpm";r=98;t=60, "tpm";r=5;t=60`,
			}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1", "X-Use": "3"}, Status: 200, Want: map[string]string{
				"RateLimit": `"rpm";r=97;t=60, "tpm";r=0;t=60`,
			}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 429, Want: map[string]string{
				"RateLimit": `"rpm";r=97;t=60, "tpm";r=0;t=60`, "Retry-After": "60",
			}},
		},
		Observed: func(Framework) []string {
			// The third's 3 go past its reservation of 1 and the 2 left
			// beside it: the 2 past it are charged at once, then the 1 held.
			return []string{"allowed  ", "charged  ", "allowed  ", "charged  ", "allowed  ", "charged  tpm", "charged  tpm", "denied  tpm"}
		},
	},
	{
		Name: "a stream charged as it goes: past its reservation it asks for more, is told no when none is left, and stops",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(apiKey), ratelimit.WithLimits(
				ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 10, Window: time.Minute, Usage: true, Name: "tpm"},
			)}
		},
		Steps: []Step{
			// 8 chunks: the first within the cost of 1 reserved, each next
			// asking for 1 more.
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1", "X-Stream": "8"}, Status: 200, Body: "streamed 8\n",
				Want: map[string]string{"RateLimit": `"tpm";r=9;t=60`}},
			// 2 left: the second chunk holds the last; the third is told
			// no, charged at once, and the stream stops.
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1", "X-Stream": "8"}, Status: 200, Body: "streamed 3\n",
				Want: map[string]string{"RateLimit": `"tpm";r=1;t=60`}},
			// 11 of 10 charged: in debt.
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 429, Want: map[string]string{"RateLimit": `"tpm";r=0;t=60`}},
		},
		Observed: func(Framework) []string {
			return []string{"allowed  ", "charged  ", "allowed  ", "charged  tpm", "charged  tpm", "denied  tpm"}
		},
	},
	{
		Name: "requests in flight: a slot taken by each request and given back when it ends",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(apiKey), ratelimit.WithLimits(
				ratelimit.PerMinute(100).Named("rpm"),
				ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 2, Name: "slots"},
			)}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{
				// X- describe the limit over time, not the cap in flight, which
				// has no time to wait for.
				"RateLimit-Policy": `"rpm";q=100;w=60, "slots";q=2;qu="concurrent-requests"`, "RateLimit": `"rpm";r=99;t=60, "slots";r=1;t=0`,
				"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "99", "X-RateLimit-Reset": "60",
			}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit": `"rpm";r=98;t=60, "slots";r=1;t=0`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1", "X-Fail": "1"}, Status: 401, Want: map[string]string{"RateLimit": `"rpm";r=97;t=60, "slots";r=1;t=0`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200, Want: map[string]string{"RateLimit": `"rpm";r=96;t=60, "slots";r=1;t=0`}},
		},
	},
	{
		Name: "a route's own limits, in its own counters",
		Options: func(fw Framework) []ratelimit.Option {
			return []ratelimit.Option{
				ratelimit.WithLimits(ratelimit.PerMinute(5).Using(ratelimit.FixedWindow).Named("api")),
				fw.Routes(map[string][]ratelimit.Limit{
					fw.Pattern(Route{"POST", "/login"}): {ratelimit.PerMinute(2).Using(ratelimit.SlidingLog).Named("login")},
				}),
			}
		},
		Steps: []Step{
			{Method: "POST", Path: "/login", Status: 200, Want: map[string]string{"RateLimit-Policy": `"login";q=2;w=60`, "RateLimit": `"login";r=1;t=60`}},
			{Method: "POST", Path: "/login", Status: 200, Want: map[string]string{"RateLimit": `"login";r=0;t=60`}},
			{Method: "POST", Path: "/login", Status: 429, Want: map[string]string{"Retry-After": "60"}},
			get("/", 200, map[string]string{"RateLimit-Policy": `"api";q=5;w=60`, "RateLimit": `"api";r=4;t=60`}),
		},
	},
	{
		Name: "keyed by route pattern, never by raw path",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithKey(ratelimit.Route), ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			get("/api/1", 200, nil),
			get("/api/2", 200, nil),
			get("/api/3", 429, nil),
			get("/", 200, nil),
		},
	},
	{
		Name: "forged X-Forwarded-For from an untrusted peer changes nothing",
		Options: func(Framework) []ratelimit.Option {
			key, _ := ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
			return []ratelimit.Option{ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-Forwarded-For": "198.51.100.1"}, Status: 200},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Forwarded-For": "198.51.100.2"}, Status: 200},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Forwarded-For": "198.51.100.3"}, Status: 429},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Real-IP": "198.51.100.4", "Forwarded": "for=198.51.100.5"}, Status: 429},
		},
	},
	{
		Name: "a trusted proxy's X-Forwarded-For names the client",
		Options: func(Framework) []ratelimit.Option {
			key, _ := ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc()
			return []ratelimit.Option{ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", RemoteAddr: "10.0.0.5:80", Header: map[string]string{"X-Forwarded-For": "198.51.100.1"}, Status: 200},
			{Method: "GET", Path: "/", RemoteAddr: "10.1.0.9:80", Header: map[string]string{"X-Forwarded-For": "198.51.100.1, 10.0.0.5"}, Status: 200},
			// The client prepends a forged address; the proxy appends the real one.
			{Method: "GET", Path: "/", RemoteAddr: "10.0.0.5:80", Header: map[string]string{"X-Forwarded-For": "203.0.113.9, 198.51.100.1"}, Status: 429},
			{Method: "GET", Path: "/", RemoteAddr: "10.0.0.5:80", Header: map[string]string{"X-Forwarded-For": "198.51.100.2"}, Status: 200},
		},
	},
	{
		Name: "a request without its key goes to the error handler",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{quiet, ratelimit.WithKey(apiKey), ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Status: 400, Want: map[string]string{"RateLimit": ""}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 200},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k1"}, Status: 429},
			{Method: "GET", Path: "/", Status: 400},
			{Method: "GET", Path: "/", Header: map[string]string{"X-API-Key": "k2"}, Status: 200},
		},
	},
	{
		Name: "skipped requests pass with no headers",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{
				ratelimit.WithSkip(func(r ratelimit.Request) bool { return r.(*http.Request).URL.Path == "/healthz" }),
				ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)),
			}
		},
		Steps: []Step{
			get("/healthz", 200, map[string]string{"RateLimit": "", "X-RateLimit-Limit": ""}),
			get("/healthz", 200, nil),
			get("/", 200, nil),
			get("/", 429, nil),
			get("/healthz", 200, nil),
		},
	},
	{
		Name: "dry run sets headers but never blocks",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{quiet, ratelimit.WithDryRun(nil), ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("try"))}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"RateLimit": `"try";r=0;t=60`}),
			get("/", 200, map[string]string{"RateLimit": `"try";r=0;t=60`, "Retry-After": ""}),
		},
	},
	{
		Name: "problem JSON for clients that accept JSON",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			get("/", 200, nil),
			{Method: "GET", Path: "/", Header: map[string]string{"Accept": "application/json"}, Status: 429,
				Want: map[string]string{"Content-Type": "application/problem+json"}, Body: `"status":429`},
			{Method: "GET", Path: "/", Header: map[string]string{"Accept": "application/json;q=0, text/html"}, Status: 429,
				Want: map[string]string{"Content-Type": "text/plain; charset=utf-8"}},
		},
	},
	{
		Name:  "store down: fail open serves",
		Store: func(*testing.T) ratelimit.Store { return Down{} },
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{quiet, ratelimit.WithLimits(ratelimit.PerMinute(1))}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"RateLimit": ""}),
			get("/", 200, nil),
		},
	},
	{
		Name:  "store down: fail closed answers 503",
		Store: func(*testing.T) ratelimit.Store { return Down{} },
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{quiet, ratelimit.WithErrorHandler(ratelimit.FailClosed), ratelimit.WithLimits(ratelimit.PerMinute(1))}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Status: 503, Want: map[string]string{"Retry-After": "1"}, Body: "Service Unavailable"},
		},
	},
	{
		Name: "several limits: the policy and RateLimit list all, X- the tightest",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithLimits(
				ratelimit.Limit{Quota: 3, Window: time.Hour}.Using(ratelimit.FixedWindow).Named("hour"),
				ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("minute"),
			)}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"RateLimit-Policy": `"hour";q=3;w=3600, "minute";q=2;w=60`, "RateLimit": `"hour";r=2;t=3600, "minute";r=1;t=60`, "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "60"}),
			get("/", 200, map[string]string{"RateLimit": `"hour";r=1;t=3600, "minute";r=0;t=60`, "X-RateLimit-Limit": "2"}),
			// On a 429 the denying limit's t is capped at Retry-After, which
			// must never be earlier than the reset it waits for (draft
			// section 6); the hour, which admits the request, keeps its own.
			get("/", 429, map[string]string{"RateLimit": `"hour";r=1;t=3600, "minute";r=0;t=60`, "X-RateLimit-Limit": "2", "X-RateLimit-Reset": "60", "Retry-After": "60"}),
		},
	},
	{
		Name: "stacked Limiters: the headers list both, X- and Retry-After the tightest; the handler reads both decisions",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(5).Using(ratelimit.FixedWindow).Named("global"))}
		},
		Inner: func(fw Framework) []ratelimit.Option {
			return []ratelimit.Option{fw.Routes(map[string][]ratelimit.Limit{
				fw.Pattern(Route{"GET", "/api/:id"}): {ratelimit.Limit{Quota: 2, Window: time.Hour}.Using(ratelimit.FixedWindow).Named("api")},
			})}
		},
		Steps: []Step{
			{Method: "GET", Path: "/api/1", Status: 200, Body: "ok\ndecision global=4\ndecision api=1\n", Want: map[string]string{
				"RateLimit-Policy": `"global";q=5;w=60, "api";q=2;w=3600`, "RateLimit": `"global";r=4;t=60, "api";r=1;t=3600`,
				"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "3600"}},
			{Method: "GET", Path: "/", Status: 200, Body: "ok\ndecision global=3\n", Want: map[string]string{
				"RateLimit-Policy": `"global";q=5;w=60`, "RateLimit": `"global";r=3;t=60`, "X-RateLimit-Limit": "5"}},
			{Method: "GET", Path: "/api/2", Status: 200, Body: "decision global=2\ndecision api=0\n"},
			{Method: "GET", Path: "/api/3", Status: 429, Want: map[string]string{
				"RateLimit": `"global";r=1;t=60, "api";r=0;t=3600`, "X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "Retry-After": "3600"}},
			{Method: "GET", Path: "/", Status: 200, Body: "decision global=0\n", Want: map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0"}},
			{Method: "GET", Path: "/api/4", Status: 429, Want: map[string]string{
				"RateLimit": `"global";r=0;t=60`, "X-RateLimit-Limit": "5", "Retry-After": "60"}},
		},
	},
	{
		Name: "a ban: the second denial within a minute bans for ten, with Retry-After to its end",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{
				ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("once")),
				ratelimit.WithBan(ratelimit.Ban{After: 2, Within: time.Minute, For: 10 * time.Minute, Max: time.Hour}),
			}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"RateLimit": `"once";r=0;t=60`}),
			{Method: "GET", Path: "/", Status: 429, Body: "rate limit exceeded; retry in 60 s", Want: map[string]string{"Retry-After": "60"}},
			{Method: "GET", Path: "/", Status: 429, Body: "banned after repeated denials; retry in 600 s", Want: map[string]string{
				"Retry-After": "600", "RateLimit": `"once";r=0;t=600`, "X-RateLimit-Reset": "600"}},
			{Method: "GET", Path: "/", Status: 429, Body: "banned", Want: map[string]string{"Retry-After": "600"}},
			{Method: "GET", Path: "/", RemoteAddr: "192.0.2.2:1", Status: 200, Body: "decision once=0\n"}, // another client is not banned
		},
	},
	{
		Name: "weighted requests",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{quiet, ratelimit.WithLimits(ratelimit.PerMinute(5).Using(ratelimit.TokenBucket)),
				ratelimit.WithCost(func(r ratelimit.Request) int {
					n, err := strconv.Atoi(r.(*http.Request).Header.Get("X-Cost"))
					if err != nil {
						return 1
					}
					return n
				})}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-Cost": "3"}, Status: 200, Want: map[string]string{"X-RateLimit-Remaining": "2"}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Cost": "3"}, Status: 429},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Cost": "2"}, Status: 200, Want: map[string]string{"X-RateLimit-Remaining": "0"}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Cost": "9"}, Status: 400},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Cost": "-1"}, Status: 400},
		},
	},
	{
		Name: "count only failures: successes never spend, a counted response says what remains after it, a spent quota denies all",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithCountOnly(nil), ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"X-RateLimit-Remaining": "2"}),
			get("/", 200, map[string]string{"X-RateLimit-Remaining": "2"}),
			{Method: "GET", Path: "/", Header: map[string]string{"X-Fail": "1"}, Status: 401, Want: map[string]string{"X-RateLimit-Remaining": "1", "RateLimit": `"2-per-1m";r=1;t=60`}},
			get("/", 200, map[string]string{"X-RateLimit-Remaining": "1"}),
			{Method: "GET", Path: "/", Header: map[string]string{"X-Fail": "1"}, Status: 401, Want: map[string]string{"X-RateLimit-Remaining": "0", "RateLimit": `"2-per-1m";r=0;t=60`}},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Fail": "1"}, Status: 429, Want: map[string]string{"X-RateLimit-Remaining": "0", "Retry-After": "60"}},
			get("/", 429, map[string]string{"X-RateLimit-Remaining": "0"}),
		},
	},
	{
		Name: "count only successes",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithCountOnly(func(status int) bool { return status < 400 }), ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			{Method: "GET", Path: "/", Header: map[string]string{"X-Fail": "1"}, Status: 401},
			{Method: "GET", Path: "/", Header: map[string]string{"X-Fail": "1"}, Status: 401},
			get("/", 200, map[string]string{"X-RateLimit-Remaining": "0", "RateLimit": `"1-per-1m";r=0;t=60`}),
			get("/", 429, nil),
		},
	},
	{
		Name: "no headers when asked for none; Retry-After stays",
		Options: func(Framework) []ratelimit.Option {
			return []ratelimit.Option{ratelimit.WithHeaders(ratelimit.Headers{NoDraft: true, NoX: true}), ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))}
		},
		Steps: []Step{
			get("/", 200, map[string]string{"RateLimit": "", "RateLimit-Policy": "", "X-RateLimit-Remaining": ""}),
			get("/", 429, map[string]string{"RateLimit": "", "Retry-After": "60"}),
		},
	},
	{
		Name: "an observer sees each request's route pattern, outcome and denying limits",
		Options: func(fw Framework) []ratelimit.Option {
			return []ratelimit.Option{
				ratelimit.WithLimits(ratelimit.PerMinute(5).Using(ratelimit.FixedWindow).Named("api")),
				fw.Routes(map[string][]ratelimit.Limit{
					fw.Pattern(Route{"GET", "/api/:id"}): {ratelimit.PerMinute(1).Using(ratelimit.TokenBucket).Named("items")},
				}),
				ratelimit.WithSkip(func(r ratelimit.Request) bool { return r.(*http.Request).URL.Path == "/healthz" }),
			}
		},
		Steps: []Step{
			get("/api/1", 200, nil),
			get("/api/2", 429, nil),
			get("/", 200, nil),
			get("/healthz", 200, nil),
		},
		Observed: func(fw Framework) []string {
			route := "GET /api/{id}" // as ServeMux writes it, whatever the framework's syntax
			return []string{"allowed " + route + " ", "denied " + route + " items", "allowed  "}
		},
	},
}

// Down is a store whose backend is unreachable.
type Down struct{}

// Allow fails like a client whose server refuses connections.
func (Down) Allow(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
}

// Peek implements ratelimit.Store: it fails like Allow.
func (Down) Peek(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
}

// Reset implements ratelimit.Store: it fails like Allow.
func (Down) Reset(context.Context, string, *ratelimit.Limits) error {
	return errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
}

// End implements ratelimit.Store: it fails like Allow.
func (Down) End(context.Context, string, int, *ratelimit.Limits, ratelimit.Decision) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
}

// NewStore returns a Redis store on a fresh miniredis whose clock stands
// still, so that the headers' times are exact.
func NewStore(t testing.TB) ratelimit.Store {
	m := miniredis.RunT(t)
	m.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	s, err := store.NewRedis(c, store.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Run runs every case through fw.
func Run(t *testing.T, fw Framework) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			var s ratelimit.Store
			if c.Store != nil {
				s = c.Store(t)
			} else {
				s = NewStore(t)
			}
			opts := c.Options(fw)
			var mu sync.Mutex
			var observed []string
			if c.Observed != nil {
				opts = append(opts, ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
					var denying []string
					for _, res := range e.Decision.Results() {
						if !res.Allowed {
							denying = append(denying, res.Limit.Name)
						}
					}
					mu.Lock()
					defer mu.Unlock()
					observed = append(observed, e.Outcome+" "+e.Route+" "+strings.Join(denying, ","))
				}))
			}
			l, err := ratelimit.New(s, "test", opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ls := []*ratelimit.Limiter{l}
			if c.Inner != nil {
				inner, err := ratelimit.New(s, "inner", c.Inner(fw)...)
				if err != nil {
					t.Fatalf("New (inner): %v", err)
				}
				ls = append(ls, inner)
			}
			h := fw.Serve(t, ls...)
			start := time.Now() // before the first step's decision starts its windows
			for i, st := range c.Steps {
				check(t, i, h, st, start)
			}
			if c.Observed != nil {
				mu.Lock()
				defer mu.Unlock()
				if want := c.Observed(fw); strings.Join(observed, "\n") != strings.Join(want, "\n") {
					t.Errorf("the observer saw\n%s\nwant\n%s", strings.Join(observed, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
}

func check(t *testing.T, i int, h http.Handler, st Step, start time.Time) {
	t.Helper()
	r := httptest.NewRequest(st.Method, st.Path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	if st.RemoteAddr != "" {
		r.RemoteAddr = st.RemoteAddr
	}
	for k, v := range st.Header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	where := st.Method + " " + st.Path + " (step " + strconv.Itoa(i) + ")"
	if w.Code != st.Status {
		t.Fatalf("%s: got status %d, want %d; body %q", where, w.Code, st.Status, w.Body.String())
	}
	sent := w.Result().Header // as written with the status, not changed since
	// The seconds a header counts down (RateLimit's t, Retry-After,
	// X-RateLimit-Reset) may have fallen by the whole seconds the case has
	// taken so far: a loaded machine can take more than one between steps.
	passed := int(math.Ceil(time.Since(start).Seconds()))
	for k, want := range st.Want {
		if got := sent.Get(k); got != want && !countedDown(k, got, want, passed) {
			t.Errorf("%s: header %s = %q, want %q (or its seconds up to %d less)", where, k, got, want, passed)
		}
	}
	if !strings.Contains(w.Body.String(), st.Body) {
		t.Errorf("%s: body %q does not contain %q", where, w.Body.String(), st.Body)
	}
	if st.Check != nil {
		if err := st.Check(sent); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
}

// secondsIn finds the seconds a header counts down: every t parameter
// of RateLimit, the whole value of Retry-After and X-RateLimit-Reset.
var secondsIn = map[string]*regexp.Regexp{
	"Ratelimit":         regexp.MustCompile(`;t=(\d+)`),
	"Retry-After":       regexp.MustCompile(`^(\d+)$`),
	"X-Ratelimit-Reset": regexp.MustCompile(`^(\d+)$`),
}

// countedDown reports whether got is want but for seconds counted down
// by at most passed, and never below 0.
func countedDown(key, got, want string, passed int) bool {
	re := secondsIn[http.CanonicalHeaderKey(key)]
	if re == nil {
		return false
	}
	gs, ws := re.FindAllStringSubmatchIndex(got, -1), re.FindAllStringSubmatchIndex(want, -1)
	if len(gs) != len(ws) || len(ws) == 0 {
		return false
	}
	gi, wi := 0, 0
	for n := range ws {
		g, w := gs[n], ws[n]
		if got[gi:g[2]] != want[wi:w[2]] {
			return false
		}
		gv, _ := strconv.Atoi(got[g[2]:g[3]])
		wv, _ := strconv.Atoi(want[w[2]:w[3]])
		if gv > wv || gv < max(wv-passed, 0) {
			return false
		}
		gi, wi = g[3], w[3]
	}
	return got[gi:] == want[wi:]
}
