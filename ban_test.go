package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

func TestBanIsChecked(t *testing.T) {
	good := ratelimit.Ban{After: 3, Within: time.Minute, For: time.Minute, Max: time.Hour}
	tests := []struct {
		ban  ratelimit.Ban
		want string // in the error; "" when valid
	}{
		{good, ""},
		{ratelimit.Ban{After: 1, Within: time.Second, For: time.Second}, ""},
		{ratelimit.Ban{Within: time.Minute, For: time.Minute}, "Ban.After must be at least 1, got 0"},
		{ratelimit.Ban{After: 1, For: time.Minute}, "Ban.Within must be from 1ms to"},
		{ratelimit.Ban{After: 1, Within: time.Minute}, "Ban.For must be from 1ms to"},
		{ratelimit.Ban{After: 1, Within: time.Minute, For: 1500 * time.Microsecond}, "Ban.For must be a whole number of milliseconds"},
		{ratelimit.Ban{After: 1, Within: time.Minute, For: time.Minute, Max: time.Second}, "Ban.Max must not be shorter than For"},
		{ratelimit.Ban{After: 1, Within: time.Minute, For: time.Minute, Max: 400 * 24 * time.Hour}, "Ban.Max must be from 1ms to"},
		{ratelimit.Ban{After: 1, Within: -time.Minute, For: time.Minute}, "Ban.Within"},
	}
	limits, err := ratelimit.NewLimits(ratelimit.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		withBan, err := limits.WithBan(tt.ban)
		_, newErr := ratelimit.New(newMemory(t), "test", ratelimit.WithLimits(ratelimit.PerMinute(5)), ratelimit.WithBan(tt.ban))
		if tt.want == "" {
			if err != nil || newErr != nil {
				t.Errorf("%v: got %v and %v, want no error", tt.ban, err, newErr)
				continue
			}
			if b, ok := withBan.Ban(); !ok || b != tt.ban {
				t.Errorf("Ban() = %v, %v; want %v", b, ok, tt.ban)
			}
			continue
		}
		for _, e := range []error{err, newErr} {
			if !errors.Is(e, ratelimit.ErrInvalid) || !strings.Contains(e.Error(), tt.want) {
				t.Errorf("%+v: got %v, want an ErrInvalid saying %q", tt.ban, e, tt.want)
			}
		}
	}
	if _, ok := limits.Ban(); ok {
		t.Error("WithBan changed the set it was called on")
	}
	if _, err := (*ratelimit.Limits)(nil).WithBan(good); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("WithBan on nil limits: got %v, want ErrInvalid", err)
	}
	if got, want := good.String(), "ban after 3 denials in 1m: 1m, doubling up to 1h"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// banScript is a store that answers Peek and Allow from two scripts of
// decisions and records the calls.
type banScript struct {
	peek, allow ratelimit.Decision
	calls       []string
	banned      []bool // whether the limits of each call carried a ban
}

func (s *banScript) record(call string, limits *ratelimit.Limits) {
	s.calls = append(s.calls, call)
	_, ok := limits.Ban()
	s.banned = append(s.banned, ok)
}

func (s *banScript) Allow(_ context.Context, _ string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	s.record("allow", limits)
	return s.allow, nil
}

func (s *banScript) Peek(_ context.Context, _ string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	s.record("peek", limits)
	return s.peek, nil
}

func (s *banScript) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

// TestBanWithCountOnly: with WithCountOnly and a ban, a request the peek
// denies is decided again by Allow, so that the denial counts towards the
// ban; when that Allow admits it (the quota came back meanwhile) it has
// spent the cost, and the response spends nothing more. Every set the
// store sees carries the ban.
func TestBanWithCountOnly(t *testing.T) {
	denied := ratelimit.Decision{Results: []ratelimit.Result{{RetryAfter: time.Second}}}
	allowed := ratelimit.Decision{Allowed: true, Results: []ratelimit.Result{{Allowed: true, Remaining: 1}}}
	ban := ratelimit.Ban{After: 2, Within: time.Minute, For: time.Minute}
	tests := []struct {
		name        string
		peek, allow ratelimit.Decision
		status      int // the handler's
		wantCode    int
		wantCalls   string
		noBan       bool
	}{
		{"allowed by the peek, counted after", allowed, allowed, 401, 401, "peek allow", false},
		{"allowed by the peek, a success not counted", allowed, allowed, 200, 200, "peek", false},
		{"denied by the peek, and by Allow", denied, denied, 401, 429, "peek allow", false},
		{"denied by the peek, allowed by Allow: spent once", denied, allowed, 401, 401, "peek allow", false},
		{"without a ban, a denial by the peek is final", denied, allowed, 401, 429, "peek", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &banScript{peek: tt.peek, allow: tt.allow}
			opts := []ratelimit.Option{ratelimit.WithLimits(ratelimit.PerMinute(2)), ratelimit.WithCountOnly(nil)}
			if !tt.noBan {
				opts = append(opts, ratelimit.WithBan(ban))
			}
			l := newLimiter(t, s, "test", opts...)
			h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tt.status) }))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
			if w.Code != tt.wantCode || strings.Join(s.calls, " ") != tt.wantCalls {
				t.Errorf("got %d after %q, want %d after %q", w.Code, s.calls, tt.wantCode, tt.wantCalls)
			}
			for i, b := range s.banned {
				if b == tt.noBan {
					t.Errorf("call %d (%s): the limits carry a ban: %v, want %v", i, s.calls[i], b, !tt.noBan)
				}
			}
		})
	}
}
