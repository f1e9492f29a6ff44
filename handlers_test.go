package ratelimit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// TestHandlersAnswer: what Deny, FailOpen and FailClosed write, and
// whether the request is served.
func TestHandlersAnswer(t *testing.T) {
	denied := ratelimit.MakeDecision(ratelimit.Result{Limit: ratelimit.PerMinute(1), RetryAfter: 1500 * time.Millisecond})
	storeDown := errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
	noKey := fmt.Errorf("%w: header X-Api-Key is missing", ratelimit.ErrInvalid)
	badCost := fmt.Errorf("%w: cost must be at least 1, got 0", ratelimit.ErrInvalid)
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request) (served bool)
		served bool
		status int // 0: nothing written
		body   string
		retry  string
	}{
		{"Deny", func(w http.ResponseWriter, r *http.Request) bool { ratelimit.Deny(w, r, denied); return false }, false, 429, "retry in 2 s", ""},
		{"FailOpen, store down", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailOpen(w, r, storeDown) }, true, 0, "", ""},
		{"FailOpen, no key", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailOpen(w, r, noKey) }, false, 400, "cannot be rate limited", ""},
		{"FailOpen, bad cost", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailOpen(w, r, badCost) }, false, 400, "cannot be rate limited", ""},
		{"FailClosed, store down", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailClosed(w, r, storeDown) }, false, 503, "retry in 1 s", "1"},
		{"FailClosed, no key", func(w http.ResponseWriter, r *http.Request) bool { return ratelimit.FailClosed(w, r, noKey) }, false, 400, "cannot be rate limited", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			served := tt.answer(w, httptest.NewRequest("GET", "/", nil))
			if served != tt.served {
				t.Errorf("served: got %v, want %v", served, tt.served)
			}
			if tt.status == 0 {
				if w.Body.Len() != 0 || len(w.Header()) != 0 {
					t.Errorf("got %d %q with headers %v, want nothing written", w.Code, w.Body.String(), w.Header())
				}
				return
			}
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.body) || w.Header().Get("Retry-After") != tt.retry {
				t.Errorf("got %d %q, Retry-After %q; want %d with %q, Retry-After %q", w.Code, w.Body.String(), w.Header().Get("Retry-After"), tt.status, tt.body, tt.retry)
			}
			if strings.Contains(w.Body.String(), "10.9.8.7") || strings.Contains(w.Body.String(), "X-Api-Key") {
				t.Errorf("the body %q shows the error", w.Body.String())
			}
			if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options: got %q, want nosniff", got)
			}
		})
	}
}

// TestProblemJSON: a client that accepts JSON (with a q above 0) gets RFC
// 9457 problem JSON; any other gets plain text.
func TestProblemJSON(t *testing.T) {
	tests := []struct {
		accept []string
		json   bool
	}{
		{nil, false},
		{[]string{"text/html"}, false},
		{[]string{"application/json"}, true},
		{[]string{"application/problem+json"}, true},
		{[]string{"Application/JSON"}, true},
		{[]string{"text/html, application/json;q=0.5"}, true},
		{[]string{"text/html", "application/json"}, true},
		{[]string{"application/json;q=0"}, false},
		{[]string{"application/json; q=0.0, text/plain"}, false},
		{[]string{"application/json;charset=utf-8;q=0.1"}, true},
		{[]string{"application/jsonx"}, false},
		{[]string{"*/*"}, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		for _, line := range tt.accept {
			r.Header.Add("Accept", line)
		}
		w := httptest.NewRecorder()
		ratelimit.Deny(w, r, ratelimit.Decision{})
		isJSON := w.Header().Get("Content-Type") == "application/problem+json"
		if isJSON != tt.json {
			t.Errorf("Accept %q: got Content-Type %q, want JSON: %v", tt.accept, w.Header().Get("Content-Type"), tt.json)
			continue
		}
		if isJSON {
			if p, err := parseProblem(w.Body.Bytes()); err != nil || p.Status != 429 || p.Type != quotaExceeded {
				t.Errorf("Accept %q: body %q: got %+v, %v", tt.accept, w.Body.String(), p, err)
			}
		} else if got, want := w.Body.String(), "Too Many Requests: rate limit exceeded; retry in 1 s\n"; got != want {
			t.Errorf("Accept %q: got %q, want %q", tt.accept, got, want)
		}
	}
}

// The problem types of draft-ietf-httpapi-ratelimit-headers.
const (
	quotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	abnormalUsage   = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	reducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problemBody is an RFC 9457 body as the handlers write it; Violated is
// nil when the member is left out.
type problemBody struct {
	Type     string    `json:"type"`
	Title    string    `json:"title"`
	Status   int       `json:"status"`
	Detail   string    `json:"detail"`
	Violated *[]string `json:"violated-policies"`
}

// parseProblem decodes a problem JSON body, refusing unknown members and
// anything after the object.
func parseProblem(body []byte) (problemBody, error) {
	var p problemBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, err
	}
	if dec.More() {
		return p, errors.New("more after the object")
	}
	return p, nil
}

// policies is the violated-policies member holding names.
func policies(names ...string) *[]string {
	if names == nil {
		names = []string{}
	}
	return &names
}

// TestProblemDetails: the type, status, detail and violated-policies of
// each answer in problem JSON, and the plain text that stands in for it.
func TestProblemDetails(t *testing.T) {
	denied := func(l ratelimit.Limit) ratelimit.Result {
		return ratelimit.Result{Limit: l, RetryAfter: 1500 * time.Millisecond}
	}
	allowed := func(l ratelimit.Limit) ratelimit.Result {
		return ratelimit.Result{Limit: l, Allowed: true, Remaining: 3}
	}
	deny := func(d ratelimit.Decision) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) { ratelimit.Deny(w, r, d) }
	}
	storeDown := errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
	banned := ratelimit.MakeDecision(
		ratelimit.Result{Limit: ratelimit.PerSecond(10).Named("api-second"), RetryAfter: 10 * time.Minute},
		ratelimit.Result{Limit: ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("api-hour"), RetryAfter: 10 * time.Minute},
	)
	banned.Banned = 10 * time.Minute
	tests := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request)
		want   problemBody
		text   string
	}{
		{
			"one limit", deny(ratelimit.MakeDecision(denied(ratelimit.PerMinute(1).Named("login")))),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("login")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"several limits, some deny", deny(ratelimit.MakeDecision(
				allowed(ratelimit.PerSecond(10).Named("second")),
				denied(ratelimit.PerMinute(100).Named("minute")),
				allowed(ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("hour")),
				denied(ratelimit.Limit{Quota: 5000, Window: 24 * time.Hour}.Named("day")),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("minute", "day")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"names with quotes and backslashes", deny(ratelimit.MakeDecision(
				denied(ratelimit.PerMinute(1).Named(`say "hi"`)),
				denied(ratelimit.Limit{Quota: 1, Window: time.Hour}.Named(`C:\temp\`)),
				denied(ratelimit.Limit{Quota: 2, Window: time.Hour}.Named(`\"`)),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies(`say "hi"`, `C:\temp\`, `\"`)},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"unnamed limits of a Decision made by hand", deny(ratelimit.MakeDecision(
				denied(ratelimit.PerMinute(5)),
				denied(ratelimit.PerMinute(100)),
				denied(ratelimit.PerMinute(100).Using(ratelimit.TokenBucket)),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("5-per-1m", "100-per-1m-sliding-window", "100-per-1m-token-bucket")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"names a header cannot carry, in a Decision made by hand", deny(ratelimit.MakeDecision(
				denied(ratelimit.PerMinute(1).Named("caf\u00e9\t<b>")),
				denied(ratelimit.Limit{Quota: 1, Window: time.Hour}.Named("bad \xff byte")),
			)),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 2 s", policies("caf\u00e9\t<b>", "bad \ufffd byte")},
			"Too Many Requests: rate limit exceeded; retry in 2 s\n",
		},
		{
			"no results", deny(ratelimit.Decision{}),
			problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 1 s", policies()},
			"Too Many Requests: rate limit exceeded; retry in 1 s\n",
		},
		{
			"banned", deny(banned),
			problemBody{abnormalUsage, "Abnormal usage detected", 429, "banned after repeated denials; retry in 600 s", policies("api-second", "api-hour")},
			"Too Many Requests: banned after repeated denials; retry in 600 s\n",
		},
		{
			"FailClosed, store down", func(w http.ResponseWriter, r *http.Request) { ratelimit.FailClosed(w, r, storeDown) },
			problemBody{reducedCapacity, "Capacity temporarily reduced", 503, "rate limiting is unavailable; retry in 1 s", nil},
			"Service Unavailable: rate limiting is unavailable; retry in 1 s\n",
		},
		{
			"FailClosed, no key", func(w http.ResponseWriter, r *http.Request) { ratelimit.FailClosed(w, r, ratelimit.ErrInvalid) },
			problemBody{"about:blank", "Bad Request", 400, "the request cannot be rate limited", nil},
			"Bad Request: the request cannot be rate limited\n",
		},
		{
			"FailOpen, bad cost", func(w http.ResponseWriter, r *http.Request) { ratelimit.FailOpen(w, r, ratelimit.ErrInvalid) },
			problemBody{"about:blank", "Bad Request", 400, "the request cannot be rate limited", nil},
			"Bad Request: the request cannot be rate limited\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept", "application/problem+json")
			w := httptest.NewRecorder()
			tt.answer(w, r)
			checkProblem(t, w, tt.want)

			w = httptest.NewRecorder()
			tt.answer(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.want.Status || w.Body.String() != tt.text || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("plain text: got %d %q (%s), want %d %q", w.Code, w.Body.String(), w.Header().Get("Content-Type"), tt.want.Status, tt.text)
			}
		})
	}
}

// checkProblem checks that w holds the problem JSON want.
func checkProblem(t *testing.T, w *httptest.ResponseRecorder, want problemBody) {
	t.Helper()
	if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type: got %q, want application/problem+json", got)
	}
	got, err := parseProblem(w.Body.Bytes())
	if err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if w.Code != want.Status {
		t.Errorf("status: got %d, want %d", w.Code, want.Status)
	}
	if got.Type != want.Type || got.Title != want.Title || got.Status != want.Status || got.Detail != want.Detail {
		t.Errorf("got %q %q %d %q, want %q %q %d %q", got.Type, got.Title, got.Status, got.Detail, want.Type, want.Title, want.Status, want.Detail)
	}
	switch {
	case want.Violated == nil && got.Violated != nil:
		t.Errorf("violated-policies: got %q, want none", *got.Violated)
	case want.Violated != nil && got.Violated == nil:
		t.Errorf("violated-policies: got none, want %q", *want.Violated)
	case want.Violated != nil && !slices.Equal(*got.Violated, *want.Violated):
		t.Errorf("violated-policies: got %q, want %q", *got.Violated, *want.Violated)
	}
}

// TestProblemThroughLimiter: the violated-policies of a Limiter's denial
// name the policies as RateLimit-Policy does, made-up names included.
func TestProblemThroughLimiter(t *testing.T) {
	l := newLimiter(t, newMemory(t), "problem", ratelimit.WithLimits(
		ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named(`say "hi" \ bye`),
		ratelimit.Limit{Quota: 100, Window: time.Hour},
		ratelimit.Limit{Quota: 1, Window: 24 * time.Hour}.Using(ratelimit.FixedWindow),
	))
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if w := serve(h, "GET", "/"); w.Code != 200 {
		t.Fatalf("first request: got %d, want 200", w.Code)
	}
	w := serve(h, "GET", "/", withHeader("Accept", "application/json"))
	if got, want := w.Header().Get("RateLimit-Policy"), `"say \"hi\" \\ bye";q=1;w=60, "100-per-1h";q=100;w=3600, "1-per-24h";q=1;w=86400`; got != want {
		t.Errorf("RateLimit-Policy: got %q, want %q", got, want)
	}
	checkProblem(t, w, problemBody{quotaExceeded, "Quota exceeded", 429, "rate limit exceeded; retry in 86400 s", policies(`say "hi" \ bye`, "1-per-24h")})
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,` +
		`"detail":"rate limit exceeded; retry in 86400 s","violated-policies":["say \"hi\" \\ bye","1-per-24h"]}` + "\n"
	if got := w.Body.String(); got != want {
		t.Errorf("body: got %s, want %s", got, want)
	}
}

// FuzzProblemName: any name in a Decision made by hand comes back from
// the problem JSON as encoding/json would have written it.
func FuzzProblemName(f *testing.F) {
	for _, name := range []string{"", "api", `a"b`, `a\b`, "\x00\x1f\x7f", "\u2028<&>", "\xff\xfe", "caf\u00e9"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		l := ratelimit.PerMinute(1).Named(name)
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept", "application/json")
		ratelimit.Deny(w, r, ratelimit.MakeDecision(ratelimit.Result{Limit: l}))
		want := "1-per-1m"
		if name != "" {
			q, err := json.Marshal(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(q, &want); err != nil {
				t.Fatal(err)
			}
		}
		p, err := parseProblem(w.Body.Bytes())
		if err != nil {
			t.Fatalf("body %q: %v", w.Body.String(), err)
		}
		if p.Violated == nil || len(*p.Violated) != 1 || (*p.Violated)[0] != want {
			t.Errorf("violated-policies of %q: got %v, want [%q]", name, p.Violated, want)
		}
	})
}

// BenchmarkDeny is the cost of the default denial's body, in plain text
// and in problem JSON.
func BenchmarkDeny(b *testing.B) {
	d := ratelimit.MakeDecision(
		ratelimit.Result{Limit: ratelimit.PerSecond(10).Named("api-second"), RetryAfter: 300 * time.Millisecond},
		ratelimit.Result{Limit: ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("api-hour"), Allowed: true, Remaining: 400},
	)
	for _, accept := range []string{"", "application/json"} {
		b.Run("accept="+accept, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/", nil)
			if accept != "" {
				r.Header.Set("Accept", accept)
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				ratelimit.Deny(w, r, d)
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps only its header.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
