package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestStartupMessages: what the example says when it cannot start, and
// its -h, in words that say what to do: a -redis without a scheme, from a
// flag or the environment (never showing a value that may hold a
// password). (A Redis nobody listens on is no reason not to start: see
// TestStartsWhileRedisIsDown.)
func TestStartupMessages(t *testing.T) {
	bins := build(t)
	tests := []struct {
		name    string
		env     []string
		args    []string
		want    []string
		notWant []string
	}{
		{
			name:    "-redis without a scheme",
			args:    []string{"-redis", "127.0.0.1:6379"},
			want:    []string{"-redis 127.0.0.1:6379: not a URL: it has no scheme; write redis://127.0.0.1:6379"},
			notWant: []string{"URL-encoded"},
		},
		{
			name:    "$REDIS_URL without a scheme, with a password",
			env:     []string{"REDIS_URL=limiter:hunter2@127.0.0.1:6379"},
			want:    []string{"$REDIS_URL: not a URL: it has no scheme", "write redis://[user:password@]host:port/db"},
			notWant: []string{"hunter2"},
		},
		{
			name: "-redis-sentinel without a scheme",
			args: []string{"-redis-sentinel", "127.0.0.1:26379"},
			want: []string{"-redis-sentinel 127.0.0.1:26379: not a URL: it has no scheme; write redis://127.0.0.1:26379"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := refused(t, tt.env, bins["net/http"], tt.args...)
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("got:\n%s\nwant it to say %q", out, want)
				}
			}
			for _, not := range tt.notWant {
				if strings.Contains(out, not) {
					t.Errorf("got:\n%s\nwant no %q", out, not)
				}
			}
		})
	}
}

// TestHelp: -h names the program and says in a line what it is, on every
// framework, then lists the flags.
func TestHelp(t *testing.T) {
	bins := build(t)
	for _, tt := range []struct{ framework, program, on string }{
		{"net/http", "net-http", "net/http"},
		{"gin", "gin", "gin"},
		{"echo", "echo", "echo"},
	} {
		t.Run(tt.framework, func(t *testing.T) {
			out, err := exec.Command(bins[tt.framework], "-h").CombinedOutput()
			if err != nil {
				t.Fatalf("-h: %v\n%s", err, out)
			}
			want := fmt.Sprintf("Usage: %s [flags]\n\n%s serves a small HTTP API on %s, limited by ratelimit; without -redis it embeds a Redis.\n\nFlags:\n  -addr", tt.program, tt.program, tt.on)
			if !strings.HasPrefix(string(out), want) {
				t.Errorf("-h begins:\n%s\nwant:\n%s", firstLines(string(out), 5), want)
			}
		})
	}
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestStartupLineDescribesTheBan: the routes the example prints at start
// give the login ban in words, not as a struct.
func TestStartupLineDescribesTheBan(t *testing.T) {
	_, out := startWith(t, nil, build(t)["net/http"])
	waitLog(t, out, "GET /v1/quota", 1) // the last route printed
	want := "3 denials within 1m ban for 1m, each ban twice the last, up to 1h"
	if s := out(); !strings.Contains(s, want) || strings.Contains(s, "{3 1m0s") {
		t.Errorf("the startup lines:\n%s\nwant the ban as %q", s, want)
	}
}

// TestQuotaWithoutKey: GET /v1/quota without an API key, or with an empty
// one, is a 400 that names the header, as the Limiter's routes answer, on
// every framework; not a 503, as if Redis were down.
func TestQuotaWithoutKey(t *testing.T) {
	bins := build(t)
	for _, framework := range frameworks {
		t.Run(framework, func(t *testing.T) {
			t.Parallel()
			server := start(t, bins[framework])
			for _, tt := range []struct {
				header map[string]string
				want   string
			}{
				{nil, "Bad Request: the request cannot be rate limited: header X-Api-Key is missing\n"},
				{map[string]string{"X-API-Key": ""}, "Bad Request: the request cannot be rate limited: header X-Api-Key is empty\n"},
			} {
				for _, path := range []string{"/v1/quota", "/api/"} {
					resp := send(t, "GET", server+path, tt.header, nil)
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != 400 || string(body) != tt.want {
						t.Errorf("GET %s with %v: got %d %q, want 400 %q", path, tt.header, resp.StatusCode, body, tt.want)
					}
				}
			}
		})
	}
}

// TestQuotaResetIsTheHeadersReset: the quota endpoints' reset_ms is the
// reset the headers give, t before it is rounded up to seconds: for a
// token bucket the next token's time, not the time until it is full.
func TestQuotaResetIsTheHeadersReset(t *testing.T) {
	server := start(t, build(t)["net/http"], "-algorithm", "token-bucket", "-limit", "10", "-window", "10s")
	resp := send(t, "GET", server+"/", nil, nil)
	for range 8 {
		resp = send(t, "GET", server+"/", nil, nil)
	}
	tHeader, err := strconv.ParseInt(strings.TrimPrefix(resp.Header.Get("RateLimit"), `"home";r=1;t=`), 10, 64)
	if err != nil || resp.Header.Get("X-RateLimit-Reset") != strconv.FormatInt(tHeader, 10) {
		t.Fatalf("after 9 of 10: RateLimit %q, X-RateLimit-Reset %q", resp.Header.Get("RateLimit"), resp.Header.Get("X-RateLimit-Reset"))
	}
	var q struct {
		Remaining int   `json:"remaining"`
		ResetMS   int64 `json:"reset_ms"`
	}
	getJSON(t, server+"/quota", nil, &q)
	if q.Remaining != 1 || q.ResetMS <= 0 || q.ResetMS > tHeader*1000 {
		t.Errorf("GET /quota: %+v; want 1 left, resetting within the headers' t=%d s", q, tHeader)
	}

	key := map[string]string{"X-API-Key": "k-reset"}
	resp = send(t, "POST", server+"/v1/generate?tokens=10&hold_ms=0", key, nil)
	item := rateLimitItem(resp.Header.Get("RateLimit"), "gen-rpm")
	_, ts, _ := strings.Cut(item, ";t=")
	tRPM, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("gen-rpm item %q", item)
	}
	if got := genQuota(t, server, "k-reset")["gen-rpm"].ResetMS; got <= (tRPM-2)*1000 || got > tRPM*1000 {
		t.Errorf("GET /v1/quota: gen-rpm resets in %d ms; want it to round up to the headers' t=%d s", got, tRPM)
	}
}

// getJSON decodes the JSON answer of GET u into v.
func getJSON(t *testing.T, u string, header map[string]string, v any) {
	t.Helper()
	resp := send(t, "GET", u, header, nil)
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d, %v", u, resp.StatusCode, err)
	}
}
