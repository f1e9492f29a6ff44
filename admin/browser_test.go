package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/admin"
)

// TestPageInBrowser: an operator opens the page in Chromium, driven by
// puppeteer-core (testdata/browser/operator.mjs): without the token it
// is a login form, which refuses a wrong token; the right one starts a
// session whose cookie is HttpOnly and SameSite=Strict; the page's form
// sets an override that the service applies to the client's next
// requests; a button puts a policy in shadow, another deletes the
// override, which the service then no longer applies; after logging out
// the page asks for the token again and the old cookie is refused.
func TestPageInBrowser(t *testing.T) {
	t.Parallel()
	browser, node := lookBrowser(t)
	const token = "an admin token of 32 bytes, or so"
	a := newAdminAppWith(t, admin.Options{Token: token})
	mux := http.NewServeMux()
	mux.Handle("/admin/", a.admin)
	mux.Handle("/", a.limited)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "operator.mjs", browser, srv.URL+"/admin/", token, srv.URL+"/")
	cmd.Dir = "testdata/browser"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("operator.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	steps := map[string]map[string]any{}
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		var step map[string]any
		if err := json.Unmarshal(sc.Bytes(), &step); err != nil {
			t.Fatalf("operator.mjs printed %q: %v", sc.Text(), err)
		}
		steps[step["step"].(string)] = step
		t.Logf("%s", sc.Text())
	}
	for _, c := range []struct {
		step, field string
		want        any
	}{
		{"open", "login", true},
		{"open", "policies", false},
		{"wrong token", "error", "That is not the admin token."},
		{"logged in", "policies", true},
		{"logged in", "httpOnly", true},
		{"logged in", "sameSite", "Strict"},
		{"set", "notice", "Set the override of rpm for " + a.storedKey(t, "k1") + "."},
		{"set", "error", ""},
		{"service after set", "policy", `"rpm";q=2;w=60`},
		{"shadow", "notice", "Put login in shadow."},
		{"delete", "notice", "Deleted the override of rpm for " + a.storedKey(t, "k1") + "."},
		{"service after delete", "policy", `"rpm";q=10;w=60`},
		{"logged out", "login", true},
		{"open again", "login", true},
		{"open again", "policies", false},
		{"old cookie", "status", float64(401)},
	} {
		if got := steps[c.step][c.field]; got != c.want {
			t.Errorf("%s: %s is %v, want %v", c.step, c.field, got, c.want)
		}
	}
	if got := steps["service after set"]["statuses"]; !jsonEqual(got, []any{200.0, 200.0, 429.0}) {
		t.Errorf("the client's 3 requests under the override's quota of 2: %v, want 200, 200, 429", got)
	}
	if got := steps["service after delete"]["statuses"]; !jsonEqual(got, []any{200.0}) {
		t.Errorf("the client's request once the override is deleted: %v, want 200 (3 of 10 counted)", got)
	}
	if exp, _ := steps["logged in"]["expires"].(float64); exp < float64(time.Now().Add(7*time.Hour).Unix()) || exp > float64(time.Now().Add(9*time.Hour).Unix()) {
		t.Errorf("the session's cookie expires at %v, want in about 8 hours", exp)
	}
	if left, _ := steps["delete"]["overrides"].(string); strings.Contains(left, "rpm") || !strings.Contains(left, "shadow") {
		t.Errorf("after delete, the overrides listed: %q, want login's shadow alone", left)
	}
	ch := steps["changes"]
	if ch["rows"] != float64(3) || !jsonEqual(ch["what"], []any{`override rpm "` + a.storedKey(t, "k1") + `"`, "shadow login", `override rpm "` + a.storedKey(t, "k1") + `"`}) {
		t.Errorf("the page's recent changes: %v, want the delete, the shadow and the set, newest first", ch)
	}
	for _, who := range ch["who"].([]any) {
		if !strings.HasPrefix(who.(string), "session ") {
			t.Errorf("a change made from the page is by %q, want the session's name", who)
		}
	}
	if note, _ := ch["note"].(string); !strings.Contains(note, "What instance ") || !strings.Contains(note, " applies now, at 20") {
		t.Errorf("the page's note %q does not name the instance and the time", note)
	}
	if !strings.Contains(steps["set"]["overrides"].(string), "customer one") {
		t.Errorf("after set, the overrides listed: %q, want k1's labelled", steps["set"]["overrides"])
	}
}

// lookBrowser returns the paths of chromium and node, with puppeteer-core
// installed beside operator.mjs, or skips t saying what is missing
// (fails it under RATELIMIT_REQUIRE_BROWSER=1, as CI runs).
func lookBrowser(t *testing.T) (browser, node string) {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("RATELIMIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s, and RATELIMIT_REQUIRE_BROWSER=1", what)
		}
		t.Skip(what + "; the page is not driven in a browser")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		missing("chromium is not installed (Debian's chromium package)")
	}
	if node, err = exec.LookPath("node"); err != nil {
		missing("node is not installed (Debian's nodejs package)")
	}
	if _, err := os.Stat("testdata/browser/node_modules/puppeteer-core"); err != nil {
		missing("puppeteer-core is not installed: npm ci --prefix admin/testdata/browser")
	}
	return browser, node
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestToken: with Options.Token, an API client bears it (the scheme in
// any case); without it, or with another, the endpoints answer 401; a
// session's cookie lets a browser post the page's forms from the
// handler's own origin only: a cross-site post is refused (403) and
// changes nothing.
func TestToken(t *testing.T) {
	t.Parallel()
	const token = "an admin token of 32 bytes, or so"
	a := newAdminAppWith(t, admin.Options{Token: token})
	do := func(method, path, body string, header map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		a.admin.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct {
		header map[string]string
		status int
	}{
		{nil, 401},
		{map[string]string{"Authorization": "Bearer wrong"}, 401},
		{map[string]string{"Authorization": "Basic " + token}, 401},
		{map[string]string{"Authorization": "Bearer " + token}, 200},
		{map[string]string{"Authorization": "bearer " + token}, 200},
		{map[string]string{"Authorization": "BEARER  " + token}, 200},
	} {
		w := do("GET", "/admin/overrides", "", c.header)
		if w.Code != c.status || c.status == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("GET overrides with %v: %d (WWW-Authenticate %q), want %d", c.header, w.Code, w.Header().Get("WWW-Authenticate"), c.status)
		}
	}
	login := do("POST", "/admin/login", "token="+url.QueryEscape(token), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	cookie := login.Result().Cookies()
	if login.Code != 303 || len(cookie) != 1 || !cookie[0].HttpOnly || cookie[0].SameSite != http.SameSiteStrictMode || cookie[0].Path != "/admin/" {
		t.Fatalf("login: %d, cookies %+v; want 303 and one HttpOnly, SameSite=Strict cookie for /admin/", login.Code, cookie)
	}
	form := "action=set&policy=rpm&key=k1&quota=5"
	for _, c := range []struct {
		site   string
		status int
	}{{"cross-site", 403}, {"same-origin", 303}} {
		w := do("POST", "/admin/", form, map[string]string{"Content-Type": "application/x-www-form-urlencoded",
			"Cookie": cookie[0].Name + "=" + cookie[0].Value, "Sec-Fetch-Site": c.site})
		list, _ := a.plane.List()
		if w.Code != c.status || (c.status == 403) != (len(list) == 0) {
			t.Errorf("a %s post of the set form: %d, %d overrides; want %d and the override set only from the same origin", c.site, w.Code, len(list), c.status)
		}
	}
	for _, bad := range []string{"window_ms=99999999999999999", "quota=-3", "quota=many"} {
		w := do("POST", "/admin/", "action=set&policy=rpm&key=k2&"+bad, map[string]string{"Content-Type": "application/x-www-form-urlencoded",
			"Cookie": cookie[0].Name + "=" + cookie[0].Value})
		if w.Code != 400 || !strings.Contains(w.Body.String(), "want a whole number from 1 to") {
			t.Errorf("the set form with %s: %d, want 400 saying what a number may be", bad, w.Code)
		}
	}
}

// TestBansAndFallbacks: a key a Limiter given the Plane bans is listed
// in health's bans, labelled, until its ban ends (a Shadow limit's
// would-be denials being apart is TestHandler's); a Fallback shared by
// two Limiters is listed once, named by both.
func TestBansAndFallbacks(t *testing.T) {
	t.Parallel()
	a := newAdminApp(t)
	l, err := ratelimit.New(a.store, "banned-"+a.ns, ratelimit.WithKey(a.apiKey), ratelimit.WithOverrides(a.plane),
		ratelimit.WithLimits(ratelimit.PerMinute(1).Using(ratelimit.FixedWindow).Named("strict")),
		ratelimit.WithBan(ratelimit.Ban{After: 1, Within: time.Minute, For: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "k1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	var health struct {
		Fallbacks []struct {
			Limiters []string `json:"limiters"`
		} `json:"fallbacks"`
		Bans []struct {
			Key   string    `json:"key"`
			Label string    `json:"label"`
			Until time.Time `json:"until"`
		} `json:"bans"`
	}
	status, body := a.call(t, "GET", "/admin/health", "")
	if err := json.Unmarshal([]byte(body), &health); status != 200 || err != nil {
		t.Fatalf("GET health: %d %s (%v)", status, body, err)
	}
	if len(health.Bans) != 1 || health.Bans[0].Key != a.storedKey(t, "k1") || health.Bans[0].Label != "customer one" ||
		time.Until(health.Bans[0].Until) < 59*time.Minute || time.Until(health.Bans[0].Until) > time.Hour {
		t.Errorf("bans in force: %+v, want k1's, labelled, for about an hour", health.Bans)
	}
	if len(health.Fallbacks) != 1 || !jsonEqual(health.Fallbacks[0].Limiters, []string{a.ns, "banned-" + a.ns}) {
		t.Errorf("fallbacks: %+v, want the one Fallback, named by both Limiters", health.Fallbacks)
	}
}
