package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/httpcases"
)

// netHTTP serves the test app with Go's ServeMux, the Limiter wrapping
// each route's handler.
var netHTTP = httpcases.Framework{
	Pattern: func(r httpcases.Route) string {
		return r.Method + " " + strings.ReplaceAll(r.Path, ":id", "{id}")
	},
	Serve: func(t *testing.T, l *ratelimit.Limiter) http.Handler {
		mux := http.NewServeMux()
		for _, r := range httpcases.App {
			pattern := r.Method + " " + strings.ReplaceAll(r.Path, ":id", "{id}")
			if r.Path == "/" {
				pattern += "{$}"
			}
			mux.Handle(pattern, l.Handler(http.HandlerFunc(httpcases.OK)))
		}
		return mux
	},
}

func TestHTTPCases(t *testing.T) { httpcases.Run(t, netHTTP) }

func newLimiter(t *testing.T, s ratelimit.Store, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(s, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// serve sends a request to h and returns the response.
func serve(h http.Handler, method, path string, mod ...func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for _, m := range mod {
		m(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestNewReportsBadOptions(t *testing.T) {
	s := httpcases.NewStore(t)
	ok := ratelimit.WithLimits(ratelimit.PerMinute(10))
	tests := []struct {
		name string
		opts []ratelimit.Option
		want string
	}{
		{"no limits", nil, "no limits"},
		{"bad limit", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(0))}, "WithLimits: limits[0].Quota"},
		{"limits sharing state", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1), ratelimit.PerMinute(2))}, "WithLimits: limits[0]"},
		{"name not ASCII", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("café"))}, "limits[0].Name"},
		{"name with a newline", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("a\nb"))}, "limits[0].Name"},
		{"names repeated", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("x"), ratelimit.PerHour(9).Named("x"))}, "limits[1].Name"},
		{"bad route limit", []ratelimit.Option{ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.Per(1, 0)}})}, `WithRoutes["POST /login"]`},
		{"route without limits", []ratelimit.Option{ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": nil})}, `WithRoutes["POST /login"]`},
		{"bad route pattern", []ratelimit.Option{ratelimit.WithRoutes(map[string][]ratelimit.Limit{"GET /{x": {ratelimit.PerMinute(1)}})}, `pattern "GET /{x"`},
		{"conflicting route patterns", []ratelimit.Option{ratelimit.WithRoutes(map[string][]ratelimit.Limit{"/a/{x}": {ratelimit.PerMinute(1)}, "/{y}/b": {ratelimit.PerMinute(1)}})}, "WithRoutes: pattern"},
		{"pattern with a bar", []ratelimit.Option{ratelimit.WithRoutes(map[string][]ratelimit.Limit{"/a|b": {ratelimit.PerMinute(1)}})}, `pattern "/a|b"`},
		{"nil key", []ratelimit.Option{ok, ratelimit.WithKey(nil)}, "WithKey"},
		{"nil cost", []ratelimit.Option{ok, ratelimit.WithCost(nil)}, "WithCost"},
		{"nil skip", []ratelimit.Option{ok, ratelimit.WithSkip(nil)}, "WithSkip"},
		{"nil deny handler", []ratelimit.Option{ok, ratelimit.WithDenyHandler(nil)}, "WithDenyHandler"},
		{"nil error handler", []ratelimit.Option{ok, ratelimit.WithErrorHandler(nil)}, "WithErrorHandler"},
		{"unknown header style", []ratelimit.Option{ok, ratelimit.WithHeaders(ratelimit.HeaderStyle(8))}, "WithHeaders"},
		{"empty namespace", []ratelimit.Option{ok, ratelimit.WithNamespace("")}, "WithNamespace"},
		{"namespace with a bar", []ratelimit.Option{ok, ratelimit.WithNamespace("a|b")}, "WithNamespace"},
		{"nil logger", []ratelimit.Option{ok, ratelimit.WithLogger(nil)}, "WithLogger"},
		{"nil option", []ratelimit.Option{ok, nil}, "option 1 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(s, tt.opts...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming %q", l, err, tt.want)
			}
		})
	}
	if _, err := ratelimit.New(nil, ok); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("New(nil store): got %v, want ErrInvalid", err)
	}
}

func TestDefaultNamespaceIsNotSharedByAccident(t *testing.T) {
	s := httpcases.NewStore(t)
	limits := ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow))
	first := newLimiter(t, s, limits)
	if _, err := ratelimit.New(s, limits); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "WithNamespace") {
		t.Fatalf("second Limiter in the default namespace: got %v, want an error pointing to WithNamespace", err)
	}
	second := newLimiter(t, s, limits, ratelimit.WithNamespace("login"))
	// Same key, same limit, different namespaces: separate counters.
	for _, l := range []*ratelimit.Limiter{first, second} {
		h := l.Handler(http.HandlerFunc(httpcases.OK))
		if w := serve(h, "GET", "/"); w.Code != 200 {
			t.Errorf("first request: got %d, want 200", w.Code)
		}
		if w := serve(h, "GET", "/"); w.Code != 429 {
			t.Errorf("second request: got %d, want 429", w.Code)
		}
	}
	// Once the first Limiter is gone, the default namespace is free.
	runtime.KeepAlive(first)
	first = nil
	runtime.GC()
	runtime.GC()
	if _, err := ratelimit.New(s, limits); err != nil {
		t.Errorf("after the first Limiter was collected: %v", err)
	}
}

// TestRouteTableAroundTheMux: one Limiter wraps the whole ServeMux, so no
// pattern is known yet; the table's own patterns decide.
func TestRouteTableAroundTheMux(t *testing.T) {
	l := newLimiter(t, httpcases.NewStore(t),
		ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("api")),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{
			"POST /login":     {ratelimit.PerMinute(1).Using(ratelimit.SlidingLog).Named("login")},
			"/api/{id}/items": {ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("items")},
		}))
	mux := http.NewServeMux()
	mux.HandleFunc("/", httpcases.OK)
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
	l := newLimiter(t, httpcases.NewStore(t),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"/login": {ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)}}))
	mux := http.NewServeMux()
	mux.Handle("POST /login", l.Handler(http.HandlerFunc(httpcases.OK)))
	mux.Handle("GET /open", l.Handler(http.HandlerFunc(httpcases.OK)))
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

func TestReset(t *testing.T) {
	login := ratelimit.PerMinute(2).Using(ratelimit.SlidingLog)
	l := newLimiter(t, httpcases.NewStore(t), ratelimit.WithLimits(login))
	h := l.Handler(http.HandlerFunc(httpcases.OK))
	serve(h, "POST", "/login")
	serve(h, "POST", "/login")
	if w := serve(h, "POST", "/login"); w.Code != 429 {
		t.Fatalf("third attempt: got %d, want 429", w.Code)
	}
	r := httptest.NewRequest("POST", "/login", nil)
	r.RemoteAddr = "192.0.2.1:999"
	if err := l.Reset(r); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if w := serve(h, "POST", "/login"); w.Code != 200 {
		t.Errorf("after Reset: got %d, want 200", w.Code)
	}
	down := newLimiter(t, httpcases.Down{}, ratelimit.WithLimits(login))
	if err := down.Reset(r); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Reset on a store without Reset: got %v, want ErrInvalid", err)
	}
}

func TestDryRunReports(t *testing.T) {
	var reported []ratelimit.Decision
	l := newLimiter(t, httpcases.NewStore(t),
		ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)),
		ratelimit.WithDryRun(func(r *http.Request, d ratelimit.Decision) { reported = append(reported, d) }))
	h := l.Handler(http.HandlerFunc(httpcases.OK))
	for range 3 {
		if w := serve(h, "GET", "/"); w.Code != 200 {
			t.Fatalf("dry run: got %d, want 200", w.Code)
		}
	}
	if len(reported) != 2 || reported[0].Allowed {
		t.Fatalf("got %d reports (%+v), want 2 denials", len(reported), reported)
	}
}

// failing is a store whose error text must never reach a client.
type failing struct{ err error }

func (f failing) Allow(context.Context, string, int, ...ratelimit.Limit) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, f.err
}

func TestStoreErrors(t *testing.T) {
	secret := errors.New("dial tcp 10.20.30.40:6379: i/o timeout (password=hunter2)")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	var handled error
	custom := func(w http.ResponseWriter, r *http.Request, err error) bool {
		handled = err
		http.Error(w, "try later", http.StatusTeapot)
		return false
	}
	for _, tt := range []struct {
		name    string
		handler ratelimit.ErrorHandler
		status  int
	}{
		{"fail open", ratelimit.FailOpen, 200},
		{"fail closed", ratelimit.FailClosed, 503},
		{"custom", custom, 418},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, failing{secret}, ratelimit.WithLimits(ratelimit.PerMinute(1)), ratelimit.WithErrorHandler(tt.handler), ratelimit.WithLogger(logger))
			for _, accept := range []string{"", "application/json"} {
				w := serve(l.Handler(http.HandlerFunc(httpcases.OK)), "GET", "/", func(r *http.Request) { r.Header.Set("Accept", accept) })
				if w.Code != tt.status {
					t.Errorf("got %d, want %d", w.Code, tt.status)
				}
				if body := w.Body.String(); strings.Contains(body, "10.20.30.40") || strings.Contains(body, "hunter2") {
					t.Errorf("the store's error reached the client: %q", body)
				}
			}
		})
	}
	if !errors.Is(handled, secret) {
		t.Errorf("the custom handler got %v, want the store's error", handled)
	}
	if !strings.Contains(logs.String(), "store failed") {
		t.Errorf("the failure was not logged: %q", logs.String())
	}
}

func TestLogsAreThrottled(t *testing.T) {
	var logs bytes.Buffer
	l := newLimiter(t, failing{errors.New("down")}, ratelimit.WithLimits(ratelimit.PerMinute(1)),
		ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h := l.Handler(http.HandlerFunc(httpcases.OK))
	for range 100 {
		serve(h, "GET", "/")
	}
	if n := strings.Count(logs.String(), "store failed"); n < 1 || n > 2 {
		t.Errorf("100 failures within a second logged %d lines, want 1 (2 if a second turned)", n)
	}
}

func TestLongKeysAreHashed(t *testing.T) {
	l := newLimiter(t, httpcases.NewStore(t), ratelimit.WithKey(ratelimit.Header("X-API-Key")),
		ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)))
	h := l.Handler(http.HandlerFunc(httpcases.OK))
	long := strings.Repeat("k", 5000)
	for i, tt := range []struct {
		key  string
		want int
	}{{long, 200}, {long, 429}, {long + "x", 200}, {long[:4999] + "j", 200}} {
		w := serve(h, "GET", "/", func(r *http.Request) { r.Header.Set("X-API-Key", tt.key) })
		if w.Code != tt.want {
			t.Errorf("request %d: got %d, want %d", i, w.Code, tt.want)
		}
	}
}

// TestHeadersAreStructuredFields formats policies with names of every
// printable ASCII byte and parses them back with an RFC 9651 list parser.
func TestHeadersAreStructuredFields(t *testing.T) {
	names := []string{"api", `a "quoted" name`, `back\slash`, " spaced ", "~!@#$%^&*()_+{}|:<>?"}
	for i := 0x20; i < 0x7f; i += 8 {
		var b strings.Builder
		for c := i; c < min(i+8, 0x7f); c++ {
			b.WriteByte(byte(c))
		}
		names = append(names, b.String())
	}
	for _, name := range names {
		l := newLimiter(t, httpcases.NewStore(t), ratelimit.WithLimits(
			ratelimit.PerMinute(7).Using(ratelimit.FixedWindow).Named(name),
			ratelimit.Per(3, 1500*time.Millisecond).Using(ratelimit.TokenBucket).WithBurst(6)))
		w := serve(l.Handler(http.HandlerFunc(httpcases.OK)), "GET", "/")
		policy, err := parseSFList(w.Header().Get("RateLimit-Policy"))
		if err != nil {
			t.Fatalf("name %q: RateLimit-Policy %q: %v", name, w.Header().Get("RateLimit-Policy"), err)
		}
		want := []sfItem{
			{name, map[string]int64{"q": 7, "w": 60}},
			{"3-per-1.5s", map[string]int64{"q": 6, "w": 3}}, // a burst of 6 refills in 3s
		}
		if !reflect.DeepEqual(policy, want) {
			t.Errorf("name %q: RateLimit-Policy parses to %+v, want %+v", name, policy, want)
		}
		current, err := parseSFList(w.Header().Get("RateLimit"))
		if err != nil || len(current) != 1 || current[0].params["r"] < 0 {
			t.Errorf("name %q: RateLimit %q: %+v, %v", name, w.Header().Get("RateLimit"), current, err)
		}
	}
}

type sfItem struct {
	name   string
	params map[string]int64
}

// parseSFList parses an RFC 9651 List whose items are Strings or Tokens
// with Integer parameters; it rejects anything else.
func parseSFList(s string) ([]sfItem, error) {
	var items []sfItem
	i := 0
	for {
		var it sfItem
		switch {
		case i < len(s) && s[i] == '"':
			var b strings.Builder
			for i++; ; i++ {
				if i >= len(s) {
					return nil, errors.New("unterminated string")
				}
				c := s[i]
				if c == '\\' {
					if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
						return nil, errors.New("bad escape")
					}
					i++
					b.WriteByte(s[i])
					continue
				}
				if c == '"' {
					i++
					break
				}
				if c < 0x20 || c > 0x7e {
					return nil, fmt.Errorf("byte %#x in a string", c)
				}
				b.WriteByte(c)
			}
			it.name = b.String()
		case i < len(s) && (s[i] == '*' || unicode.IsLetter(rune(s[i]))):
			j := i
			for j < len(s) && strings.IndexByte(":/!#$%&'*+-.^_`|~", s[j]) >= 0 || j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			it.name, i = s[i:j], j
		default:
			return nil, fmt.Errorf("no item at %d", i)
		}
		it.params = map[string]int64{}
		for i < len(s) && s[i] == ';' {
			i++
			j := i
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_' || s[j] == '-' || s[j] == '.' || s[j] == '*') {
				j++
			}
			if j == i || s[j] != '=' {
				return nil, fmt.Errorf("bad parameter at %d", i)
			}
			key := s[i:j]
			i = j + 1
			j = i
			if j < len(s) && s[j] == '-' {
				j++
			}
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, err := strconv.ParseInt(s[i:j], 10, 64)
			if err != nil || j-i > 15 {
				return nil, fmt.Errorf("bad integer %q", s[i:j])
			}
			it.params[key], i = n, j
		}
		items = append(items, it)
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return items, nil
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("want ',' at %d", i)
		}
		i++
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return nil, errors.New("trailing comma")
		}
	}
}
