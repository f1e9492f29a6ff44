package adaptertest

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// AdapterApp is what an adapter's Middleware serves: GET / and GET
// /items/:id answer 200 with no body, as the framework's handlers write
// it (Gin's c.Status, Echo's c.NoContent). The handlers of GET /fail and
// GET /panic charge 10 units of usage (see ratelimit.Charge), then the
// first fails as the framework's handlers do (Gin's c.AbortWithStatus,
// Echo's returned echo.HTTPError) with a 401, and the second panics,
// answered by a recovery in front of the adapter's middleware (Gin's
// Recovery, or one around the server).
var AdapterApp = []Route{{"GET", "/"}, {"GET", "/items/:id"}, {"GET", "/fail"}, {"GET", "/panic"}}

// RunAdapter runs what a framework adapter adds to the middleware of
// net/http through fw, whose Name and Middleware must be set: its
// middleware panics when built for a nil Limiter; its skipper exempts
// requests; a request's slot is given back and its usage charged however
// the handlers end; a count-only Limiter counts a failure by the status
// the framework writes for it; and its Routes option writes its syntax
// the ServeMux way, refusing what ServeMux cannot write.
func RunAdapter(t *testing.T, fw Framework) {
	t.Run("New(nil) panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("New(nil) did not panic")
			}
		}()
		fw.Middleware(nil, nil)
	})
	t.Run("skipper", func(t *testing.T) {
		h := fw.Middleware(newLimiter(t, ratelimit.WithLimits(ratelimit.PerMinute(1))),
			func(r *http.Request) bool { return r.Header.Get("X-Internal") == "1" })
		for i, tt := range []struct {
			internal bool
			want     int
		}{{false, 200}, {false, 429}, {true, 200}, {true, 200}} {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.internal {
				r.Header.Set("X-Internal", "1")
			}
			if got := serve(h, r).Code; got != tt.want {
				t.Errorf("request %d: got %d, want %d", i, got, tt.want)
			}
		}
	})
	t.Run("a slot given back however the handlers end", func(t *testing.T) {
		l := newLimiter(t, ratelimit.WithLimits(
			ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "slot"},
			ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Minute, Usage: true, Name: "tokens"},
		))
		h := fw.Middleware(l, nil)
		for i, path := range []string{"/fail", "/panic", "/fail", "/panic"} {
			if serve(h, httptest.NewRequest("GET", path, nil)).Code == http.StatusTooManyRequests {
				t.Fatalf("request %d (%s): 429: an earlier request kept its slot", i, path)
			}
		}
		d, err := l.Peek(httptest.NewRequest("GET", "/", nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Results()[1].Remaining; got != 60 {
			t.Errorf("tokens left: %d, want 60: each of the 4 requests charged its 10", got)
		}
	})
	t.Run("count only a failure, as the framework writes it", func(t *testing.T) {
		// A failure counts the 10 units its handler charges; a success
		// nothing.
		h := fw.Middleware(newLimiter(t, ratelimit.WithCountOnly(nil), ratelimit.WithLimits(ratelimit.PerMinute(20).Using(ratelimit.FixedWindow))), nil)
		for i, tt := range []struct {
			path string
			want int
		}{{"/", 200}, {"/fail", 401}, {"/", 200}, {"/fail", 401}, {"/fail", 429}, {"/", 429}} {
			if got := serve(h, httptest.NewRequest("GET", tt.path, nil)).Code; got != tt.want {
				t.Errorf("request %d (%s): got %d, want %d", i, tt.path, got, tt.want)
			}
		}
	})
	t.Run("Routes", func(t *testing.T) { runSyntax(t, fw) })
}

// runSyntax checks fw.Routes: it refuses what ServeMux cannot write,
// naming the pattern, and a table in its syntax limits the same routes
// as the same table given to ratelimit.WithRoutes, wherever the Limiter
// sits.
func runSyntax(t *testing.T, fw Framework) {
	option := fw.Name + ".Routes"
	own := func(table map[string][]ratelimit.Limit) map[string][]ratelimit.Limit {
		m := make(map[string][]ratelimit.Limit, len(table))
		for p, limits := range table {
			q, ok := fw.Syntax(p)
			if !ok {
				t.Fatalf("%s cannot write %q", fw.Name, p)
			}
			m[q] = limits
		}
		return m
	}
	for pattern, want := range map[string]string{
		"GET /users/{id}": `"{id}" is ServeMux syntax`,
		"/v:version/x":    "fills a whole segment",
		"/a/*rest/b":      "a catch-all must end the path",
		"post /login":     `the method "post" must be upper case, as requests carry it: "POST /login"`,
		"get /users/:id":  `the method "get" must be upper case, as requests carry it: "GET /users/:id"`,
	} {
		_, err := ratelimit.New(NewStore(t), "test", fw.Routes(map[string][]ratelimit.Limit{pattern: {ratelimit.PerMinute(1)}}))
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), option+`: pattern "`+pattern+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an ErrInvalid naming the pattern and %q", pattern, err, want)
		}
	}
	for _, tt := range []struct {
		name  string
		table []string // in ServeMux's syntax
	}{
		{"two patterns of one shape", []string{"GET /users/{id}", "GET /users/{name}"}},
		{"two rests of one shape", []string{"/files/{path...}", "/files/{other...}"}},
	} {
		table := own(map[string][]ratelimit.Limit{tt.table[0]: {ratelimit.PerMinute(1)}, tt.table[1]: {ratelimit.PerMinute(2)}})
		names := slices.Sorted(maps.Keys(table))
		_, err := ratelimit.New(NewStore(t), "test", fw.Routes(table))
		if want := option + ": pattern " + strconv.Quote(names[1]) + ": " + strconv.Quote(names[0]) + " is the same route"; !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an ErrInvalid saying %q", tt.name, err, want)
		}
	}
	_, err := ratelimit.New(NewStore(t), "test", fw.Routes(map[string][]ratelimit.Limit{"/users/:id": {ratelimit.PerMinute(1)}, "GET /users/:id": {ratelimit.PerMinute(2)}, "/users/{id}x": nil}))
	if !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("a table with braces: got %v, want ErrInvalid", err)
	}

	table := map[string][]ratelimit.Limit{"GET /users/{id}": {ratelimit.PerMinute(1).Named("users")}, "/files/{path...}": {ratelimit.PerMinute(1).Named("files")}}
	app := []Route{{"GET", "/users/:id"}, {"GET", "/files/*path"}}
	for _, pl := range fw.Placements {
		for _, routes := range []struct {
			name   string
			option ratelimit.Option
		}{{option, fw.Routes(own(table))}, {"ratelimit.WithRoutes", ratelimit.WithRoutes(table)}} {
			var mu sync.Mutex
			var observed []string
			h := pl.Serve(newLimiter(t, routes.option, ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
				mu.Lock()
				defer mu.Unlock()
				observed = append(observed, e.Route)
			})), app)
			for i, st := range []struct {
				path string
				want int
			}{{"/users/1", 200}, {"/users/1", 429}, {"/files/a/b", 200}, {"/files/a/b", 429}} {
				r := httptest.NewRequest("GET", st.path, nil)
				if got := serve(h, r).Code; got != st.want {
					t.Errorf("%s, %s, request %d (%s): got %d, want %d", pl.Name, routes.name, i, st.path, got, st.want)
				}
				if r.Pattern != "" {
					t.Errorf("%s, %s, %s: the server's request was left with Pattern %q", pl.Name, routes.name, st.path, r.Pattern)
				}
			}
			mu.Lock()
			if want := []string{"GET /users/{id}", "GET /users/{id}", "/files/{path...}", "/files/{path...}"}; !slices.Equal(observed, want) {
				t.Errorf("%s, %s: observed routes %q, want %q: the ServeMux way", pl.Name, routes.name, observed, want)
			}
			mu.Unlock()
		}
	}
}

// newLimiter returns a Limiter of opts on NewStore, failing t on an
// error.
func newLimiter(t *testing.T, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(NewStore(t), "test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve serves r through h.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Benchmark is the request path through fw.Middleware on the Memory
// store, as the root package's BenchmarkMiddlewareMemory is through
// net/http: 4,096 returning clients keyed by IP, allowed, on GET
// /items/:id, a route with a parameter (whose pattern the adapter writes
// the ServeMux way).
func Benchmark(b *testing.B, fw Framework) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ratelimit.New(s, "bench", ratelimit.WithLimits(ratelimit.PerMinute(1_000_000).Using(ratelimit.FixedWindow)))
	if err != nil {
		b.Fatal(err)
	}
	h := fw.Middleware(l, nil)
	reqs := make([]*http.Request, 4096)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/items/7", nil)
		reqs[i].RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
	}
	w := httptest.NewRecorder()
	for _, r := range reqs {
		h.ServeHTTP(w, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		clear(w.Header())
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
}
