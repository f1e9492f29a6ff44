package ratefields_test

import (
	"bytes"
	"net/http"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ratefields"
)

// fuzzNow is when FuzzParse parses: a quarter second into a second.
var fuzzNow = time.Date(2026, 11, 25, 14, 35, 37, 250_000_000, time.UTC)

// fuzzHeader makes a header of lines "Name: value", one a line: names in
// canonical form, values trimmed, a name given twice on two lines, as
// net/http reads a response.
func fuzzHeader(fields string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(fields, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		h[key] = append(h[key], strings.Trim(value, " \t"))
	}
	return h
}

// FuzzParse parses arbitrary fields, statuses and bodies under caps of
// 0 to 49 days. What must hold on every input: no panic; every count
// within [0, MaxInt], every reset and Retry-After within [0, cap], every
// window 0 or whole seconds within [1s, MaxWindow], every unit a
// registered one; no limit with more units remaining than a policy of
// its name allows; no more than MaxItems policies, limits and violated
// policies, names and partition keys within their bounds, no two
// policies or limits for one quota; Limited exactly for a 429, or a 503
// with something that says so; each problem a known field and reason,
// once; the input untouched; the same answer twice.
func FuzzParse(f *testing.F) {
	f.Add("Ratelimit-Policy: \"api\";q=100;w=60\nRatelimit: \"api\";r=99;t=60\nX-Ratelimit-Limit: 100\nX-Ratelimit-Remaining: 99\nX-Ratelimit-Reset: 60",
		uint16(200), []byte(nil), uint32(600_000))
	f.Add("Ratelimit-Policy: \"default\";q=100;w=60, \"tokens\";q=40000;w=60;qu=\"content-bytes\";pk=:cHJvamVjdA==:\nRatelimit: \"default\";r=50;t=30;pk=:cHJvamVjdA==:",
		uint16(200), []byte(nil), uint32(60_000))
	f.Add("Ratelimit: limit=100, remaining=0, reset=60\nRatelimit-Policy: 100;w=60", uint16(429), []byte(nil), uint32(600_000))
	f.Add("Ratelimit-Limit: 100\nRatelimit-Remaining: 0\nRatelimit-Reset: 60\nRatelimit-Policy: 100;w=60", uint16(429), []byte(nil), uint32(600_000))
	f.Add("X-Ratelimit-Limit: 5000\nX-Ratelimit-Remaining: 4999\nX-Ratelimit-Reset: 1795622137\nX-Ratelimit-Used: 1\nX-Ratelimit-Resource: core",
		uint16(200), []byte(nil), uint32(3_600_000))
	f.Add("X-Ratelimit-Limit: 5\nX-Ratelimit-Remaining: 0\nX-Ratelimit-Reset: 1470173023.123\nX-Ratelimit-Reset-After: 1.5", uint16(429), []byte(nil), uint32(600_000))
	f.Add("Retry-After: Wed, 25 Nov 2026 14:36:37 GMT", uint16(503), []byte(nil), uint32(600_000))
	f.Add("Content-Type: application/problem+json\nRetry-After: 29", uint16(429),
		[]byte(`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,"violated-policies":["home"]}`),
		uint32(600_000))
	f.Add("Retry-After: 1\nRetry-After: 2\nRatelimit: \"a\";r=5, \"a\";r=-1\nRatelimit-Policy: \"a\";q=1", uint16(503), []byte(nil), uint32(0))
	f.Fuzz(func(t *testing.T, fields string, status uint16, body []byte, capMS uint32) {
		h := fuzzHeader(fields)
		maxDelay := time.Duration(capMS) * time.Millisecond
		hCopy, bodyCopy := h.Clone(), bytes.Clone(body)
		info, problems := ratefields.Parse(h, int(status), body, fuzzNow, maxDelay)
		if !reflect.DeepEqual(h, hCopy) || !bytes.Equal(body, bodyCopy) {
			t.Fatal("Parse changed its input")
		}
		again, problemsAgain := ratefields.Parse(h, int(status), body, fuzzNow, maxDelay)
		if !reflect.DeepEqual(info, again) || !reflect.DeepEqual(problems, problemsAgain) {
			t.Fatalf("Parse twice: got %+v %v, then %+v %v", info, problems, again, problemsAgain)
		}
		checkInfo(t, info, int(status), maxDelay)
		checkProblems(t, problems)
	})
}

// checkInfo fails t unless info keeps Parse's bounds and promises.
func checkInfo(t *testing.T, info ratefields.Info, status int, maxDelay time.Duration) {
	t.Helper()
	if len(info.Policies) > ratefields.MaxItems || len(info.Limits) > ratefields.MaxItems || len(info.Violated) > ratefields.MaxItems {
		t.Fatalf("got %d policies, %d limits, %d violated, want at most %d each", len(info.Policies), len(info.Limits), len(info.Violated), ratefields.MaxItems)
	}
	within := func(what string, d time.Duration) {
		if d < 0 || d > max(maxDelay, 0) {
			t.Fatalf("got %s %v, want it within [0, %v]", what, d, maxDelay)
		}
	}
	within("Retry-After", info.RetryAfter)
	for i, p := range info.Policies {
		checkName(t, p.Name, p.Partition)
		if p.Quota < 0 || p.Quota > ratefields.MaxInt {
			t.Fatalf("got quota %d, want it within [0, MaxInt]", p.Quota)
		}
		if p.Window != 0 && (p.Window < time.Second || p.Window > ratefields.MaxWindow || p.Window%time.Second != 0) {
			t.Fatalf("got window %v, want 0 or whole seconds within [1s, MaxWindow]", p.Window)
		}
		switch p.Unit {
		case "requests", "content-bytes", "concurrent-requests":
		default:
			t.Fatalf("got unit %q", p.Unit)
		}
		for _, q := range info.Policies[:i] {
			if q.Name == p.Name && q.Partition == p.Partition && q.Quota == p.Quota {
				t.Fatalf("got policy %+v twice: %+v", p, info.Policies)
			}
		}
	}
	for i, l := range info.Limits {
		checkName(t, l.Name, l.Partition)
		if l.Remaining < 0 || l.Remaining > ratefields.MaxInt {
			t.Fatalf("got remaining %d, want it within [0, MaxInt]", l.Remaining)
		}
		if l.Reset < 0 || l.Reset > ratefields.MaxWindow {
			t.Fatalf("got reset %v, want it within [0, MaxWindow]", l.Reset)
		}
		for _, k := range info.Limits[:i] {
			if k.Name == l.Name && k.Partition == l.Partition {
				t.Fatalf("got limits %+v and %+v of one quota", k, l)
			}
		}
		for _, p := range info.Policies {
			if l.Name != "" && p.Name == l.Name && (p.Partition == "" || p.Partition == l.Partition) && l.Remaining > p.Quota {
				t.Fatalf("got limit %+v above its policy %+v", l, p)
			}
		}
	}
	for _, name := range info.Violated {
		if len(name) > ratefields.MaxName {
			t.Fatalf("got a violated policy of %d bytes", len(name))
		}
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if status == http.StatusTooManyRequests && !info.Limited {
			t.Fatal("got a 429 not Limited")
		}
	default:
		if info.Limited || len(info.Violated) > 0 {
			t.Fatalf("got Limited %v, violated policies %q for status %d", info.Limited, info.Violated, status)
		}
	}
}

// checkName fails t unless a name and a partition key are within bounds.
func checkName(t *testing.T, name, partition string) {
	t.Helper()
	if len(name) > ratefields.MaxName || len(partition) > ratefields.MaxPartition {
		t.Fatalf("got a name of %d bytes and a partition key of %d", len(name), len(partition))
	}
}

// checkProblems fails t unless each problem is a known field and reason,
// given once.
func checkProblems(t *testing.T, problems []ratefields.Problem) {
	t.Helper()
	fields := []string{"Ratelimit-Policy", "Ratelimit", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset",
		"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After", "X-Ratelimit-Resource",
		"X-Ratelimit-Used", "Retry-After", "body"}
	reasons := []ratefields.Reason{ratefields.ReasonMalformed, ratefields.ReasonDuplicate, ratefields.ReasonNegative, ratefields.ReasonTooLarge,
		ratefields.ReasonTooMany, ratefields.ReasonCapped, ratefields.ReasonInPast, ratefields.ReasonContradicts}
	for i, p := range problems {
		if !slices.Contains(fields, p.Field) || !slices.Contains(reasons, p.Reason) {
			t.Fatalf("got problem %+v: an unknown field or reason", p)
		}
		for _, q := range problems[:i] {
			if q == p {
				t.Fatalf("got problem %+v twice", p)
			}
		}
	}
}
