package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/admin"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// adminApp is a Limiter with a Plane and the Plane's handler, on a
// redis-server, behind a Fallback: limits "rpm" (10 a minute) and, on
// POST /login, "login" (3 a minute, a sliding log), keyed by X-API-Key
// (hashed), which the handler's Options.Key turns a client's API key
// into. Its observer keeps the audit events.
type adminApp struct {
	plane   *admin.Plane
	limited http.Handler
	admin   http.Handler
	keyOf   func(policy, clientKey string) (string, error)
	store   ratelimit.Store // the Fallback the Limiter decides through
	apiKey  ratelimit.KeyFunc
	ns      string
	mu      sync.Mutex
	audit   []ratelimit.Event
}

// storedKey is the store's form of the client key k.
func (a *adminApp) storedKey(t *testing.T, k string) string {
	t.Helper()
	s, err := a.keyOf("", k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newAdminApp(t *testing.T) *adminApp {
	t.Helper()
	return newAdminAppWith(t, admin.Options{Who: func(r *http.Request) string { return r.Header.Get("X-Operator") }})
}

// newAdminAppWith is newAdminApp with the Plane's Options opts, but for
// Key and Label, which it sets.
func newAdminAppWith(t *testing.T, opts admin.Options) *adminApp {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redistest.Shared(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	r, err := store.NewRedis(c, store.RedisOptions{Prefix: "rltest:"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := store.NewFallback(r, store.FallbackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	apiKey, err := ratelimit.HeaderKey("X-API-Key", []byte("a test secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(_, k string) (string, error) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", k)
		return apiKey(r)
	}
	ns := fmt.Sprintf("ov%d", namespaces.Add(1))
	a := &adminApp{}
	k1, err := keyOf("", "k1")
	if err != nil {
		t.Fatal(err)
	}
	label := func(stored string) string { return map[string]string{k1: "customer one"}[stored] }
	opts.Key, opts.Label, a.keyOf, a.store, a.apiKey, a.ns = keyOf, label, keyOf, f, apiKey, ns
	a.plane, err = admin.New(r, ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.plane.Close() })
	l, err := ratelimit.New(f, ns, ratelimit.WithKey(apiKey), ratelimit.WithOverrides(a.plane),
		ratelimit.WithLimits(ratelimit.PerMinute(10).Using(ratelimit.FixedWindow).Named("rpm")),
		ratelimit.WithRoutes(map[string][]ratelimit.Limit{"POST /login": {ratelimit.PerMinute(3).Using(ratelimit.SlidingLog).Named("login")}}),
		ratelimit.WithObserver(func(_ ratelimit.Request, e ratelimit.Event) {
			if e.Outcome == "changed" {
				a.mu.Lock()
				a.audit = append(a.audit, e)
				a.mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	a.limited = l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	mux := http.NewServeMux()
	mux.Handle("/admin/", a.plane.Handler())
	a.admin = mux
	return a
}

// call sends method path with body to the admin handler and returns the
// status and body.
func (a *adminApp) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("X-Operator", "ops@example.com")
	w := httptest.NewRecorder()
	a.admin.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// send sends n requests of API key k to path through the Limiter and
// returns how many were admitted.
func (a *adminApp) send(method, path, k string, n int) int {
	ok := 0
	for range n {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("X-API-Key", k)
		w := httptest.NewRecorder()
		a.limited.ServeHTTP(w, r)
		if w.Code == 200 {
			ok++
		}
	}
	return ok
}

// TestHandler: the handler's JSON endpoints as the example's contract
// gives them: an override set by the API key a client sends applies to
// that client's next request; the policies, overrides, shadow flip and
// keys denied most read back; bad requests are 400s naming the field;
// every change is an audit event with who, what, before and after.
func TestHandler(t *testing.T) {
	t.Parallel()
	a := newAdminApp(t)
	steps := []struct {
		method, path, body string
		status             int
		want               string // a substring of the body
	}{
		{"GET", "/admin/policies", "", 200, `{"policy":"rpm","algorithm":"fixed-window","quota":10,"window_ms":60000,"shadow":false,"overridden":false}`},
		{"GET", "/admin/policies", "", 200, `{"policy":"login","route":"POST /login","algorithm":"sliding-log","quota":3,"window_ms":60000,"shadow":false,"overridden":false}`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":20}`, 204, ""},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k2","blocked":true}`, 204, ""},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k3","unlimited":true}`, 204, ""},
		{"GET", "/admin/overrides", "", 200, `"label":"customer one","quota":20}`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":-2}`, 400, `Quota is -2: want a quota above 0`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":-1}`, 400, `quota is -1: write \"unlimited\": true for unlimited`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":0}`, 400, `quota is 0: write \"blocked\": true to block`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":5,"shadow":false}`, 400, `shadow is false: write \"enforced\": true to enforce`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","blocked":true,"quota":5}`, 400, `Unlimited or Blocked goes alone`},
		{"PUT", "/admin/overrides", `{"policy":"nope","key":"k1","quota":5}`, 400, `Policy \"nope\" is the name of no limit`},
		{"PUT", "/admin/overrides", `{"policy":"login","key":"k1","quota":500000}`, 400, `Quota`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":"many"}`, 400, `quota: a quota above 0, or none for the limit's, not \"many\"`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","quota":"100"}`, 400, `not \"100\"`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","enforce":true}`, 400, `unknown field \"enforce\": write \"enforced\": true`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"header:X-Api-Key:0123456789abcdef0123456789abcdef","quota":5}`, 400, `is in the store's form, as listings give it: give it as StoredKey`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","stored_key":"k1","quota":5}`, 400, `StoredKey \"k1\" is no key the key function of rpm makes (they start \"header:X-Api-Key:\")`},
		{"DELETE", "/admin/overrides?policy=rpm&key=nobody", "", 404, `no override of rpm`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k1","qouta":5}`, 400, `unknown field \"qouta\"`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","key":"k*","quota":5}`, 400, `is a prefix`},
		{"PUT", "/admin/overrides", `{"policy":"rpm","stored_key":"header:X-Api-Key:*","window_ms":120000}`, 204, ""},
		{"PUT", "/admin/shadow", `{"policy":"login","shadow":true}`, 204, ""},
		{"GET", "/admin/policies", "", 200, `{"policy":"login","route":"POST /login","algorithm":"sliding-log","quota":3,"window_ms":60000,"shadow":true,"overridden":true}`},
		{"PUT", "/admin/shadow", `{"policy":"login"}`, 400, `shadow is missing`},
		{"DELETE", "/admin/overrides?policy=rpm&stored_key=header:X-Api-Key:*", "", 204, ""},
		{"DELETE", "/admin/overrides?key=k3", "", 400, "policy is missing"},
		{"POST", "/admin/overrides", "{}", 405, "not allowed"},
		{"GET", "/admin/nothing", "", 404, "no such endpoint"},
		{"GET", "/admin/top", "", 400, "policy is missing"},
		{"GET", "/admin/top?policy=rpm&last=2h", "", 400, "want 1m or 1h"},
		{"GET", "/admin/health", "", 200, `"overrides":{"read":true,"failing":false,"count":4}`},
		{"GET", "/admin/health", "", 200, `"decisions":"redis"`},
		{"GET", "/admin/", "", 200, "</html>"},
	}
	for i, st := range steps {
		status, body := a.call(t, st.method, st.path, st.body)
		if status != st.status || !strings.Contains(body, st.want) {
			t.Errorf("step %d, %s %s %s: %d %s; want %d holding %s", i, st.method, st.path, st.body, status, body, st.status, st.want)
		}
	}
	// The overrides apply to the clients' requests at once.
	if n := a.send("GET", "/", "k1", 25); n != 20 {
		t.Errorf("k1, raised to 20: %d of 25 admitted", n)
	}
	if n := a.send("GET", "/", "k2", 3); n != 0 {
		t.Errorf("k2, blocked: %d of 3 admitted", n)
	}
	if n := a.send("GET", "/", "k3", 30); n != 30 {
		t.Errorf("k3, unlimited: %d of 30 admitted", n)
	}
	if n := a.send("POST", "/login", "k4", 5); n != 5 {
		t.Errorf("login, in shadow: %d of 5 admitted", n)
	}
	status, body := a.call(t, "GET", "/admin/top?policy=rpm", "")
	var top []struct {
		Key    string `json:"key"`
		Denied int64  `json:"denied"`
	}
	if err := json.Unmarshal([]byte(body), &top); status != 200 || err != nil || len(top) != 2 || top[0].Denied != 5 || top[1].Denied != 3 {
		t.Errorf("GET top: %d %s (%v); want k1's 5 denials, then k2's 3", status, body, err)
	}
	if !strings.Contains(body, `"label":"customer one","denied":5`) {
		t.Errorf("GET top: %s; want k1 labelled", body)
	}
	if status, body := a.call(t, "GET", "/admin/top?policy=login+(shadow)&last=1h", ""); status != 200 || !strings.Contains(body, `"denied":2`) {
		t.Errorf("GET top of the shadow policy's would-be denials: %d %s; want k4's 2", status, body)
	}
	if status, body := a.call(t, "GET", "/admin/top?policy=login&last=1h", ""); status != 200 || body != "[]\n" {
		t.Errorf("GET top of the shadow policy's denials: %d %s; want none: its would-be denials are apart", status, body)
	}
	// The audit: who, what, before and after, for every change.
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.audit) != 6 {
		t.Fatalf("%d audit events, want 6 (4 sets, a shadow flip, a delete): %+v", len(a.audit), a.audit)
	}
	first, flip, del := a.audit[0], a.audit[4], a.audit[5]
	if first.Who != "ops@example.com" || !strings.HasPrefix(first.What, `override rpm "header:X-Api-Key:`) || first.Before != "" || !strings.Contains(first.After, `"quota":20`) {
		t.Errorf("the first change's event: %+v", first)
	}
	if flip.What != "shadow login" || flip.Before != "" || !strings.Contains(flip.After, `"shadow":true`) {
		t.Errorf("the shadow flip's event: %+v", flip)
	}
	if !strings.Contains(del.Before, `"window_ms":120000`) || del.After != "" {
		t.Errorf("the delete's event: %+v", del)
	}
}

// TestPageInChromium: the page, loaded by headless Chromium,
// shows the policies as in force, the overrides, the
// keys denied most and the health; it has no script (its
// Content-Security-Policy allows none) and loads nothing from elsewhere.
// Chromium is Debian's chromium package; without it the test skips, and
// with RATELIMIT_REQUIRE_BROWSER=1 (CI sets it) it fails.
func TestPageInChromium(t *testing.T) {
	t.Parallel()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("RATELIMIT_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium is not installed, and RATELIMIT_REQUIRE_BROWSER=1")
		}
		t.Skip("chromium is not installed (Debian's chromium package); the page is not tested in a browser")
	}
	a := newAdminApp(t)
	for _, st := range []string{`{"policy":"rpm","key":"k1","quota":2}`, `{"policy":"rpm","stored_key":"header:X-Api-Key:*","unlimited":true}`} {
		if status, body := a.call(t, "PUT", "/admin/overrides", st); status != 204 {
			t.Fatalf("PUT overrides %s: %d %s", st, status, body)
		}
	}
	if status, body := a.call(t, "PUT", "/admin/shadow", `{"policy":"login","shadow":true}`); status != 204 {
		t.Fatalf("PUT shadow: %d %s", status, body)
	}
	a.send("GET", "/", "k1", 6)
	srv := httptest.NewServer(a.admin)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--dump-dom", srv.URL+"/admin/")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)
	if dom == "" {
		t.Fatalf("chromium printed nothing:\n%s", stderr.String())
	}
	text := regexp.MustCompile(`\s+`).ReplaceAllString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(dom, " "), " ")
	for _, want := range []string{
		"rpm (every route) fixed-window 10 60000 enforced",
		"login POST /login sliding-log 3 (overridden) 60000 shadow",
		"rpm header:X-Api-Key:* unlimited the limit's the limit's",
		"Overrides: read from Redis; 3 set.",
		"Fallback of ov",
		": decisions made in Redis",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the page Chromium shows lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(dom, `class="policy"`); n != 2 {
		t.Errorf("the page shows %d policies, want 2", n)
	}
	if !regexp.MustCompile(`<tr class="minute"><td class="key">header:X-Api-Key:[0-9a-f]{32} \(customer one\)</td><td class="n">4</td></tr>`).MatchString(dom) {
		t.Errorf("the page does not show k1's 4 denials in the last minute:\n%s", dom)
	}
	if regexp.MustCompile(`(src|href)="?(https?:)?//`).MatchString(dom) || strings.Contains(dom, "<script") {
		t.Errorf("the page loads something from elsewhere, or has a script:\n%s", dom)
	}
}

// TestRoundTrip: every entry of a listing, sent back unchanged, sets the
// same override (PUT, 204) and then deletes it (DELETE with the entry as
// its body, 204), after which it is gone (DELETE again: 404); putting a
// policy in shadow and back leaves no override behind.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	a := newAdminApp(t)
	for _, body := range []string{
		`{"policy":"rpm","key":"k1","quota":20}`,
		`{"policy":"rpm","key":"k2","quota":5,"shadow":true}`,
		`{"policy":"rpm","stored_key":"header:X-Api-Key:*","window_ms":120000}`,
		`{"policy":"rpm","unlimited":true}`,
	} {
		if status, out := a.call(t, "PUT", "/admin/overrides", body); status != 204 {
			t.Fatalf("PUT %s: %d %s", body, status, out)
		}
	}
	status, listed := a.call(t, "GET", "/admin/overrides", "")
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(listed), &entries); status != 200 || err != nil || len(entries) != 4 {
		t.Fatalf("GET overrides: %d %s (%v), want 4 entries", status, listed, err)
	}
	for _, e := range entries {
		if status, out := a.call(t, "PUT", "/admin/overrides", string(e)); status != 204 {
			t.Errorf("PUT of the listed %s: %d %s, want 204", e, status, out)
		}
	}
	if _, again := a.call(t, "GET", "/admin/overrides", ""); again != listed {
		t.Errorf("after PUT of each listed entry unchanged, the listing is %s, want %s", again, listed)
	}
	for _, e := range entries {
		if status, out := a.call(t, "DELETE", "/admin/overrides", string(e)); status != 204 {
			t.Errorf("DELETE of the listed %s: %d %s, want 204", e, status, out)
		}
		if status, _ := a.call(t, "DELETE", "/admin/overrides", string(e)); status != 404 {
			t.Errorf("DELETE of %s again: %d, want 404", e, status)
		}
	}
	if _, left := a.call(t, "GET", "/admin/overrides", ""); left != "[]\n" {
		t.Errorf("after deleting every listed entry, the listing is %s, want []", left)
	}
	for _, shadow := range []string{"true", "false"} {
		if status, out := a.call(t, "PUT", "/admin/shadow", `{"policy":"login","shadow":`+shadow+`}`); status != 204 {
			t.Fatalf("PUT shadow %s: %d %s", shadow, status, out)
		}
	}
	if _, left := a.call(t, "GET", "/admin/overrides", ""); left != "[]\n" {
		t.Errorf("after login's shadow flipped on and back, the listing is %s, want [] (login is enforced by itself)", left)
	}
}
