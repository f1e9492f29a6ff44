package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// A Limiter wraps a handler. Here each client IP may make 3 requests a
// minute; the fourth gets 429 with Retry-After.
func ExampleNew() {
	s, _ := store.NewMemory(store.MemoryOptions{}) // store.NewRedis to share the limit between instances
	limiter, err := ratelimit.New(s, "api",
		ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow)),
	)
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	h := limiter.Handler(hello)

	for range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%d remaining=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 remaining=2 retry-after=""
	// 200 remaining=1 retry-after=""
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="60"
}

// Routes can have limits of their own: here POST /login allows 2 attempts
// a minute per client, counted apart from the 100 a minute of every other
// request.
func ExampleWithRoutes() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	limiter, err := ratelimit.New(s, "web",
		ratelimit.WithLimits(ratelimit.PerMinute(100)),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"POST /login": {ratelimit.PerMinute(2).Using(ratelimit.SlidingLog).Named("login")},
		}),
	)
	if err != nil {
		panic(err)
	}
	h := limiter.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, target := range []string{"/login", "/login", "/login", "/"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", target, nil))
		fmt.Println("POST", target, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// POST /login 200 "login";q=2;w=60
	// POST /login 200 "login";q=2;w=60
	// POST /login 429 "login";q=2;w=60
	// POST / 200 "100-per-1m";q=100;w=60
}

// Plans need no Limiter each: the limits of a request can come from a
// function of it, here a plan named by the caller's API key.
func ExampleWithLimitsFunc() {
	free := []ratelimit.Limit{ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("free")}
	pro := []ratelimit.Limit{ratelimit.PerMinute(100).Using(ratelimit.FixedWindow).Named("pro")}
	secret := []byte("32 bytes from your secret store!")
	apiKey, err := ratelimit.HeaderKey("X-API-Key", secret)
	if err != nil {
		panic(err)
	}
	s, _ := store.NewMemory(store.MemoryOptions{})
	limiter, err := ratelimit.New(s, "api", ratelimit.WithKey(apiKey),
		ratelimit.WithLimitsFunc(func(r ratelimit.Request) []ratelimit.Limit {
			if strings.HasPrefix(r.(*http.Request).Header.Get("X-API-Key"), "pro-") {
				return pro
			}
			return free
		}),
	)
	if err != nil {
		panic(err)
	}
	h := limiter.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, key := range []string{"free-1", "free-1", "pro-1", "pro-1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(key, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// free-1 200 "free";q=1;w=60
	// free-1 429 "free";q=1;w=60
	// pro-1 200 "pro";q=100;w=60
	// pro-1 200 "pro";q=100;w=60
}

// An observer sees every decision: here it counts, per route and limit,
// the requests each limit denied, as a metrics observer would. The event
// holds the route pattern and the limits' names, never the client's key.
func ExampleWithObserver() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	var mu sync.Mutex
	denied := map[string]int{}
	limiter, err := ratelimit.New(s, "api",
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"POST /login": {
				ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("login"),
				ratelimit.PerSecond(5).Using(ratelimit.TokenBucket).Named("burst"),
			},
		}),
		ratelimit.WithObserver(func(r ratelimit.Request, e ratelimit.Event) {
			mu.Lock()
			defer mu.Unlock()
			for _, res := range e.Decision.Results() {
				if !res.Allowed {
					denied[e.Route+" "+res.Limit.Name]++
				}
			}
			fmt.Println(e.Outcome)
		}),
	)
	if err != nil {
		panic(err)
	}
	h := limiter.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 4 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/login", nil))
	}
	fmt.Println(denied)
	// Output:
	// allowed
	// allowed
	// denied
	// denied
	// map[POST /login login:2]
}

// A queue consumer decides each message with the same Limiter as the
// HTTP handlers, by the tenant's key: each tenant gets 2 jobs a minute
// and one at a time, a plan of its own for "acme", and usage charged
// once the job is done, the observer told of each.
func ExampleKey() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	jobs, err := ratelimit.New(s, "jobs",
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"/resize": {ratelimit.PerMinute(2).Named("jobs"), {Algorithm: ratelimit.Concurrent, Quota: 1, Name: "running"}},
		}),
		ratelimit.WithLimitsFunc(func(r ratelimit.Request) []ratelimit.Limit {
			if tenantOf(r.Context()) == "acme" { // a bigger plan
				return []ratelimit.Limit{ratelimit.PerMinute(3).Named("jobs-pro")}
			}
			return nil // the route's
		}),
		ratelimit.WithObserver(func(r ratelimit.Request, e ratelimit.Event) {
			fmt.Printf("-> observed: %s %s\n", e.Route, e.Outcome)
		}),
	)
	if err != nil {
		panic(err)
	}
	type message struct{ tenant, image string }
	queue := []message{{"globex", "a.png"}, {"globex", "b.png"}, {"globex", "c.png"}, {"acme", "d.png"}}
	for _, m := range queue {
		ctx := context.WithValue(context.Background(), tenantKey{}, m.tenant)
		v := jobs.Decide(ratelimit.Key(ctx, "/resize", m.tenant, 1))
		if !v.Allowed {
			fmt.Printf("%s for %s: later, within the minute: %v (%s)\n", m.image, m.tenant, v.RetryAfter > 0 && v.RetryAfter <= time.Minute, v.Decision.Results()[0].Limit.Name)
			continue
		}
		fmt.Printf("%s for %s: resized\n", m.image, m.tenant)
		jobs.End(v.Context) // gives back the running slot
	}
	// Output:
	// -> observed: /resize allowed
	// a.png for globex: resized
	// -> observed: /resize allowed
	// b.png for globex: resized
	// -> observed: /resize denied
	// c.png for globex: later, within the minute: true (jobs)
	// -> observed: /resize allowed
	// d.png for acme: resized
}

// tenantKey is the context key of the tenant a job runs for.
type tenantKey struct{}

func tenantOf(ctx context.Context) string { s, _ := ctx.Value(tenantKey{}).(string); return s }

// A login limit counts only failed attempts: here 2 a minute per client.
func ExampleWithCountOnly() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	logins, err := ratelimit.New(s, "login",
		ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.SlidingLog)),
		ratelimit.WithCountOnly(nil), // responses with status >= 400
	)
	if err != nil {
		panic(err)
	}
	login := logins.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("password") != "letmein" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	for _, password := range []string{"letmein", "letmein", "guess", "guess", "letmein"} {
		w := httptest.NewRecorder()
		login.ServeHTTP(w, httptest.NewRequest("POST", "/login?password="+password, nil))
		fmt.Println(password, w.Code)
	}
	// Output:
	// letmein 200
	// letmein 200
	// guess 401
	// guess 401
	// letmein 429
}

// Peek reads a caller's quota without spending it.
func ExampleLimiter_Peek() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	limiter, err := ratelimit.New(s, "api", ratelimit.WithLimits(ratelimit.PerMinute(10).Using(ratelimit.FixedWindow)))
	if err != nil {
		panic(err)
	}
	h := limiter.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/", nil)
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	for range 2 {
		d, err := limiter.Peek(r)
		fmt.Println(d.Allowed, d.Results()[0].Remaining, err)
	}
	// Output:
	// true 7 <nil>
	// true 7 <nil>
}

// Behind a proxy, the client is the address the proxy adds to
// X-Forwarded-For; one a client wrote itself is not believed.
func ExampleIPKey_KeyFunc() {
	key, err := ratelimit.IPKey{TrustedProxies: []string{"10.0.0.0/8"}}.KeyFunc() // the load balancers' addresses
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.5:41000"                         // the load balancer
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7") // "6.6.6.6" is forged
	fmt.Println(key(r))
	// Output:
	// ip:203.0.113.7 <nil>
}

// An API key is a secret: the key the store sees holds its keyed hash, not
// the key.
func ExampleHeaderKey() {
	secret := []byte("32 bytes from your secret store!") // the same on every instance
	key, err := ratelimit.HeaderKey("X-API-Key", secret)
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "sk_live_abc123")
	k, _ := key(r)
	fmt.Println(k)

	_, err = ratelimit.HeaderKey("X-API-Key", []byte("short"))
	fmt.Println(err)
	// Output:
	// header:X-Api-Key:ce750e73b981cba6b4a91cbbeaa581b6
	// ratelimit: invalid input: HeaderKey("X-API-Key"): the secret is 5 bytes long; at least 16 are needed, the same on every instance
}

// Join keys requests by several things at once, here the user and the
// route, so that each user has a counter per route.
func ExampleJoin() {
	type userKey struct{}
	key := ratelimit.Join(ratelimit.User(userKey{}), ratelimit.Route)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, "alice")) // what authentication would do
		k, err := key(r)
		fmt.Println(k, err)
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/orders/7", nil))
	// Output:
	// 10:user:alice22:route:GET /orders/{id} <nil>
}

func ExampleLimit() {
	limits := []ratelimit.Limit{
		ratelimit.PerMinute(100),
		ratelimit.PerMinute(5).Using(ratelimit.SlidingLog).Named("login"),
		ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Quota: 10, Window: time.Second, Burst: 50},
		ratelimit.Limit{Quota: 10_000, Window: 24 * time.Hour}.Using(ratelimit.FixedWindow),
		{Algorithm: ratelimit.Monthly, Quota: 1_000_000, Zone: "Europe/Paris"},
	}
	for _, l := range limits {
		fmt.Println(l)
	}
	// Output:
	// 100 per 1m, sliding-window
	// login: 5 per 1m, sliding-log
	// 10 per 1s, token-bucket, burst 50
	// 10000 per 24h, fixed-window
	// 1000000 per calendar month in Europe/Paris
}

// NewLimits checks a set of limits once; the error names what is wrong.
func ExampleNewLimits() {
	_, err := ratelimit.NewLimits(
		ratelimit.PerSecond(10),
		ratelimit.PerMinute(200_000).Using(ratelimit.SlidingLog),
	)
	fmt.Println(err)
	// Output:
	// ratelimit: invalid input: limits[1].Quota must be at most 100000 for sliding-log, got 200000: the log keeps one entry per request; use sliding-window (SlidingWindow), which needs a few counters per key (200000 per 1m, sliding-log)
}

func ExampleDecision_Results() {
	// A decision as a store returns it for a request with two limits.
	d := ratelimit.MakeDecision(
		ratelimit.Result{Limit: ratelimit.PerSecond(10), Allowed: true, Remaining: 3},
		ratelimit.Result{Limit: ratelimit.Limit{Quota: 500, Window: time.Hour}, Allowed: false, RetryAfter: 42 * time.Second},
	)
	for _, r := range d.Results() {
		if !r.Allowed {
			fmt.Printf("denied by %v; retry in %v\n", r.Limit, d.RetryAfter)
		}
	}
	// Output:
	// denied by 500 per 1h, sliding-window; retry in 42s
}

// A handler reads the decision of every Limiter that ran for its request:
// here a global limit and a route's, stacked. Their headers add up too:
// RateLimit lists both policies, X-RateLimit-* the tighter one.
func ExampleDecisions() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	global, _ := ratelimit.New(s, "global", ratelimit.WithLimits(ratelimit.PerMinute(100).Using(ratelimit.FixedWindow).Named("global")))
	search, _ := ratelimit.New(s, "search", ratelimit.WithLimits(ratelimit.PerMinute(10).Using(ratelimit.FixedWindow).Named("search")))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, d := range ratelimit.Decisions(r.Context()) {
			for _, res := range d.Results() {
				fmt.Fprintf(w, "%s: %d left\n", res.Limit.Name, res.Remaining)
			}
		}
	})
	h := global.Handler(search.Handler(handler))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
	fmt.Print(w.Body)
	fmt.Println("RateLimit:", w.Header().Get("RateLimit"))
	fmt.Println("X-RateLimit-Limit:", w.Header().Get("X-RateLimit-Limit"))
	// Output:
	// global: 99 left
	// search: 9 left
	// RateLimit: "global";r=99;t=60, "search";r=9;t=60
	// X-RateLimit-Limit: 10
}

// A key that keeps getting denied is banned, for longer each time: here
// the second denial within a minute bans for a minute, and the next ban
// of the series lasts two. The store's clock is pinned so that the output
// is exact.
func ExampleWithBan() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := store.NewMemory(store.MemoryOptions{Clock: func() time.Time { return now }})
	limiter, err := ratelimit.New(s, "login",
		ratelimit.WithLimits(ratelimit.Limit{Quota: 1, Window: time.Hour}.Using(ratelimit.FixedWindow)),
		ratelimit.WithBan(ratelimit.Ban{After: 2, Within: time.Minute, For: time.Minute, Max: time.Hour}),
		ratelimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, d ratelimit.Decision) {
			fmt.Printf("denied, banned for %v\n", d.Banned)
			w.WriteHeader(http.StatusTooManyRequests)
		}),
	)
	if err != nil {
		panic(err)
	}
	h := limiter.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { fmt.Println("served") }))
	try := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
	}
	try() // the hour's one request
	try() // denied by the limit
	try() // denied again: banned for a minute
	now = now.Add(90 * time.Second)
	try() // the ban is over, the hour's limit is not
	try() // banned again, twice as long
	// Output:
	// served
	// denied, banned for 0s
	// denied, banned for 1m0s
	// denied, banned for 0s
	// denied, banned for 2m0s
}
