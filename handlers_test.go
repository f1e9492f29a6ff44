package ratelimit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// TestHandlersAnswer: what Deny, FailOpen and FailClosed write, and
// whether the request is served.
func TestHandlersAnswer(t *testing.T) {
	denied := ratelimit.Decision{Results: []ratelimit.Result{{Limit: ratelimit.PerMinute(1), RetryAfter: 1500 * time.Millisecond}}}
	storeDown := errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")
	noKey := fmt.Errorf("%w: header X-Api-Key is missing", ratelimit.ErrNoKey)
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
		var problem struct {
			Title  string
			Status int
		}
		isJSON := w.Header().Get("Content-Type") == "application/problem+json"
		if isJSON != tt.json {
			t.Errorf("Accept %q: got Content-Type %q, want JSON: %v", tt.accept, w.Header().Get("Content-Type"), tt.json)
			continue
		}
		if isJSON {
			if err := json.Unmarshal(w.Body.Bytes(), &problem); err != nil || problem.Status != 429 || problem.Title != "Too Many Requests" {
				t.Errorf("Accept %q: body %q: got %+v, %v", tt.accept, w.Body.String(), problem, err)
			}
		} else if got := w.Header().Get("Content-Type"); got != "text/plain; charset=utf-8" {
			t.Errorf("Accept %q: got Content-Type %q, want text/plain", tt.accept, got)
		}
	}
}
