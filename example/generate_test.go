package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// quotaOf is one policy of GET /v1/quota's answer.
type quotaOf struct {
	Policy    string `json:"policy"`
	Limit     int    `json:"limit"`
	Remaining int    `json:"remaining"`
	ResetMS   int64  `json:"reset_ms"`
}

// genQuota returns GET /v1/quota's answer for key, by policy.
func genQuota(t *testing.T, server, key string) map[string]quotaOf {
	t.Helper()
	resp := send(t, "GET", server+"/v1/quota", map[string]string{"X-API-Key": key}, nil)
	defer resp.Body.Close()
	var q []quotaOf
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/quota: %d, %v", resp.StatusCode, err)
	}
	names := make([]string, len(q))
	byName := map[string]quotaOf{}
	for i, p := range q {
		names[i] = p.Policy
		byName[p.Policy] = p
	}
	if got := strings.Join(names, ","); got != "gen-rpm,gen-tpm,gen-concurrent,gen-month" {
		t.Fatalf("GET /v1/quota: policies %s", got)
	}
	return byName
}

// rateLimitItem returns the item of policy in a RateLimit field.
func rateLimitItem(field, policy string) string {
	for _, item := range strings.Split(field, ", ") {
		if strings.HasPrefix(item, `"`+policy+`";`) {
			return item
		}
	}
	return ""
}

// TestModelAPI drives POST /v1/generate and GET /v1/quota on every
// framework, on the embedded and a real Redis: bad parameters are
// refused before anything is counted; the tokens a response generated are
// charged to gen-tpm and gen-month and its headers say so; 4 requests in
// flight per key, and the others denied while they hold their slots; a
// response past gen-tpm's quota is charged whole, and the key is denied
// until the debt is paid; GET /v1/quota spends nothing.
func TestModelAPI(t *testing.T) {
	forEachServer(t, func(t *testing.T, framework, bin string, args []string, _ *redis.Client) {
		server := start(t, bin, args...)
		key := map[string]string{"X-API-Key": "k-" + framework}
		generate := func(tokens, hold int) *http.Response {
			return send(t, "POST", fmt.Sprintf("%s/v1/generate?tokens=%d&hold_ms=%d", server, tokens, hold), key, nil)
		}

		for _, bad := range []string{"tokens=-1&hold_ms=0", "tokens=100001&hold_ms=0", "tokens=5&hold_ms=10001", "tokens=x&hold_ms=0", "hold_ms=0"} {
			if resp := send(t, "POST", server+"/v1/generate?"+bad, key, nil); resp.StatusCode != 400 {
				t.Errorf("POST /v1/generate?%s: got %d, want 400", bad, resp.StatusCode)
			}
		}
		q := genQuota(t, server, key["X-API-Key"])
		for name, want := range map[string]int{"gen-rpm": 20, "gen-tpm": 40_000, "gen-concurrent": 4, "gen-month": 1_000_000} {
			if q[name].Limit != want || q[name].Remaining != want {
				t.Errorf("after bad requests: %s %+v, want %d of %d left: nothing counted", name, q[name], want, want)
			}
		}

		resp := generate(1200, 0)
		var body struct{ Tokens int }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.Tokens != 1200 {
			t.Fatalf("POST /v1/generate: %d, %+v, %v", resp.StatusCode, body, err)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"gen-rpm";q=20;w=60, "gen-tpm";q=40000;w=60, "gen-concurrent";q=4;qu="concurrent-requests", "gen-month";q=1000000`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		field := resp.Header.Get("RateLimit")
		for policy, prefix := range map[string]string{"gen-rpm": `"gen-rpm";r=19;t=`, "gen-tpm": `"gen-tpm";r=38800;t=`, "gen-concurrent": `"gen-concurrent";r=3;t=0`, "gen-month": `"gen-month";r=998800;t=`} {
			if item := rateLimitItem(field, policy); !strings.HasPrefix(item, prefix) {
				t.Errorf("RateLimit %q: %s is %q, want %s...", field, policy, item, prefix)
			}
		}
		q = genQuota(t, server, key["X-API-Key"])
		if q["gen-tpm"].Remaining != 38_800 || q["gen-month"].Remaining != 998_800 || q["gen-rpm"].Remaining != 19 || q["gen-concurrent"].Remaining != 4 {
			t.Errorf("GET /v1/quota after 1,200 tokens: %+v", q)
		}
		if r := q["gen-month"].ResetMS; r <= 0 || r > 31*24*3600*1000 {
			t.Errorf("gen-month resets in %dms, want within a month", r)
		}

		// Six at once, each holding its slot 1.5s: four get one.
		var mu sync.Mutex
		codes := map[int]int{}
		retry := ""
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				resp := generate(0, 1500)
				mu.Lock()
				defer mu.Unlock()
				codes[resp.StatusCode]++
				if resp.StatusCode == 429 {
					retry = resp.Header.Get("Retry-After")
					if item := rateLimitItem(resp.Header.Get("RateLimit"), "gen-concurrent"); item != `"gen-concurrent";r=0;t=0` {
						t.Errorf("denied: gen-concurrent is %q, want r=0;t=0", item)
					}
				}
			})
		}
		wg.Wait()
		if codes[200] != 4 || codes[429] != 2 || retry != "1" {
			t.Errorf("six requests at once: %v, Retry-After %q; want four 200 and two 429 with Retry-After 1", codes, retry)
		}
		if q = genQuota(t, server, key["X-API-Key"]); q["gen-concurrent"].Remaining != 4 {
			t.Errorf("after the six: %d slots left, want every one given back", q["gen-concurrent"].Remaining)
		}

		// Past gen-tpm's 38,800 left: charged whole, a debt.
		resp = generate(45_000, 0)
		if item := rateLimitItem(resp.Header.Get("RateLimit"), "gen-tpm"); resp.StatusCode != 200 || !strings.HasPrefix(item, `"gen-tpm";r=0;`) {
			t.Fatalf("45,000 tokens: %d, gen-tpm %q; want 200 and nothing left", resp.StatusCode, item)
		}
		resp = generate(1, 0)
		if resp.StatusCode != 429 {
			t.Fatalf("in debt: got %d, want 429", resp.StatusCode)
		}
		q = genQuota(t, server, key["X-API-Key"])
		if q["gen-tpm"].Remaining != 0 || q["gen-month"].Remaining != 1_000_000-1_200-45_000 {
			t.Errorf("after the debt: %+v; want gen-tpm spent and gen-month %d", q, 1_000_000-1_200-45_000)
		}
		if other := genQuota(t, server, "another-key"); other["gen-tpm"].Remaining != 40_000 {
			t.Errorf("another key: %+v, want its own quota", other["gen-tpm"])
		}
		reserves(t, server, "r-"+framework)
		streams(t, server, "s-"+framework)
	})
}

// streams drives stream=true on server for a fresh key: a malformed
// stream is a 400 naming it; a stream charges each event as it sends it,
// asking for more past its max_tokens, and stops with "event: limited"
// when gen-tpm has no room for more, its last event charged at once as
// debt; the quota then counts exactly what was sent.
func streams(t *testing.T, server, key string) {
	t.Helper()
	header := map[string]string{"X-API-Key": key}
	post := func(query string) (int, string) {
		resp := send(t, "POST", server+"/v1/generate?"+query, header, nil)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := post("tokens=5&hold_ms=0&stream=yes"); code != 400 || !strings.Contains(body, "stream") {
		t.Errorf("stream=yes: %d %q, want 400 naming stream", code, body)
	}
	// 35,000 tokens in 10 events of 3,500, past the 1,000 reserved: each
	// event asks for more, and gets it.
	if code, body := post("tokens=35000&hold_ms=10&max_tokens=1000&stream=true"); code != 200 || strings.Count(body, "data: {\"tokens\": 3500}") != 10 || !strings.Contains(body, "event: done\ndata: {\"tokens\": 35000}") {
		t.Fatalf("a stream of 35,000 tokens: %d %q; want 10 events of 3,500, then done", code, body)
	}
	// 5,000 left: events of 1,000 until the sixth, told no, stops it.
	if code, body := post("tokens=10000&hold_ms=10&max_tokens=1000&stream=true"); code != 200 || strings.Count(body, "data: {\"tokens\": 1000}") != 6 || !strings.Contains(body, "event: limited\ndata: {\"tokens\": 6000}") {
		t.Fatalf("a stream of 10,000 tokens with 5,000 left: %d %q; want 6 events of 1,000, then limited", code, body)
	}
	q := genQuota(t, server, key)
	if q["gen-tpm"].Remaining != 0 || q["gen-month"].Remaining != 1_000_000-41_000 {
		t.Errorf("after 41,000 streamed: %+v; want gen-tpm spent and gen-month %d", q, 1_000_000-41_000)
	}
}

// reserves drives max_tokens on server for a fresh key: a malformed one
// is a 400 naming it, one past gen-tpm a 400 naming gen-tpm, before
// anything is counted; a request in flight reserves its max_tokens, which
// GET /v1/quota shows and which keeps a second request out; once it ends
// with fewer tokens, the rest comes back.
func reserves(t *testing.T, server, key string) {
	t.Helper()
	header := map[string]string{"X-API-Key": key}
	post := func(query string) *http.Response {
		return send(t, "POST", server+"/v1/generate?"+query, header, nil)
	}
	for query, want := range map[string]string{
		"tokens=5&hold_ms=0&max_tokens=0":     "max_tokens",
		"tokens=5&hold_ms=0&max_tokens=x":     "max_tokens",
		"tokens=5&hold_ms=0&max_tokens=50000": "gen-tpm",
	} {
		resp := post(query)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(body), want) {
			t.Errorf("POST /v1/generate?%s: %d %q, want 400 naming %s", query, resp.StatusCode, body, want)
		}
	}
	if q := genQuota(t, server, key); q["gen-tpm"].Remaining != 40_000 || q["gen-rpm"].Remaining != 20 {
		t.Errorf("after the refusals: %+v, want nothing counted", q)
	}
	done := make(chan *http.Response, 1)
	go func() { done <- post("tokens=100&hold_ms=4000&max_tokens=30000") }()
	reserved := false
	for range 300 { // 3s of the 4 it holds
		if q := genQuota(t, server, key); q["gen-tpm"].Remaining == 10_000 && q["gen-month"].Remaining == 970_000 {
			reserved = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !reserved {
		t.Fatalf("the request in flight: GET /v1/quota never showed its 30,000 tokens reserved: %+v", genQuota(t, server, key))
	}
	if resp := post("tokens=100&hold_ms=0&max_tokens=20000"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("20,000 more while 30,000 are reserved: %d, Retry-After %q; want 429, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := <-done; resp.StatusCode != 200 {
		t.Fatalf("the request that reserved: %d", resp.StatusCode)
	}
	if q := genQuota(t, server, key); q["gen-tpm"].Remaining != 39_900 || q["gen-month"].Remaining != 999_900 {
		t.Errorf("after it generated 100 of its 30,000: %+v, want 39,900 and 999,900 left", q)
	}
}
