package ratelimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

// TestOptionsReportTheirName: New refuses a bad option with an error
// naming it, and for limits, the limit and field at fault.
func TestOptionsReportTheirName(t *testing.T) {
	s := adaptertest.NewStore(t)
	ok := ratelimit.WithLimits(ratelimit.PerMinute(10))
	tests := []struct {
		name string
		opts []ratelimit.Option
		want string
	}{
		{"no limit", []ratelimit.Option{ratelimit.WithLimits()}, "WithLimits: no limits given"},
		{"bad limit", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(0))}, "WithLimits: limits[0].Quota"},
		{"bad second limit", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1), ratelimit.Limit{Quota: 1, Window: time.Second, Burst: 2})}, "WithLimits: limits[1].Burst"},
		{"limits sharing state", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1), ratelimit.PerMinute(2))}, "WithLimits: limits[0]"},
		{"name not ASCII", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("café"))}, "WithLimits: limits[0].Name"},
		{"name with a newline", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("a\nb"))}, "WithLimits: limits[0].Name"},
		{"names repeated", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1).Named("x"), ratelimit.PerSecond(9).Named("x"))}, "WithLimits: limits[1].Name"},
		{"shadow and enforced limits with a ban", []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(1), ratelimit.Limit{Quota: 1, Window: time.Second, Shadow: true}),
			ratelimit.WithBan(ratelimit.Ban{After: 3, Within: time.Minute, For: time.Minute})}, "some limits are Shadow and some not, with a ban"},
		{"nil overrides", []ratelimit.Option{ok, ratelimit.WithOverrides(nil)}, "WithOverrides"},
		{"nil key", []ratelimit.Option{ok, ratelimit.WithKey(nil)}, "WithKey"},
		{"nil cost", []ratelimit.Option{ok, ratelimit.WithCost(nil)}, "WithCost"},
		{"nil skip", []ratelimit.Option{ok, ratelimit.WithSkip(nil)}, "WithSkip"},
		{"nil deny handler", []ratelimit.Option{ok, ratelimit.WithDenyHandler(nil)}, "WithDenyHandler"},
		{"nil error handler", []ratelimit.Option{ok, ratelimit.WithErrorHandler(nil)}, "WithErrorHandler"},
		{"nil logger", []ratelimit.Option{ok, ratelimit.WithLogger(nil)}, "WithLogger"},
		{"unknown quota unit", []ratelimit.Option{ok, ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: "bytes"})}, `WithHeaders: Headers.QuotaUnit "bytes" is not a quota unit of the draft; use "requests", "content-bytes" or "concurrent-requests"`},
		{"quota unit in another case", []ratelimit.Option{ok, ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: "Requests"})}, `Headers.QuotaUnit "Requests"`},
		{"vendor quota unit", []ratelimit.Option{ok, ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: "acme-credits"})}, `Headers.QuotaUnit "acme-credits"`},
		{"short partition key secret", []ratelimit.Option{ok, ratelimit.WithHeaders(ratelimit.Headers{PartitionKey: []byte("fifteen bytes!!")})}, "WithHeaders: Headers.PartitionKey is 15 bytes long; at least 16"},
		{"empty partition key secret", []ratelimit.Option{ratelimit.WithHeaders(ratelimit.Headers{PartitionKey: []byte{}}), ok}, "Headers.PartitionKey is 0 bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(s, "test", tt.opts...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming %q", l, err, tt.want)
			}
		})
	}
}

// TestOptionsAccept: the registered quota units and a 16-byte secret are
// accepted, before or after the limits.
func TestOptionsAccept(t *testing.T) {
	s := adaptertest.NewStore(t)
	ok := ratelimit.WithLimits(ratelimit.PerMinute(10))
	for _, opt := range []ratelimit.Option{
		ratelimit.WithHeaders(ratelimit.Headers{}),
		ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: "requests"}),
		ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: "content-bytes"}),
		ratelimit.WithHeaders(ratelimit.Headers{QuotaUnit: "concurrent-requests"}),
		ratelimit.WithHeaders(ratelimit.Headers{PartitionKey: []byte("sixteen bytes!!!")}),
	} {
		if _, err := ratelimit.New(s, "test", opt, ok); err != nil {
			t.Error(err)
		}
		if _, err := ratelimit.New(s, "test", ok, opt); err != nil {
			t.Error(err)
		}
	}
}

// TestPartitionKeyCopiesTheSecret: changing the secret's bytes after
// New changes no pk.
func TestPartitionKeyCopiesTheSecret(t *testing.T) {
	secret := []byte("a partition key secret, 32 bytes")
	l, err := ratelimit.New(adaptertest.NewStore(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(10)), ratelimit.WithHeaders(ratelimit.Headers{PartitionKey: secret}))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(adaptertest.OK))
	before := httptest.NewRecorder()
	h.ServeHTTP(before, httptest.NewRequest("GET", "/", nil))
	clear(secret)
	after := httptest.NewRecorder()
	h.ServeHTTP(after, httptest.NewRequest("GET", "/", nil))
	if got, want := after.Header().Get("RateLimit-Policy"), before.Header().Get("RateLimit-Policy"); got != want || !strings.Contains(got, ";pk=:") {
		t.Errorf("got RateLimit-Policy %q, want %q, with a pk", got, want)
	}
}

func TestNewReportsBadInput(t *testing.T) {
	s := adaptertest.NewStore(t)
	ok := ratelimit.WithLimits(ratelimit.PerMinute(10))
	tests := []struct {
		name  string
		store ratelimit.Store
		opts  []ratelimit.Option
		want  string
	}{
		{"nil store", nil, []ratelimit.Option{ok}, "New: the store is nil"},
		{"no limits", s, nil, "New: no limits"},
		{"nil option", s, []ratelimit.Option{ok, nil}, "New: option 1 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(tt.store, "test", tt.opts...)
			if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got (%v, %v), want ErrInvalid saying %q", l, err, tt.want)
			}
		})
	}
}

func TestNewChecksTheNamespace(t *testing.T) {
	s := adaptertest.NewStore(t)
	limits := ratelimit.WithLimits(ratelimit.PerMinute(10))
	for _, ns := range []string{"", strings.Repeat("n", 65), "a|b", "a b", "a:b", "a{b}", "café", "a\x00"} {
		t.Run(fmt.Sprintf("%q", ns), func(t *testing.T) {
			l, err := ratelimit.New(s, ns, limits)
			if want := fmt.Sprintf("namespace %q", ns); !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got (%v, %v), want ErrInvalid naming %s", l, err, want)
			}
		})
	}
	for _, ns := range []string{"a", strings.Repeat("n", 64), "api", "Login-v2.eu_west", "0"} {
		if _, err := ratelimit.New(s, ns, limits); err != nil {
			t.Errorf("New with namespace %q: got %v, want nil", ns, err)
		}
	}
}
