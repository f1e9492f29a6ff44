package grpclimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

// TestMethods: a method's entry, its service's, and the default limits,
// by what each call's ratelimit-policy names and the route an observer
// is told; a method's entry beats its service's, whose methods share one
// count.
func TestMethods(t *testing.T) {
	table := map[string][]ratelimit.Limit{
		"/grpc.testing.TestService/UnaryCall": {ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("unary")},
		"/grpc.testing.TestService/*":         {ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("service")},
	}
	const (
		exact    = "POST /grpc.testing.TestService/UnaryCall"
		wildcard = "POST /grpc.testing.TestService/{method}"
	)
	for _, tt := range []struct {
		name     string
		defaults bool // the Limiter has limits of WithLimits
		steps    []methodStep
	}{
		{"with default limits", true, []methodStep{
			{unary, codes.OK, `"unary";q=1;w=60`, exact},
			{unary, codes.ResourceExhausted, `"unary";q=1;w=60`, exact}, // not the service's 2
			{empty, codes.OK, `"service";q=2;w=60`, wildcard},
			{stream, codes.OK, `"service";q=2;w=60`, wildcard},
			{duplex, codes.ResourceExhausted, `"service";q=2;w=60`, wildcard},
			{check, codes.OK, `"default";q=100;w=60`, ""},
		}},
		{"without", false, []methodStep{
			{unary, codes.OK, `"unary";q=1;w=60`, exact},
			{check, codes.OK, "", "-"},
			{check, codes.OK, "", "-"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var routes []string
			opts := []ratelimit.Option{grpclimit.Methods(table), ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
				mu.Lock()
				defer mu.Unlock()
				routes = append(routes, e.Route)
			})}
			if tt.defaults {
				opts = append(opts, ratelimit.WithLimits(ratelimit.PerMinute(100).Named("default")))
			}
			r := newRig(t, nil, newLimiter(t, opts...))
			for i, st := range tt.steps {
				mu.Lock()
				routes = routes[:0]
				mu.Unlock()
				md, err := r.call(context.Background(), st.kind)
				if got := refusalOf(err).code; got != st.code {
					t.Errorf("call %d, %s: got %v (%v), want %v", i, st.kind, got, err, st.code)
				}
				if got := strings.Join(md.Get("ratelimit-policy"), " | "); got != st.policy {
					t.Errorf("call %d, %s: ratelimit-policy %q, want %q", i, st.kind, got, st.policy)
				}
				want := []string{st.route}
				if st.route == "-" {
					want = nil
				}
				mu.Lock()
				if !slices.Equal(routes, want) {
					t.Errorf("call %d, %s: the observer was told the routes %q, want %q", i, st.kind, routes, want)
				}
				mu.Unlock()
			}
		})
	}
}

// methodStep is a call of kind and what it must get: its code, its
// ratelimit-policy, and the route the observer is told ("-": not
// observed, no limits applied).
type methodStep struct {
	kind   string
	code   codes.Code
	policy string
	route  string
}

// TestMethodsRefused: an entry that is not a full method name is refused
// when the Limiter is built, naming it and what is wrong.
func TestMethodsRefused(t *testing.T) {
	for _, tt := range []struct {
		entry, want string // want: "" when accepted
	}{
		{"/grpc.testing.TestService/UnaryCall", ""},
		{"/Service/Method", ""},
		{"/a.b_2.C/*", ""},
		{"/_pkg.Svc/Get_2", ""},
		{"grpc.testing.TestService/UnaryCall", "a full method name starts with '/'"},
		{"POST /grpc.testing.TestService/UnaryCall", "a full method name starts with '/'"},
		{"/grpc.testing.TestService", "a full method name is a service and a method"},
		{"/grpc.testing.TestService/UnaryCall/x", "a full method name is a service and a method"},
		{"//UnaryCall", "the service is empty"},
		{"/grpc.testing.TestService/", `the method is empty; "/grpc.testing.TestService/*" is every method of the service`},
		{"/grpc.testing.TestService/Unary*", `"Unary*": a '*' stands for every method of the service, alone`},
		{"/grpc.testing.TestService/**", `"**": a '*' stands for every method of the service, alone`},
		{"/*/UnaryCall", "a '*' stands for every method of one service, not for services"},
		{"/grpc.*/UnaryCall", "a '*' stands for every method of one service, not for services"},
		{"/*/*", "a '*' stands for every method of one service, not for services"},
		{"/grpc..TestService/UnaryCall", `the service "grpc..TestService" is not a proto full name`},
		{"/.grpc.TestService/UnaryCall", `the service ".grpc.TestService" is not a proto full name`},
		{"/grpc.testing.Test-Service/*", `the service "grpc.testing.Test-Service" is not a proto full name`},
		{"/grpc.2testing.TestService/UnaryCall", `the service "grpc.2testing.TestService" is not a proto full name`},
		{"/grpc.testing.TestService/Unary Call", `the method "Unary Call" is not a proto identifier`},
		{"/grpc.testing.TestService/{method}", `the method "{method}" is not a proto identifier`},
		{"/grpc.testing.TestService/2Call", `the method "2Call" is not a proto identifier`},
		{"/grpc.testing.TestService/Ünary", `the method "Ünary" is not a proto identifier`},
	} {
		_, err := ratelimit.New(adaptertest.NewStore(t), "test", grpclimit.Methods(map[string][]ratelimit.Limit{tt.entry: {ratelimit.PerMinute(1)}}))
		if tt.want == "" {
			if err != nil {
				t.Errorf("%q: got %v, want it accepted", tt.entry, err)
			}
			continue
		}
		if want := `ratelimit: invalid input: grpclimit.Methods: "` + tt.entry + `": ` + tt.want; !errors.Is(err, ratelimit.ErrInvalid) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: got %v, want an ErrInvalid saying %q", tt.entry, err, want)
		}
	}
	_, err := ratelimit.New(adaptertest.NewStore(t), "test", grpclimit.Methods(nil))
	if want := "ratelimit: invalid input: grpclimit.Methods: the table is nil"; err == nil || err.Error() != want {
		t.Errorf("a nil table: got %v, want %q", err, want)
	}
	// Of two bad entries, the first in order, every time.
	bad := map[string][]ratelimit.Limit{"/b.S/*x": nil, "/a.S/M*": nil, "/c.S/M": nil}
	for range 3 {
		_, err := ratelimit.New(adaptertest.NewStore(t), "test", grpclimit.Methods(bad))
		if err == nil || !strings.Contains(err.Error(), `"/a.S/M*"`) {
			t.Errorf("two bad entries: got %v, want the error about %q", err, "/a.S/M*")
		}
	}
	// What WithRoutes refuses, it refuses naming the pattern written.
	_, err = ratelimit.New(adaptertest.NewStore(t), "test", grpclimit.Methods(map[string][]ratelimit.Limit{"/a.S/M": {}}))
	if err == nil || !strings.Contains(err.Error(), "POST /a.S/M") {
		t.Errorf("an entry with no limits: got %v, want WithRoutes' error naming %q", err, "POST /a.S/M")
	}
}

// TestMethodsWithRoutes: one Limiter takes gRPC methods (Methods) and
// HTTP routes (WithRoutes) together, in either order: each call and
// request gets its own entry's limits; a pattern in both is refused,
// naming it.
func TestMethodsWithRoutes(t *testing.T) {
	methods := grpclimit.Methods(map[string][]ratelimit.Limit{"/grpc.testing.TestService/UnaryCall": {ratelimit.PerMinute(1).Named("unary")}})
	routes := ratelimit.WithRoutes(map[string][]ratelimit.Limit{"GET /items": {ratelimit.PerMinute(2).Named("items")}})
	for _, order := range [][]ratelimit.Option{{methods, routes}, {routes, methods}} {
		l := newLimiter(t, order...)
		r := newRig(t, nil, l)
		for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
			md, err := r.call(context.Background(), unary)
			if got := refusalOf(err).code; got != want {
				t.Errorf("call %d: got %v, want %v", i, got, want)
			}
			if got := md.Get("ratelimit-policy"); !slices.Equal(got, []string{`"unary";q=1;w=60`}) {
				t.Errorf("call %d: ratelimit-policy %q, want the method's", i, got)
			}
		}
		h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for i, want := range []int{200, 200, 429} {
			w := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/items", nil)
			h.ServeHTTP(w, req)
			if w.Code != want || w.Header().Get("RateLimit-Policy") != `"items";q=2;w=60` {
				t.Errorf("GET /items %d: %d %q, want %d under the route's limits", i, w.Code, w.Header().Get("RateLimit-Policy"), want)
			}
		}
	}
	_, err := ratelimit.New(adaptertest.NewStore(t), "test", methods,
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /grpc.testing.TestService/UnaryCall": {ratelimit.PerMinute(5)}}))
	if want := `pattern "POST /grpc.testing.TestService/UnaryCall" is in two tables`; err == nil || !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("a pattern in both: got %v, want an ErrInvalid saying %q", err, want)
	}
}
