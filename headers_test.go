package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/httpcases"
)

// fixedStore answers every request with one preset result.
type fixedStore struct{ r ratelimit.Result }

func (s fixedStore) Allow(_ context.Context, _ string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	r := s.r
	r.Limit = limits.At(0)
	r.Allowed = r.RetryAfter == 0
	return ratelimit.Decision{Allowed: r.Allowed, Results: []ratelimit.Result{r}}, nil
}

func (s fixedStore) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return s.Allow(ctx, key, cost, limits)
}

func (fixedStore) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

// FuzzHeaders formats rate-limit headers for arbitrary limit names and
// values: a name New accepts must always give RateLimit-Policy and
// RateLimit values that parse as RFC 9651 lists and name the limit back,
// and Retry-After a positive integer.
func FuzzHeaders(f *testing.F) {
	f.Add("api", 100, int64(60_000), 42, int64(17_000_000), int64(0))
	f.Add(`a "quoted" \ name`, 1, int64(1), 0, int64(999), int64(1))
	f.Add("", 1_000_000, int64(86_400_000), 999_999, int64(86_400_000_000), int64(86_400_000_000))
	f.Add("\x7f\x00é", 5, int64(1500), -3, int64(-5), int64(-1))
	f.Fuzz(func(t *testing.T, name string, quota int, windowMS int64, remaining int, resetUS, retryUS int64) {
		l := ratelimit.Per(quota, time.Duration(windowMS)*time.Millisecond).Using(ratelimit.FixedWindow).Named(name)
		r := ratelimit.Result{Remaining: remaining, ResetAfter: time.Duration(resetUS) * time.Microsecond, RetryAfter: time.Duration(retryUS) * time.Microsecond}
		if r.Remaining < 0 || r.ResetAfter < 0 || r.RetryAfter < 0 {
			return // not a result any store returns
		}
		lim, err := ratelimit.New(fixedStore{r}, "fuzz", ratelimit.WithLimits(l))
		if err != nil {
			return // refused when built: never formatted
		}
		w := serve(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "GET", "/")
		policy, err := parseSFList(w.Header().Get("RateLimit-Policy"))
		if err != nil || len(policy) != 1 {
			t.Fatalf("RateLimit-Policy %q: %v", w.Header().Get("RateLimit-Policy"), err)
		}
		if name != "" && policy[0].name != name {
			t.Fatalf("RateLimit-Policy names %q, want %q", policy[0].name, name)
		}
		current, err := parseSFList(w.Header().Get("RateLimit"))
		wantR := min(int64(remaining), 999_999_999_999_999) // RFC 9651 integers have at most 15 digits
		if err != nil || len(current) != 1 || current[0].name != policy[0].name || current[0].params["r"] != wantR {
			t.Fatalf("RateLimit %q: %+v, %v", w.Header().Get("RateLimit"), current, err)
		}
		if w.Code == http.StatusTooManyRequests {
			if v := w.Header().Get("Retry-After"); v == "" || v[0] == '0' || v[0] == '-' {
				t.Fatalf("Retry-After %q on a 429", v)
			}
		}
	})
}

// decisionStore answers every request with one preset decision, its
// results for the limits asked about, in order.
type decisionStore struct{ d ratelimit.Decision }

func (s decisionStore) Allow(_ context.Context, _ string, _ int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	d := s.d
	d.Results = append([]ratelimit.Result(nil), d.Results...)
	for i := range d.Results {
		d.Results[i].Limit = limits.At(i)
	}
	return d, nil
}

func (s decisionStore) Peek(ctx context.Context, key string, cost int, limits *ratelimit.Limits) (ratelimit.Decision, error) {
	return s.Allow(ctx, key, cost, limits)
}

func (decisionStore) Reset(context.Context, string, *ratelimit.Limits) error { return nil }

// TestHeadersDescribeTheTightest: RateLimit and X-RateLimit-* describe the
// limit closest to denying, RateLimit every limit: the one that denied, the latest to let the
// request through when several did; when allowed, the one with the fewest
// units left, ties going to the longest reset.
func TestHeadersDescribeTheTightest(t *testing.T) {
	limits := ratelimit.WithLimits(
		ratelimit.PerSecond(1).Named("second"),
		ratelimit.PerMinute(10).Named("minute"),
		ratelimit.Per(100, time.Hour).Named("hour"))
	tests := []struct {
		name    string
		d       ratelimit.Decision
		status  int
		want    string // X-RateLimit-Reset
		xLimit  string // X-RateLimit-Limit
		retry   string // Retry-After
		noRetry bool
	}{
		{
			name: "allowed: the fewest remaining",
			d: ratelimit.Decision{Allowed: true, Results: []ratelimit.Result{
				{Allowed: true, Remaining: 0, ResetAfter: time.Second},
				{Allowed: true, Remaining: 5, ResetAfter: time.Minute},
				{Allowed: true, Remaining: 50, ResetAfter: time.Hour},
			}},
			status: 200, want: "1", xLimit: "1",
		},
		{
			name: "allowed: a tie on remaining goes to the longest reset",
			d: ratelimit.Decision{Allowed: true, Results: []ratelimit.Result{
				{Allowed: true, Remaining: 1, ResetAfter: time.Second},
				{Allowed: true, Remaining: 1, ResetAfter: time.Minute},
				{Allowed: true, Remaining: 9, ResetAfter: time.Hour},
			}},
			status: 200, want: "60", xLimit: "10",
		},
		{
			name: "denied by one",
			d: ratelimit.Decision{Results: []ratelimit.Result{
				{Allowed: true, Remaining: 1, ResetAfter: time.Second},
				{Allowed: false, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 30 * time.Second},
				{Allowed: true, Remaining: 0, ResetAfter: time.Hour},
			}},
			status: 429, want: "60", xLimit: "10", retry: "30",
		},
		{
			name: "denied by two: the later",
			d: ratelimit.Decision{Results: []ratelimit.Result{
				{Allowed: false, Remaining: 0, ResetAfter: time.Second, RetryAfter: time.Second},
				{Allowed: true, Remaining: 3, ResetAfter: time.Minute},
				{Allowed: false, Remaining: 0, ResetAfter: time.Hour, RetryAfter: 1500 * time.Millisecond},
			}},
			status: 429, want: "3600", xLimit: "100", retry: "2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t, decisionStore{tt.d}, "test", limits)
			w := serve(l.Handler(http.HandlerFunc(httpcases.OK)), "GET", "/")
			h := w.Header()
			if w.Code != tt.status || h.Get("X-RateLimit-Reset") != tt.want || h.Get("X-RateLimit-Limit") != tt.xLimit || h.Get("Retry-After") != tt.retry {
				t.Errorf("got %d, X-RateLimit-Reset %q, X-RateLimit-Limit %q, Retry-After %q; want %d, %q, %q, %q",
					w.Code, h.Get("X-RateLimit-Reset"), h.Get("X-RateLimit-Limit"), h.Get("Retry-After"), tt.status, tt.want, tt.xLimit, tt.retry)
			}
			var all []string // RateLimit lists every limit, in order
			for i, name := range []string{"second", "minute", "hour"} {
				r := tt.d.Results[i]
				all = append(all, fmt.Sprintf("%q;r=%d;t=%d", name, r.Remaining, (r.ResetAfter+time.Second-1)/time.Second))
			}
			if got, want := h.Get("RateLimit"), strings.Join(all, ", "); got != want {
				t.Errorf("got RateLimit %q, want %q", got, want)
			}
		})
	}
}

// TestHeaderStyles: WithHeaders picks the draft's fields, the X- ones,
// both, or none; a denial carries Retry-After in every case.
func TestHeaderStyles(t *testing.T) {
	draft := []string{"RateLimit-Policy", "RateLimit"}
	x := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	tests := []struct {
		style     ratelimit.HeaderStyle
		set, away []string
	}{
		{ratelimit.HeadersDraft | ratelimit.HeadersX, append(draft, x...), nil},
		{ratelimit.HeadersDraft, draft, x},
		{ratelimit.HeadersX, x, draft},
		{0, nil, append(draft, x...)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(uint8(tt.style)), func(t *testing.T) {
			l := newLimiter(t, httpcases.NewStore(t), "test", ratelimit.WithHeaders(tt.style),
				ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow)))
			h := l.Handler(http.HandlerFunc(httpcases.OK))
			for _, want := range []int{200, 429} {
				w := serve(h, "GET", "/")
				if w.Code != want {
					t.Fatalf("got %d, want %d", w.Code, want)
				}
				for _, name := range tt.set {
					if w.Header().Get(name) == "" {
						t.Errorf("%d: %s is missing", w.Code, name)
					}
				}
				for _, name := range tt.away {
					if v := w.Header().Get(name); v != "" {
						t.Errorf("%d: got %s %q, want none", w.Code, name, v)
					}
				}
				if got := w.Header().Get("Retry-After"); (want == 429) != (got != "") {
					t.Errorf("%d: got Retry-After %q", w.Code, got)
				}
			}
		})
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
		l := newLimiter(t, httpcases.NewStore(t), "test", ratelimit.WithLimits(
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
		if err != nil || len(current) != 2 || current[0].name != name || current[1].name != "3-per-1.5s" || current[0].params["r"] != 6 || current[1].params["r"] != 5 {
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
