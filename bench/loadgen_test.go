package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseWrkOutput(t *testing.T) {
	// What wrk 4.1.0 prints with wrk.lua, its own summary first.
	const out = `Running 3s test @ http://127.0.0.1:40000/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.23ms  456.00us  10.00ms   80.00%
    Req/Sec    25.00k     1.00k   27.00k    70.00%
  150123 requests in 3.00s, 18.00MB read
  Socket errors: connect 0, read 2, write 1, timeout 3
  Non-2xx or 3xx responses: 150000
Requests/sec:  50041.00
Transfer/sec:      6.00MB
bench-wrk requests=150123 duration_us=3000012 p50_us=1104 p99_us=3010 connect=0 read=2 write=1 timeout=3 status=150000
`
	got, err := parseWrkOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	want := loadResult{
		Requests: 150123,
		Elapsed:  3000012 * time.Microsecond,
		P50:      1104 * time.Microsecond,
		P99:      3010 * time.Microsecond,
		Errors:   6,
		Non2xx:   150000,
		FirstErr: "wrk: connect 0, read 2, write 1, timeout 3",
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if r := got.rate(); r < 50040 || r > 50042 {
		t.Errorf("rate: got %.1f, want about 50041", r)
	}
}

func TestParseWrkOutputErrors(t *testing.T) {
	for _, out := range []string{
		"",
		"Requests/sec: 100\n",
		"bench-wrk requests=1 duration_us=2\n",
		"bench-wrk requests=x duration_us=2 p50_us=1 p99_us=1 connect=0 read=0 write=0 timeout=0 status=0\n",
		"bench-wrk requests=1 duration_us=2 p50_us p99_us=1 connect=0 read=0 write=0 timeout=0 status=0\n",
	} {
		if r, err := parseWrkOutput(out); err == nil {
			t.Errorf("parseWrkOutput(%q): got %+v, want an error", out, r)
		}
	}
}

func TestHTTPKey(t *testing.T) {
	tests := []struct {
		prefix  string
		keys, i int
		want    string
	}{
		{"hot", 1, 0, "hot"},
		{"user:", 10_000, 0, "user:00000"},
		{"user:", 10_000, 9999, "user:09999"},
	}
	for _, tt := range tests {
		if got := httpKey(tt.prefix, tt.keys, tt.i); got != tt.want {
			t.Errorf("httpKey(%q, %d, %d): got %q, want %q", tt.prefix, tt.keys, tt.i, got, tt.want)
		}
	}
}

func TestWrkSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		300 * time.Millisecond:  "1s",
		3 * time.Second:         "3s",
		2500 * time.Millisecond: "3s",
	} {
		if got := wrkSeconds(d); got != want {
			t.Errorf("wrkSeconds(%v): got %q, want %q", d, got, want)
		}
	}
}

// TestGoLoad runs the Go load generator against a server that counts the
// keys it sees: every key of the space is sent, statuses other than 2xx
// and 3xx are counted, and a server closing connections is no error.
func TestGoLoad(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get(keyHeader)
		mu.Lock()
		seen[k]++
		n := seen[k]
		mu.Unlock()
		if n%7 == 0 {
			w.Header().Set("Connection", "close")
		}
		if strings.HasSuffix(k, "3") {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(helloBody)
	}))
	defer srv.Close()

	r, err := goLoad(loadSpec{URL: srv.URL + "/", Keys: 40, Prefix: "k", Conns: 4, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 {
		t.Errorf("errors: got %d (%s), want 0", r.Errors, r.FirstErr)
	}
	mu.Lock()
	defer mu.Unlock()
	var total, denied uint64
	for k, n := range seen {
		total += uint64(n)
		if strings.HasSuffix(k, "3") {
			denied += uint64(n)
		}
	}
	if r.Requests == 0 || r.Requests != total {
		t.Errorf("requests: got %d, want the %d the server answered", r.Requests, total)
	}
	if r.Non2xx != denied {
		t.Errorf("non-2xx: got %d, want %d", r.Non2xx, denied)
	}
	if r.Requests >= 40 && len(seen) != 40 {
		t.Errorf("got %d distinct keys after %d requests, want all 40", len(seen), r.Requests)
	}
	if r.P50 <= 0 || r.P99 < r.P50 {
		t.Errorf("latency: got p50 %v, p99 %v", r.P50, r.P99)
	}
}
