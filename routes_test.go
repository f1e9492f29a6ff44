package ratelimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

// TestRouteCases: a route table matches by shape, wherever the Limiter
// sits.
func TestRouteCases(t *testing.T) { adaptertest.RunRoutes(t, netHTTP) }

func TestWithRoutesReportsBadTables(t *testing.T) {
	s := adaptertest.NewStore(t)
	one := []ratelimit.Limit{ratelimit.PerMinute(1)}
	tests := []struct {
		name  string
		table map[string][]ratelimit.Limit
		want  string
	}{
		{"bad route limit", map[string][]ratelimit.Limit{"POST /login": {ratelimit.Limit{Quota: 1, Window: 0}}}, `WithRoutes["POST /login"]: limits[0].Window`},
		{"route without limits", map[string][]ratelimit.Limit{"POST /login": nil}, `WithRoutes["POST /login"]: no limits`},
		{"route limits sharing state", map[string][]ratelimit.Limit{"/a": {ratelimit.PerMinute(1), ratelimit.PerMinute(2)}}, `WithRoutes["/a"]: limits[0]`},
		{"bad route pattern", map[string][]ratelimit.Limit{"GET /{x": one}, `WithRoutes: pattern "GET /{x"`},
		{"conflicting route patterns", map[string][]ratelimit.Limit{"/a/{x}": one, "/{y}/b": one}, "WithRoutes: pattern"},
		{"empty pattern", map[string][]ratelimit.Limit{"": one}, `WithRoutes: pattern ""`},
		{"pattern with a bar", map[string][]ratelimit.Limit{"/a|b": one}, `WithRoutes: pattern "/a|b"`},
		{"pattern with NUL", map[string][]ratelimit.Limit{"/a\x00": one}, `WithRoutes: pattern "/a\x00"`},
		// The scope of WithLimits is "*" and a long pattern's is "#" and
		// hex: no pattern may be spelled like either.
		{"pattern *", map[string][]ratelimit.Limit{"*": one}, `WithRoutes: pattern "*"`},
		{"pattern like a hashed scope", map[string][]ratelimit.Limit{"#0123456789abcdef0123456789abcdef": one}, `WithRoutes: pattern "#0123456789abcdef0123456789abcdef"`},
		// A method no request carries would never match: the requests
		// would silently get the default limits.
		{"lower-case method", map[string][]ratelimit.Limit{"post /login": one}, `WithRoutes: pattern "post /login": the method "post" must be upper case, as requests carry it: "POST /login"`},
		{"mixed-case method", map[string][]ratelimit.Limit{"Get /users/{id}": one}, `WithRoutes: pattern "Get /users/{id}": the method "Get" must be upper case, as requests carry it: "GET /users/{id}"`},
		{"method not a token", map[string][]ratelimit.Limit{"G(T /x": one}, `WithRoutes: pattern "G(T /x": the method "G(T" is not an HTTP method token`},
		// Parameters' names do not matter: two patterns of one shape
		// are one route, which the table could not tell apart.
		{"one shape, two names", map[string][]ratelimit.Limit{"GET /users/{id}": one, "GET /users/{name}": one},
			`WithRoutes: patterns "GET /users/{id}" and "GET /users/{name}" are one route, GET /users/{}: the names of parameters do not matter`},
		{"one shape, two rests", map[string][]ratelimit.Limit{"/files/{a...}": one, "/files/{b...}": one}, `patterns "/files/{a...}" and "/files/{b...}" are one route, /files/{...}`},
		{"one shape, spaced apart", map[string][]ratelimit.Limit{"GET /login": one, "GET  /login": one}, `patterns "GET  /login" and "GET /login" are one route, GET /login`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(s, "test", ratelimit.WithRoutes(tt.table))
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming %q", l, err, tt.want)
			}
		})
	}
}

// TestRouteTableAroundTheMux: one Limiter wraps the whole ServeMux, so no
// pattern is known yet; the table's own patterns decide.
func TestRouteTableAroundTheMux(t *testing.T) {
	l := newLimiter(t, adaptertest.NewStore(t), "test",
		ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("api")),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"POST /login":     {ratelimit.PerMinute(1).Using(ratelimit.SlidingLog).Named("login")},
			"/api/{id}/items": {ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("items")},
		}))
	mux := http.NewServeMux()
	mux.HandleFunc("/", adaptertest.OK)
	h := l.Handler(mux)
	steps := []struct {
		method, path string
		status       int
		policy       string
	}{
		{"POST", "/login", 200, `"login";q=1;w=60`},
		{"POST", "/login", 429, `"login";q=1;w=60`},
		{"GET", "/login", 200, `"api";q=3;w=60`}, // another method: the default limits
		{"GET", "/api/1/items", 200, `"items";q=2;w=60`},
		{"GET", "/api/2/items", 200, `"items";q=2;w=60`},
		{"GET", "/api/3/items", 429, `"items";q=2;w=60`},
		{"GET", "/", 200, `"api";q=3;w=60`},
		{"GET", "/other", 200, `"api";q=3;w=60`},
		{"GET", "/", 429, `"api";q=3;w=60`},
	}
	for i, st := range steps {
		w := serve(h, st.method, st.path)
		if w.Code != st.status || w.Header().Get("RateLimit-Policy") != st.policy {
			t.Errorf("step %d %s %s: got %d %q, want %d %q", i, st.method, st.path, w.Code, w.Header().Get("RateLimit-Policy"), st.status, st.policy)
		}
	}
}

// TestRouteTableKeysWithoutMethod: an entry without a method matches a
// route registered with one.
func TestRouteTableKeysWithoutMethod(t *testing.T) {
	l := newLimiter(t, adaptertest.NewStore(t), "test",
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"/login": {ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)}}))
	mux := http.NewServeMux()
	mux.Handle("POST /login", l.Handler(http.HandlerFunc(adaptertest.OK)))
	mux.Handle("GET /open", l.Handler(http.HandlerFunc(adaptertest.OK)))
	for i, want := range []int{200, 429} {
		if w := serve(mux, "POST", "/login"); w.Code != want {
			t.Errorf("login %d: got %d, want %d", i, w.Code, want)
		}
	}
	for range 3 {
		if w := serve(mux, "GET", "/open"); w.Code != 200 || w.Header().Get("RateLimit") != "" {
			t.Errorf("a route with no limits: got %d with RateLimit %q, want 200 and no header", w.Code, w.Header().Get("RateLimit"))
		}
	}
}

// TestRouteLookupAllocatesNothing: finding a route's entry by its shape,
// the router's pattern named otherwise than the table's and the table
// naming a host, costs a request no allocation: it takes as many as one
// the limits of WithLimits decide.
func TestRouteLookupAllocatesNothing(t *testing.T) {
	limit := ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow)
	allocs := func(r *http.Request, opts ...ratelimit.Option) float64 {
		h := newLimiter(t, newMemory(t), "allocs", opts...).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, r)
		return testing.AllocsPerRun(100, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
	}
	r := httptest.NewRequest("GET", "/teams/red/members/ann", nil)
	r.Host = "api.example.com:8080"
	without := allocs(r, ratelimit.WithLimits(limit))
	r.Pattern = "GET /teams/{team}/members/{member}"
	with := allocs(r, ratelimit.WithRoutes(map[string][]ratelimit.Limit{
		"/teams/{t}/members/{m}":       {limit},
		"other.example.com/teams/{t}/": {limit},
		"api.example.com/users/{u}":    {limit},
		"GET /files/{rest...}":         {limit},
	}))
	if with != without {
		t.Errorf("%v allocations per request through the route table, %v through WithLimits", with, without)
	}
}

// TestRouteScopesNeverShareCounters: routes with the same limit as
// WithLimits, and as each other, count apart, each under its pattern in
// the keys Redis holds, escaped so that its braces leave the hash tag
// whole.
func TestRouteScopesNeverShareCounters(t *testing.T) {
	t.Parallel()
	c, prefix := sharedRedis(t)
	limit := ratelimit.PerMinute(2).Using(ratelimit.FixedWindow)
	l := newLimiter(t, newRedisStore(t, c, prefix), "api",
		ratelimit.WithLimits(limit),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"POST /login":     {limit},
			"GET /café/{id}":  {limit},
			"/100%/{rest...}": {limit},
		}))
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	mux := http.NewServeMux()
	for _, p := range []string{"POST /login", "GET /café/{id}", "/100%/{rest...}", "/"} {
		mux.Handle(p, h)
	}
	runSteps(t, []step{
		{mux, "POST", "/login", 200, "1"},
		{mux, "POST", "/login", 200, "0"},
		{mux, "POST", "/login", 429, "0"},
		{mux, "GET", "/caf%C3%A9/1", 200, "1"},
		{mux, "GET", "/caf%C3%A9/2", 200, "0"},
		{mux, "GET", "/caf%C3%A9/3", 429, "0"},
		{mux, "GET", "/100%25/x", 200, "1"},
		{mux, "GET", "/", 200, "1"},
		{mux, "GET", "/login", 200, "0"}, // GET: not the route's method, so WithLimits
		{mux, "GET", "/other", 429, "0"},
	})
	want := []string{
		prefix + "{api|/100%25/%7Brest...%7D|ip:192.0.2.1}:f60000",
		prefix + "{api|*|ip:192.0.2.1}:f60000",
		prefix + "{api|GET /caf%C3%A9/%7Bid%7D|ip:192.0.2.1}:f60000",
		prefix + "{api|POST /login|ip:192.0.2.1}:f60000",
	}
	slices.Sort(want)
	if got := counterKeys(t, c, prefix); !slices.Equal(got, want) {
		t.Errorf("keys in Redis:\ngot  %q\nwant %q", got, want)
	}
}

// TestRoutesInAnotherSyntax: a WithRoutes pattern in Gin's, Echo's or
// chi's syntax is an error at New that names the pattern and how ServeMux
// writes it, never a route that silently falls back to the default
// limits.
func TestRoutesInAnotherSyntax(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /users/:id": `"{id}"`,
		"/static/*":      `"{...}"`,
		"/files/*path":   `"{path...}"`,
	} {
		_, err := ratelimit.New(newMemory(t), "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{pattern: {ratelimit.PerMinute(1)}}))
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "WithRoutes: pattern "+`"`+pattern+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("WithRoutes(%q): got %v, want an ErrInvalid naming the pattern and %s", pattern, err, want)
		}
	}
}
