package ratelimit_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/adaptertest"
)

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
