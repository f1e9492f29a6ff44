package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/grpclimit"
)

// TestNilLimiter: both interceptors panic, when built, for a nil
// Limiter.
func TestNilLimiter(t *testing.T) {
	for name, build := range map[string]func(){
		"UnaryServerInterceptor":  func() { grpclimit.UnaryServerInterceptor(nil) },
		"StreamServerInterceptor": func() { grpclimit.StreamServerInterceptor(nil) },
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), name) {
					t.Errorf("%s(nil): got panic %v, want one naming it", name, p)
				}
			}()
			build()
		}()
	}
}

// step is a call and what it must get: its code, and each field of
// header metadata; "" means absent.
type step struct {
	md   []string // the call's metadata, key, value, ...
	code codes.Code
	want map[string]string
}

// runSteps makes the calls of steps, of kind, through r, in order.
func runSteps(t *testing.T, r *rig, kind string, steps []step) {
	t.Helper()
	for i, st := range steps {
		md, err := r.call(context.Background(), kind, st.md...)
		if got := refusalOf(err).code; got != st.code {
			t.Errorf("%s, call %d %q: got %v (%v), want %v", kind, i, st.md, got, err, st.code)
		}
		for k, want := range st.want {
			if got := strings.Join(md.Get(k), " | "); got != want {
				t.Errorf("%s, call %d %q: got %s %q, want %q", kind, i, st.md, k, got, want)
			}
		}
	}
}

// TestQuota: the rate-limit fields go with allowed and denied calls
// alike, unary and streaming, in the header of an admitted call and the
// trailer of a refused one, sent Trailers-Only; the call past the quota
// is ResourceExhausted, whose details say when to retry and which policy
// denied, and the text of which is fixed.
func TestQuota(t *testing.T) {
	for _, kind := range []string{unary, stream, duplex} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, nil, newLimiter(t, ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("api"))))
			runSteps(t, r, kind, []step{
				{code: codes.OK, want: map[string]string{"ratelimit-policy": `"api";q=2;w=60`, "ratelimit": `"api";r=1;t=60`, "retry-after": "", "x-ratelimit-remaining": ""}},
				{code: codes.OK, want: map[string]string{"ratelimit": `"api";r=0;t=60`}},
				{code: codes.ResourceExhausted, want: map[string]string{"ratelimit-policy": `"api";q=2;w=60`, "ratelimit": `"api";r=0;t=60`, "retry-after": "60"}},
			})
			header, trailer, err := r.callFull(context.Background(), kind)
			checkTrailersOnly(t, header, trailer, err)
			got := refusalOf(err)
			want := refused{codes.ResourceExhausted, "rate limit exceeded", time.Minute, []string{"api: api: 2 per 1m, fixed-window"}}
			if got.code != want.code || got.msg != want.msg || got.retry != want.retry || !slices.Equal(got.violations, want.violations) {
				t.Errorf("the denial: got %+v, want %+v", got, want)
			}
			if got.retry <= 0 || got.retry > time.Minute {
				t.Errorf("retry delay %v, want more than 0 and at most the window", got.retry)
			}
		})
	}
}

// TestDenials: what a denied call's details say: each limit that denied,
// and a ban's message and delay.
func TestDenials(t *testing.T) {
	tests := []struct {
		name  string
		opts  []ratelimit.Option
		calls int // before the one checked
		want  refused
	}{
		{
			name: "two limits, one denies",
			opts: []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("minute"),
				ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Hour, Name: "hour"})},
			calls: 1,
			want:  refused{codes.ResourceExhausted, "rate limit exceeded", time.Minute, []string{"minute: minute: 1 per 1m, fixed-window"}},
		},
		{
			name: "two limits, both deny",
			opts: []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("minute"),
				ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 1, Window: time.Hour, Name: "hour"})},
			calls: 1,
			want:  refused{codes.ResourceExhausted, "rate limit exceeded", time.Hour, []string{"minute: minute: 1 per 1m, fixed-window", "hour: hour: 1 per 1h, fixed-window"}},
		},
		{
			name: "a banned key",
			opts: []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("minute")),
				ratelimit.WithBan(ratelimit.Ban{After: 2, Within: time.Minute, For: 10 * time.Minute})},
			calls: 2,
			want:  refused{codes.ResourceExhausted, "banned after repeated denials", 10 * time.Minute, []string{"minute: minute: 1 per 1m, fixed-window"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, nil, newLimiter(t, tt.opts...))
			for range tt.calls {
				r.call(context.Background(), unary)
			}
			md, err := r.call(context.Background(), unary)
			got := refusalOf(err)
			if got.code != tt.want.code || got.msg != tt.want.msg || got.retry != tt.want.retry || !slices.Equal(got.violations, tt.want.violations) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got, want := md.Get("retry-after"), []string{fmtSeconds(tt.want.retry)}; !slices.Equal(got, want) {
				t.Errorf("retry-after %q, want %q: RetryInfo's delay", got, want)
			}
		})
	}
}

func fmtSeconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// checkTrailersOnly fails t unless the refused call that got header,
// trailer and err had no header, so that a retry policy may retry it,
// and a trailer whose grpc-retry-pushback-ms is its RetryInfo's delay.
func checkTrailersOnly(t *testing.T, header, trailer metadata.MD, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("the call was served, want it refused")
	}
	if len(header) > 0 {
		t.Errorf("the refused call got the header %v before its status: not Trailers-Only, so no retry policy retries it", header)
	}
	retry := refusalOf(err).retry
	if got, want := trailer.Get("grpc-retry-pushback-ms"), []string{strconv.FormatInt(retry.Milliseconds(), 10)}; retry <= 0 || !slices.Equal(got, want) {
		t.Errorf("grpc-retry-pushback-ms %q, want %q: RetryInfo's delay, %v", got, want, retry)
	}
}

// TestKeys: a call is keyed, as an HTTP request, by its metadata
// (HeaderKey: the same key as the header over HTTP), its peer's address
// or a trusted proxy's x-forwarded-for (IPKey), or what an
// authenticating interceptor put in its context (User).
func TestKeys(t *testing.T) {
	apiKey, err := ratelimit.HeaderKey("X-API-Key", []byte("a test secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	behindProxy, err := ratelimit.IPKey{TrustedProxies: []string{"127.0.0.1"}}.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	tokenKey, err := ratelimit.HeaderKey("X-Token-Bin", []byte("a test secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	one := ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("one"))
	tests := []struct {
		name  string
		key   ratelimit.KeyFunc // nil: the default, the peer's address
		steps []step
		// http, when set, edits an HTTP request that must have the key
		// of the first call, which spent its quota, as Limiter.Peek
		// tells.
		http func(r *http.Request)
	}{
		{
			name: "HeaderKey",
			key:  apiKey,
			steps: []step{
				{md: []string{"x-api-key", "k1"}, code: codes.OK},
				{md: []string{"x-api-key", "k1"}, code: codes.ResourceExhausted},
				{md: []string{"x-api-key", "k2"}, code: codes.OK},
				{code: codes.InvalidArgument}, // no key: FailOpen's 400
				{md: []string{"x-api-key", ""}, code: codes.InvalidArgument},
			},
			http: func(r *http.Request) { r.Header.Set("X-API-Key", "k1") },
		},
		{
			name: "binary metadata is no header",
			key:  tokenKey,
			steps: []step{
				{md: []string{"x-token-bin", "k1"}, code: codes.InvalidArgument},
			},
		},
		{
			name: "the peer's address",
			steps: []step{
				{code: codes.OK},
				{md: []string{"x-forwarded-for", "203.0.113.7"}, code: codes.ResourceExhausted}, // from no trusted proxy
			},
			http: func(r *http.Request) { r.RemoteAddr = "127.0.0.1:1" },
		},
		{
			name: "IPKey behind a trusted proxy",
			key:  behindProxy,
			steps: []step{
				{md: []string{"x-forwarded-for", "203.0.113.7"}, code: codes.OK},
				{md: []string{"x-forwarded-for", "203.0.113.7"}, code: codes.ResourceExhausted},
				{md: []string{"x-forwarded-for", "198.51.100.1, 203.0.113.8"}, code: codes.OK},
				{code: codes.OK}, // the proxy itself
			},
			http: func(r *http.Request) {
				r.RemoteAddr = "127.0.0.1:1"
				r.Header.Set("X-Forwarded-For", "203.0.113.7")
			},
		},
		{
			name: "User, put in the context by the interceptor before",
			key:  ratelimit.User(userKey{}),
			steps: []step{
				{md: []string{"x-user", "ann"}, code: codes.OK},
				{md: []string{"x-user", "ann"}, code: codes.ResourceExhausted},
				{md: []string{"x-user", "bob"}, code: codes.OK},
				{code: codes.InvalidArgument},
			},
			http: func(r *http.Request) { *r = *r.WithContext(context.WithValue(r.Context(), userKey{}, "ann")) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := []ratelimit.Option{one}
			if tt.key != nil {
				opts = append(opts, ratelimit.WithKey(tt.key))
			}
			l := newLimiter(t, opts...)
			runSteps(t, newRig(t, nil, l), unary, tt.steps)
			if tt.http == nil {
				return
			}
			r := httptest.NewRequest("POST", "/grpc.testing.TestService/UnaryCall", nil)
			tt.http(r)
			d, err := l.Peek(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Results()[0].Remaining; got != 0 {
				t.Errorf("the HTTP request of the first call's key has %d left, want 0: not the same key", got)
			}
		})
	}
}

// TestInvalidArgument: a call with no key gets a fixed message, under
// FailOpen and FailClosed, not what the KeyFunc said.
func TestInvalidArgument(t *testing.T) {
	keyErr := errors.New("the secret backend 10.0.0.7 says no")
	noKey := func(ratelimit.Request) (string, error) { return "", errors.Join(ratelimit.ErrInvalid, keyErr) }
	for name, onError := range map[string]func(http.ResponseWriter, *http.Request, error) bool{"FailOpen": ratelimit.FailOpen, "FailClosed": ratelimit.FailClosed} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, nil, newLimiter(t, ratelimit.WithKey(noKey), ratelimit.WithErrorHandler(onError), ratelimit.WithLimits(ratelimit.PerMinute(1))))
			_, err := r.call(context.Background(), unary)
			if got, want := refusalOf(err), (refused{code: codes.InvalidArgument, msg: "the call cannot be rate limited"}); got.code != want.code || got.msg != want.msg || got.retry != 0 || got.violations != nil {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// failing is a store that fails every call, with an error whose text no
// client may see.
type failing struct{ ratelimit.Store }

var errStore = errors.New("redis: dial tcp 10.0.0.7:6379: the password hunter2 was refused")

func (failing) Allow(context.Context, string, int, *ratelimit.Limits) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errStore
}

// TestStoreFailure: when the store fails, a call goes on under FailOpen,
// and is Unavailable under FailClosed, with a fixed message, a RetryInfo
// of 1s and none of the error's text.
func TestStoreFailure(t *testing.T) {
	limits := ratelimit.WithLimits(ratelimit.PerMinute(1).Named("api"))
	for _, kind := range []string{unary, stream} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			open := newRig(t, nil, newLimiterOn(t, failing{}, limits))
			for range 3 {
				if _, err := open.call(context.Background(), kind); err != nil {
					t.Errorf("FailOpen: got %v, want the call served", err)
				}
			}
			closed := newRig(t, nil, newLimiterOn(t, failing{}, limits, ratelimit.WithErrorHandler(ratelimit.FailClosed)))
			header, md, err := closed.callFull(context.Background(), kind)
			checkTrailersOnly(t, header, md, err)
			want := refused{code: codes.Unavailable, msg: "rate limiting is unavailable", retry: time.Second}
			if got := refusalOf(err); got.code != want.code || got.msg != want.msg || got.retry != want.retry || got.violations != nil {
				t.Errorf("FailClosed: got %+v, want %+v", got, want)
			}
			if strings.Contains(err.Error(), "10.0.0.7") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the store's error reached the client: %v", err)
			}
			if got := md.Get("retry-after"); !slices.Equal(got, []string{"1"}) {
				t.Errorf("retry-after %q, want 1", got)
			}
		})
	}
}

// TestSlotGivenBack: a call's slot of a Concurrent limit, and its cost
// reserved in a limit charged from usage, are held while its handler
// runs, and given back however the handler ends: the client gone away,
// or a panic, which goes on to the recovery before the interceptor; its
// usage is charged too.
func TestSlotGivenBack(t *testing.T) {
	for _, kind := range []string{unary, duplex} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(t, ratelimit.WithLimits(
				ratelimit.Limit{Algorithm: ratelimit.Concurrent, Quota: 1, Name: "slot"},
				ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100, Window: time.Minute, Usage: true, Name: "tokens"},
			))
			r := newRig(t, nil, l)
			r.svc.started = make(chan []ratelimit.Decision, 1)

			// A call that blocks until its client cancels it.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := r.call(ctx, kind, "x-block", "1", "x-use", "10")
				done <- err
			}()
			<-r.svc.started
			if got := remaining(t, l, nil, 1); got != 90 {
				t.Errorf("while the call runs: %d tokens left, want 90: it reserves its cost of 1, and holds the 9 more its charge of 10 asked for", got)
			}
			_, err := r.call(context.Background(), kind)
			if got := refusalOf(err); got.code != codes.ResourceExhausted || !slices.Equal(got.violations, []string{"slot: slot: 1 in flight, slots of 30s"}) {
				t.Errorf("a call while the slot is held: got %+v, want ResourceExhausted by slot", got)
			}
			cancel()
			if err := <-done; refusalOf(err).code != codes.Canceled {
				t.Errorf("the cancelled call: got %v, want Canceled", err)
			}
			admitted(t, r, kind, "after a call cancelled by its client")

			// A call whose handler panics.
			_, err = r.call(context.Background(), kind, "x-panic", "1", "x-use", "10")
			if got := refusalOf(err); got.code != codes.Internal || got.msg != "recovered" {
				t.Errorf("the panicking call: got %+v, want the recovery's Internal", got)
			}
			<-r.svc.started
			admitted(t, r, kind, "after a call whose handler panicked")

			tokens := 100 - 10 - 1 - 10 - 1 // each call that ran charged its usage
			if !within(10*time.Second, func() bool { return remaining(t, l, nil, 1) == tokens }) {
				t.Errorf("tokens left: %d, want %d", remaining(t, l, nil, 1), tokens)
			}
		})
	}
}

// admitted makes calls of kind until one is admitted, for at most 10s:
// a slot comes back once the server has seen the call end.
func admitted(t *testing.T, r *rig, kind, when string) {
	t.Helper()
	var err error
	ok := within(10*time.Second, func() bool {
		_, err = r.call(context.Background(), kind)
		if err == nil {
			<-r.svc.started
		}
		return err == nil
	})
	if !ok {
		t.Errorf("%s: the next call is not admitted within 10s: %v", when, err)
	}
}

// remaining is what l's limit i has left for the calls of the test
// client to UnaryCall, whose request edit changes, as Limiter.Peek says.
func remaining(t *testing.T, l *ratelimit.Limiter, edit func(*http.Request), i int) int {
	t.Helper()
	r := httptest.NewRequest("POST", "/grpc.testing.TestService/UnaryCall", nil)
	r.RemoteAddr = "127.0.0.1:1"
	if edit != nil {
		edit(r)
	}
	d, err := l.Peek(r)
	if err != nil {
		t.Fatal(err)
	}
	return d.Results()[i].Remaining
}

// TestUsage: what a handler charges with ratelimit.Charge is taken from a
// limit charged from usage when the call ends, and a limit used up denies
// the next call.
func TestUsage(t *testing.T) {
	for _, kind := range []string{unary, stream} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(t, ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 10, Window: time.Minute, Usage: true, Name: "tokens"}))
			r := newRig(t, nil, l)
			for i, tt := range []struct {
				use  string
				code codes.Code
				left int
			}{{"4", codes.OK, 6}, {"0", codes.OK, 6}, {"7", codes.OK, 0}, {"1", codes.ResourceExhausted, 0}} {
				_, err := r.call(context.Background(), kind, "x-use", tt.use)
				if got := refusalOf(err).code; got != tt.code {
					t.Errorf("call %d, charging %s: got %v, want %v", i, tt.use, got, tt.code)
				}
				if got := remaining(t, l, nil, 0); got != tt.left {
					t.Errorf("call %d, charging %s: %d left, want %d", i, tt.use, got, tt.left)
				}
			}
		})
	}
}

// TestStreamCharged: a server stream charges each message as it sends
// it; past its reservation it asks for more, and stops when told no, its
// last message charged at once as debt.
func TestStreamCharged(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, ratelimit.WithLimits(ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 10, Window: time.Minute, Usage: true, Name: "tokens"}))
	r := newRig(t, nil, l)
	for i, tt := range []struct {
		asked, got int
		code       codes.Code
		left       int
	}{{8, 8, codes.OK, 2}, {8, 3, codes.OK, 0}, {1, 0, codes.ResourceExhausted, 0}} {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-stream", strconv.Itoa(tt.asked)), 30*time.Second)
		s, err := r.test.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for {
			if _, err = s.Recv(); err != nil {
				break
			}
			got++
		}
		cancel()
		if err == io.EOF {
			err = nil
		}
		if got != tt.got || refusalOf(err).code != tt.code {
			t.Errorf("stream %d of %d messages: got %d and %v; want %d and %v", i, tt.asked, got, err, tt.got, tt.code)
		}
		// The call ends, and charges, after its client has read its status.
		if !within(10*time.Second, func() bool { return remaining(t, l, nil, 0) == tt.left }) {
			t.Errorf("stream %d: %d left; want %d", i, remaining(t, l, nil, 0), tt.left)
		}
	}
	// 11 charged of 10: the next call is refused until the window ends.
	if n := remaining(t, l, nil, 0); n != 0 {
		t.Errorf("%d left; want 0", n)
	}
}

// TestCountOnly: a count-only Limiter counts a call by its code, as the
// HTTP status grpc-gateway maps it to: failures, not successes.
func TestCountOnly(t *testing.T) {
	for _, kind := range []string{unary, stream} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, nil, newLimiter(t, ratelimit.WithCountOnly(nil), ratelimit.WithLimits(ratelimit.PerMinute(2).Using(ratelimit.FixedWindow))))
			for i, tt := range []struct {
				fail bool
				want codes.Code
			}{{false, codes.OK}, {true, codes.Unauthenticated}, {false, codes.OK}, {true, codes.Unauthenticated}, {false, codes.ResourceExhausted}} {
				var md []string
				if tt.fail {
					md = []string{"x-fail", "1"}
				}
				_, err := r.call(context.Background(), kind, md...)
				if got := refusalOf(err).code; got != tt.want {
					t.Errorf("call %d (fail %t): got %v, want %v", i, tt.fail, got, tt.want)
				}
			}
		})
	}
}

// TestSkipper: a skipped call goes on with no check and no metadata;
// the skipper is given the call's context and full method.
func TestSkipper(t *testing.T) {
	skip := grpclimit.WithSkipper(func(ctx context.Context, fullMethod string) bool {
		return fullMethod == "/grpc.testing.TestService/EmptyCall" || len(metadata.ValueFromIncomingContext(ctx, "x-internal")) > 0
	})
	r := newRig(t, []grpclimit.Option{skip}, newLimiter(t, ratelimit.WithLimits(ratelimit.PerMinute(1).Named("api"))))
	for i, tt := range []struct {
		kind string
		md   []string
		code codes.Code
		rl   string
	}{
		{empty, nil, codes.OK, ""},
		{empty, nil, codes.OK, ""},
		{unary, nil, codes.OK, `"api";r=0;t=60`},
		{unary, []string{"x-internal", "1"}, codes.OK, ""},
		{stream, []string{"x-internal", "1"}, codes.OK, ""},
		{unary, nil, codes.ResourceExhausted, `"api";r=0;t=60`},
	} {
		md, err := r.call(context.Background(), tt.kind, tt.md...)
		if got := refusalOf(err).code; got != tt.code {
			t.Errorf("call %d (%s %q): got %v, want %v", i, tt.kind, tt.md, got, tt.code)
		}
		if got := strings.Join(md.Get("ratelimit"), " | "); got != tt.rl {
			t.Errorf("call %d (%s %q): ratelimit %q, want %q", i, tt.kind, tt.md, got, tt.rl)
		}
	}
}

// TestStacked: two Limiters, one interceptor each: the handler sees both
// decisions, and the last value of each field lists both Limiters'
// policies.
func TestStacked(t *testing.T) {
	global := newLimiter(t, ratelimit.WithLimits(ratelimit.PerMinute(3).Using(ratelimit.FixedWindow).Named("global")))
	perMethod := newLimiter(t, grpclimit.Methods(map[string][]ratelimit.Limit{
		"/grpc.testing.TestService/UnaryCall": {ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("unary")},
	}))
	r := newRig(t, nil, global, perMethod)
	r.svc.started = make(chan []ratelimit.Decision, 1)
	md, err := r.call(context.Background(), unary)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(<-r.svc.started); got != 2 {
		t.Errorf("the handler saw %d decisions, want 2", got)
	}
	if got, want := md.Get("ratelimit"), []string{`"global";r=2;t=60`, `"global";r=2;t=60, "unary";r=0;t=60`}; !slices.Equal(got, want) {
		t.Errorf("ratelimit %q, want %q", got, want)
	}
	_, err = r.call(context.Background(), unary)
	if got := refusalOf(err); got.code != codes.ResourceExhausted || !slices.Equal(got.violations, []string{"unary: unary: 1 per 1m, fixed-window"}) {
		t.Errorf("the second call: got %+v, want ResourceExhausted by unary", got)
	}
	if _, err := r.call(context.Background(), empty); err != nil {
		t.Errorf("a method the second Limiter does not limit: %v", err)
	}
	<-r.svc.started
	_, err = r.call(context.Background(), empty)
	if got := refusalOf(err); got.code != codes.ResourceExhausted || !slices.Equal(got.violations, []string{"global: global: 3 per 1m, fixed-window"}) {
		t.Errorf("the fourth call: got %+v, want ResourceExhausted by global", got)
	}
}

// TestConcurrentCalls: calls at once, through two stacked Limiters that
// charge usage, share nothing they should not (run with -race).
func TestConcurrentCalls(t *testing.T) {
	limits := ratelimit.WithLimits(ratelimit.PerMinute(1000).Named("rpm"),
		ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Quota: 100_000, Window: time.Minute, Usage: true, Name: "tokens"})
	l1, l2 := newLimiter(t, limits), newLimiter(t, limits, ratelimit.WithCountOnly(func(int) bool { return true }))
	r := newRig(t, nil, l1, l2)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				kind := []string{unary, stream}[(g+i)%2]
				if _, err := r.call(context.Background(), kind, "x-use", "3"); err != nil {
					t.Errorf("%s: %v", kind, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, l := range []*ratelimit.Limiter{l1, l2} {
		if got := remaining(t, l, nil, 1); got != 100_000-80*3 {
			t.Errorf("tokens left %d, want %d", got, 100_000-80*3)
		}
	}
}

// TestDenyHandler: a deny handler of the application's answers HTTP
// requests; a gRPC call refused is ResourceExhausted with the fixed
// message whatever the handler would write, so that nothing it writes
// reaches a gRPC client.
func TestDenyHandler(t *testing.T) {
	deny := ratelimit.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, _ ratelimit.Decision) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("secret: the quota of key k1"))
	})
	r := newRig(t, nil, newLimiter(t, deny, ratelimit.WithLimits(ratelimit.PerMinute(1))))
	r.call(context.Background(), unary)
	_, err := r.call(context.Background(), unary)
	if got := refusalOf(err); got.code != codes.ResourceExhausted || got.msg != "rate limit exceeded" || got.retry != time.Minute {
		t.Errorf("got %+v, want ResourceExhausted, rate limit exceeded, retry 1m", got)
	}
}

// TestRequest: what the Limiter reads of a call, with no copy of it into
// an HTTP request: its metadata by name in any case, without binary keys;
// its peer; its route, POST of its full method; its context.
func TestRequest(t *testing.T) {
	type seenCall struct {
		http                  bool
		keys, token           []string
		peer                  netip.AddrPort
		route, user, routeKey string
	}
	var mu sync.Mutex
	var seen []seenCall
	l := newLimiter(t, ratelimit.WithLimits(ratelimit.PerMinute(10)), ratelimit.WithObserver(func(r ratelimit.Request, _ ratelimit.Event) {
		c := seenCall{}
		_, c.http = r.(*http.Request)
		if h, ok := r.(interface{ Header(string) []string }); ok {
			c.keys, c.token = h.Header("X-Api-Key"), h.Header("x-token-bin")
		}
		if p, ok := r.(interface{ Peer() netip.AddrPort }); ok {
			c.peer = p.Peer()
		}
		if rt, ok := r.(interface{ Route() string }); ok {
			c.route = rt.Route()
		}
		c.user, _ = r.Context().Value(userKey{}).(string)
		c.routeKey, _ = ratelimit.Route(r)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
	}))
	r := newRig(t, nil, l)
	for _, kind := range []string{unary, stream} {
		if _, err := r.call(context.Background(), kind, "x-api-key", "k1", "x-api-key", "k2", "x-token-bin", "\x00\x01", "x-user", "ann"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("observed %d requests, want 2", len(seen))
	}
	for i, method := range []string{"/grpc.testing.TestService/UnaryCall", "/grpc.testing.TestService/StreamingOutputCall"} {
		c := seen[i]
		if c.http {
			t.Errorf("%s: the Limiter was given an *http.Request", method)
		}
		if !slices.Equal(c.keys, []string{"k1", "k2"}) || c.token != nil {
			t.Errorf("%s: X-Api-Key %q, x-token-bin %q; want [k1 k2] and nothing of a binary key", method, c.keys, c.token)
		}
		if c.peer.Addr() != netip.MustParseAddr("127.0.0.1") || c.peer.Port() == 0 {
			t.Errorf("%s: peer %v, want 127.0.0.1 and a port", method, c.peer)
		}
		if want := "POST " + method; c.route != want || c.routeKey != "route:"+want {
			t.Errorf("%s: route %q, Route's key %q; want %q", method, c.route, c.routeKey, want)
		}
		if c.user != "ann" {
			t.Errorf("%s: the context's user is %q, want ann: the call's context", method, c.user)
		}
	}
}

// TestMissingKey: a call without the metadata its Limiter's HeaderKey
// reads is InvalidArgument naming that key, never a value; a denied
// call's QuotaFailure names the key it was counted under as its subject,
// the hash of the API key, not the key.
func TestMissingKey(t *testing.T) {
	key, err := ratelimit.HeaderKey("X-API-Key", []byte("a test secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, nil, newLimiter(t, ratelimit.WithKey(key), ratelimit.WithLimits(ratelimit.PerMinute(1).Named("api"))))
	for _, kind := range []string{unary, stream} {
		_, err := r.call(context.Background(), kind)
		if got, want := refusalOf(err), `the call cannot be rate limited: the metadata "x-api-key" is missing or empty`; got.code != codes.InvalidArgument || got.msg != want {
			t.Errorf("%s without x-api-key: got %v %q, want InvalidArgument %q", kind, got.code, got.msg, want)
		}
	}
	r.call(context.Background(), unary, "x-api-key", "secret-k1")
	_, err = r.call(context.Background(), unary, "x-api-key", "secret-k1")
	st, _ := status.FromError(err)
	var subject string
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && len(q.GetViolations()) == 1 {
			subject = q.GetViolations()[0].GetSubject()
		}
	}
	if !strings.HasPrefix(subject, "header:X-Api-Key:") || strings.Contains(subject, "secret-k1") || len(subject) != len("header:X-Api-Key:")+32 {
		t.Errorf("the denial's subject is %q, want header:X-Api-Key: and the key's hash", subject)
	}
}
