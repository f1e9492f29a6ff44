package adaptertest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// RouteApp is the app of RouteCases: every route answers as OK does. A
// path's parameters are written ":name", the rest of a path "*name".
var RouteApp = []Route{
	{"GET", "/"}, {"GET", "/healthz"}, {"POST", "/login"},
	{"GET", "/users/:id"}, {"DELETE", "/users/:id"}, {"GET", "/users/me"},
	{"GET", "/teams/:team/members/:member"}, {"GET", "/files/*path"},
	{"GET", "/docs/"},
}

// ServeMux writes r as a pattern of ServeMux: ":name" as "{name}",
// "*name" as "{name...}", and a final "/" as "/{$}", which, like Gin's and
// Echo's "/", matches that path alone.
func (r Route) ServeMux() string {
	segments := strings.Split(r.Path, "/")
	for i, seg := range segments {
		switch {
		case strings.HasPrefix(seg, ":"):
			segments[i] = "{" + seg[1:] + "}"
		case strings.HasPrefix(seg, "*"):
			segments[i] = "{" + seg[1:] + "...}"
		case seg == "" && i > 0 && i == len(segments)-1:
			segments[i] = "{$}"
		}
	}
	return r.Method + " " + strings.Join(segments, "/")
}

// ColonSyntax writes a ServeMux pattern the way Gin and Echo write their
// routes, "{name}" as ":name", "{name...}" as "*name" and a final "/{$}"
// as "/"; false for what they cannot write: a host, or a final "/" that
// is a prefix of every path below it.
func ColonSyntax(pattern string) (string, bool) {
	method, path := "", pattern
	if i := strings.IndexByte(pattern, ' '); i > 0 {
		method, path = pattern[:i+1], pattern[i+1:]
	}
	path, exact := strings.CutSuffix(path, "{$}")
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") && !exact {
		return "", false
	}
	segments := strings.Split(path, "/")
	for i, seg := range segments {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if rest, ok := strings.CutSuffix(name, "..."); ok {
				segments[i] = "*" + rest
			} else {
				segments[i] = ":" + name
			}
		}
	}
	return method + strings.Join(segments, "/"), true
}

// A Placement is a place a Limiter sits in an app: around the router,
// before it routes a request, or inside it, after.
type Placement struct {
	Name string
	// Serve returns a handler serving app with l in that place.
	Serve func(l *ratelimit.Limiter, app []Route) http.Handler
}

// RouteStep is a request and the route table's entry whose limits it
// must get.
type RouteStep struct {
	Method, Host, Path string // Host "": httptest's, example.com
	Want               string // a pattern of the table; "": the default limits
}

// RouteCase is a route table, its patterns written the ServeMux way, and
// requests to RouteApp.
type RouteCase struct {
	Name  string
	Table []string
	Steps []RouteStep
}

// RouteCases is the table of how a route table matches, which every
// framework runs in every placement: by the shape of the route, whatever
// its parameters are called and wherever the Limiter sits.
var RouteCases = []RouteCase{
	{
		Name:  "a parameter named otherwise than the router's",
		Table: []string{"GET /users/{name}", "GET /users/me"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/users/1", Want: "GET /users/{name}"},
			{Method: "GET", Path: "/users/me", Want: "GET /users/me"},
			{Method: "DELETE", Path: "/users/1"},
			{Method: "GET", Path: "/healthz"},
		},
	},
	{
		Name:  "the rest of a path, named otherwise",
		Table: []string{"GET /files/{rest...}"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/files/a", Want: "GET /files/{rest...}"},
			{Method: "GET", Path: "/files/a/b/c", Want: "GET /files/{rest...}"},
			{Method: "GET", Path: "/"},
		},
	},
	{
		Name:  "several parameters",
		Table: []string{"GET /teams/{t}/members/{m}"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/teams/red/members/ann", Want: "GET /teams/{t}/members/{m}"},
			{Method: "GET", Path: "/users/1"},
		},
	},
	{
		Name:  "an exact segment is not a parameter",
		Table: []string{"GET /users/me"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/users/me", Want: "GET /users/me"},
			{Method: "GET", Path: "/users/1"},
		},
	},
	{
		Name:  "an entry without a method matches every method, one with the request's wins",
		Table: []string{"/users/{who}", "DELETE /users/{whom}", "GET /users/me"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/users/1", Want: "/users/{who}"},
			{Method: "DELETE", Path: "/users/1", Want: "DELETE /users/{whom}"},
			{Method: "GET", Path: "/users/me", Want: "GET /users/me"},
		},
	},
	{
		Name:  "an entry for the request's host wins over one for every host",
		Table: []string{"api.example.com/users/{u}", "GET /users/{id}"},
		Steps: []RouteStep{
			{Method: "GET", Host: "api.example.com", Path: "/users/1", Want: "api.example.com/users/{u}"},
			{Method: "GET", Host: "api.example.com:8080", Path: "/users/2", Want: "api.example.com/users/{u}"},
			{Method: "DELETE", Host: "api.example.com", Path: "/users/3", Want: "api.example.com/users/{u}"},
			{Method: "GET", Path: "/users/1", Want: "GET /users/{id}"},
			{Method: "DELETE", Path: "/users/1"},
		},
	},
	{
		Name:  "a path ending in / is that path alone, as Gin and Echo match it",
		Table: []string{"GET /{$}", "GET /docs/{$}"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/", Want: "GET /{$}"},
			{Method: "GET", Path: "/docs/", Want: "GET /docs/{$}"},
			{Method: "GET", Path: "/healthz"},
		},
	},
	{
		Name:  "an entry ending in / covers the route of that path alone",
		Table: []string{"GET /docs/"},
		Steps: []RouteStep{
			{Method: "GET", Path: "/docs/", Want: "GET /docs/"},
			{Method: "GET", Path: "/users/1"},
		},
	},
	{
		Name:  "a route not in the table gets the default limits",
		Table: []string{"POST /login"},
		Steps: []RouteStep{
			{Method: "POST", Path: "/login", Want: "POST /login"},
			{Method: "GET", Path: "/healthz"},
			{Method: "GET", Path: "/"},
			{Method: "GET", Path: "/users/1"},
		},
	},
}

// RunRoutes runs every route case through every placement of fw, with
// the table given to ratelimit.WithRoutes and, when fw.Syntax can write
// it, to fw.Routes.
func RunRoutes(t *testing.T, fw Framework) {
	for _, pl := range fw.Placements {
		for _, c := range RouteCases {
			t.Run(pl.Name+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				table := make(map[string][]ratelimit.Limit, len(c.Table))
				own := make(map[string][]ratelimit.Limit, len(c.Table))
				for _, p := range c.Table {
					table[p] = []ratelimit.Limit{routeLimit(c.Table, p)}
					if own != nil && fw.Syntax != nil {
						if q, ok := fw.Syntax(p); ok {
							own[q] = table[p]
						} else {
							own = nil // one pattern fw cannot write: the table only the ServeMux way
						}
					}
				}
				t.Run("WithRoutes", func(t *testing.T) { runRoutes(t, pl, c, ratelimit.WithRoutes(table)) })
				if own != nil && fw.Syntax != nil {
					t.Run("Routes", func(t *testing.T) { runRoutes(t, pl, c, fw.Routes(own)) })
				}
			})
		}
	}
}

// routeLimit is the limit of a pattern of table: named for its place in
// it, so that the RateLimit-Policy field says which entry applied.
func routeLimit(table []string, pattern string) ratelimit.Limit {
	return ratelimit.PerMinute(100).Named("route-" + strconv.Itoa(slices.Index(table, pattern)))
}

// runRoutes serves c's steps through a Limiter of routes in pl, and
// checks which entry each got, by its limit and by the route an
// observer is told.
func runRoutes(t *testing.T, pl Placement, c RouteCase, routes ratelimit.Option) {
	s, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var observed []string
	l, err := ratelimit.New(s, "test", routes,
		ratelimit.WithLimits(ratelimit.PerMinute(100).Named("default")),
		ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, e.Route)
		}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := pl.Serve(l, RouteApp)
	for _, st := range c.Steps {
		r := httptest.NewRequest(st.Method, st.Path, nil)
		if st.Host != "" {
			r.Host = st.Host
		}
		r.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		mu.Lock()
		observed = observed[:0]
		mu.Unlock()
		h.ServeHTTP(w, r)
		where := st.Method + " " + r.Host + st.Path
		if w.Code != http.StatusOK {
			t.Errorf("%s: got status %d, want 200; body %q", where, w.Code, w.Body.String())
			continue
		}
		name := "default"
		if st.Want != "" {
			name = routeLimit(c.Table, st.Want).Name
		}
		if got, want := w.Result().Header.Get("RateLimit-Policy"), strconv.Quote(name)+";q=100;w=60"; got != want {
			t.Errorf("%s: got RateLimit-Policy %q, want %q: the limits of %q", where, got, want, st.Want)
		}
		mu.Lock()
		if want := []string{st.Want}; !slices.Equal(observed, want) {
			t.Errorf("%s: the observer was told the routes %q, want %q", where, observed, want)
		}
		mu.Unlock()
	}
}
