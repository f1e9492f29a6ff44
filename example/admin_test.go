package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

const adminToken = "an admin token of the test, 32 b"

// adminURL waits for a server's line saying where its admin endpoints
// are, and returns their base URL, ".../admin".
func adminURL(t *testing.T, out func() string) string {
	t.Helper()
	re := regexp.MustCompile(`admin: (http://[^ ]+/admin)/ `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(out()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not say where its admin endpoints are:\n%s", out())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// adminCall sends method to the admin endpoint u with body (JSON, or
// none) and the test's token, and returns the status and body.
func adminCall(t *testing.T, method, u, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// generate asks server for POST /v1/generate of tokens as API key k and
// returns the response.
func generate(t *testing.T, server, k string, tokens int) *http.Response {
	t.Helper()
	return send(t, "POST", fmt.Sprintf("%s/v1/generate?tokens=%d&hold_ms=0", server, tokens), map[string]string{"X-API-Key": k}, nil)
}

// TestAdminContract: two servers on one redis-server with one
// -key-secret, each with -admin and -admin-token, as docs/example.md
// shows them. k1 spends its 40,000 tokens a minute and is denied; an
// operator raises k1's gen-tpm to 100,000 on one server; the next
// response on each server says so and is admitted (the time until the
// other server applies it is logged). GET /admin/policies and overrides
// read back; a policy put in shadow denies nothing and its would-be
// denials are listed as the keys denied most; a bad override is a 400
// naming the field; without the token, a 401; the page is served.
func TestAdminContract(t *testing.T) {
	t.Parallel()
	bin := build(t)["net/http"]
	srv := redistest.Require(t)
	args := []string{"-redis", "redis://" + srv.Addr + "/0", "-fallback-budget", steadyBudget, "-key-secret", "a shared secret of the test, 32b",
		"-admin", "127.0.0.1:0", "-admin-token", adminToken}
	a, outA := startWith(t, nil, bin, args...)
	b, _ := startWith(t, nil, bin, args...)
	adminA := adminURL(t, outA)

	for _, tt := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong token of 32 bytes....", http.StatusUnauthorized},
		{"Basic " + adminToken, http.StatusUnauthorized},
		{"bearer " + adminToken, http.StatusOK}, // the scheme is matched without regard to case
		{"BEARER  " + adminToken, http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", adminA+"/policies", nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET policies with Authorization %q: %d, want %d", tt.auth, resp.StatusCode, tt.want)
		}
	}
	// The three refusals: logged once, as the first came, without the
	// client's address. The server's stderr reaches outA in its own time.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(outA(), "refused requests without the token or a session") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(outA(), "refused requests without the token or a session"); n != 1 {
		t.Errorf("the refusals were logged %d times, want once:\n%s", n, outA())
	}
	if strings.Contains(outA(), "refused requests without the token or a session") && strings.Contains(lineWith(outA(), "refused requests without"), "127.0.0.1") {
		t.Errorf("the refusal's log line names the client's address: %s", lineWith(outA(), "refused requests without"))
	}

	if r := generate(t, a, "k1", 40_000); r.StatusCode != 200 {
		t.Fatalf("k1's first generate: %d", r.StatusCode)
	}
	if r := generate(t, a, "k1", 10); r.StatusCode != 429 || !strings.Contains(r.Header.Get("RateLimit"), `"gen-tpm";r=0`) {
		t.Fatalf("k1 past its tokens: %d, RateLimit %q; want 429 by gen-tpm", r.StatusCode, r.Header.Get("RateLimit"))
	}
	if status, body := adminCall(t, "PUT", adminA+"/overrides", `{"policy":"gen-tpm","key":"k1","quota":100000}`); status != 204 {
		t.Fatalf("PUT overrides: %d %s", status, body)
	}
	r := generate(t, a, "k1", 10)
	if r.StatusCode != 200 || !strings.Contains(r.Header.Get("RateLimit-Policy"), `"gen-tpm";q=100000;w=60`) || !strings.Contains(r.Header.Get("RateLimit"), `"gen-tpm";r=59990;`) {
		t.Errorf("k1 on the server that set it: %d, RateLimit-Policy %q, RateLimit %q; want 200 under 100,000, 40,010 counted", r.StatusCode, r.Header.Get("RateLimit-Policy"), r.Header.Get("RateLimit"))
	}
	start := time.Now()
	for {
		r := generate(t, b, "k1", 0)
		if r.StatusCode == 200 && strings.Contains(r.Header.Get("RateLimit-Policy"), `"gen-tpm";q=100000;`) {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the other server did not apply the override in a minute: %d %q", r.StatusCode, r.Header.Get("RateLimit-Policy"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the other server applied the override after %v", time.Since(start).Round(time.Millisecond))

	for _, st := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/policies", "", 200, `{"policy":"gen-tpm","algorithm":"sliding-window","quota":40000,"window_ms":60000,"shadow":false,"overridden":false}`},
		{"GET", "/overrides", "", 200, `[{"policy":"gen-tpm","stored_key":"header:X-Api-Key:`},
		{"GET", "/overrides", "", 200, `"label":"API key k1","quota":100000}]`}, // labelled by the key's end
		{"PUT", "/overrides", `{"policy":"gen-tpm","key":"k1","quota":-7}`, 400, `"error":"Quota is -7`},
		{"PUT", "/overrides", `{"policy":"gen-tpmm","key":"k1","quota":7}`, 400, `gen-tpmm`},
		{"PUT", "/shadow", `{"policy":"home","shadow":true}`, 204, ""},
		{"GET", "/policies", "", 200, `{"policy":"home","algorithm":"sliding-window","quota":10,"window_ms":10000,"shadow":true,"overridden":true}`},
		{"GET", "/", "", 200, "<h2 id=\"overrides\">"},
	} {
		if status, body := adminCall(t, st.method, adminA+st.path, st.body); status != st.status || !strings.Contains(body, st.want) {
			t.Errorf("%s %s %s: %d %s; want %d holding %s", st.method, st.path, st.body, status, body, st.status, st.want)
		}
	}
	// home, 10 per 10 seconds, in shadow: 15 requests all served, 5
	// would-be denials listed.
	for i := range 15 {
		if r := send(t, "GET", a+"/", nil, nil); r.StatusCode != 200 {
			t.Errorf("GET / #%d with home in shadow: %d", i+1, r.StatusCode)
		}
	}
	status, body := adminCall(t, "GET", adminA+"/top?policy=home+(shadow)", "")
	var top []struct {
		Key    string `json:"key"`
		Denied int    `json:"denied"`
	}
	if err := json.Unmarshal([]byte(body), &top); status != 200 || err != nil || len(top) != 1 || top[0].Key != "ip:127.0.0.1" || top[0].Denied != 5 {
		t.Errorf("GET top?policy=home (shadow): %d %s; want ip:127.0.0.1 with 5 would-be denials", status, body)
	}
	if status, body := adminCall(t, "PUT", adminA+"/shadow", `{"policy":"home","shadow":false}`); status != 204 {
		t.Errorf("PUT shadow false: %d %s", status, body)
	}
	if r := send(t, "GET", a+"/", nil, nil); r.StatusCode != 429 {
		t.Errorf("GET / with home enforced again: %d, want 429", r.StatusCode)
	}
	if status, body := adminCall(t, "DELETE", adminA+"/overrides?policy=gen-tpm&key=k1", ""); status != 204 {
		t.Errorf("DELETE overrides: %d %s", status, body)
	}
}

// TestAdminRefusesToListenOpenly: -admin on every interface without a
// token refuses to start, saying what to do; so do a short token and a
// token without -admin.
func TestAdminRefusesToListenOpenly(t *testing.T) {
	t.Parallel()
	bin := build(t)["net/http"]
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-admin", ":0"}, "-admin \":0\" is reachable from other machines: give -admin-token"},
		{[]string{"-admin", "127.0.0.1:0", "-admin-token", "short"}, "-admin-token is 5 bytes long"},
		{[]string{"-admin-token", adminToken}, "-admin-token is given without -admin"},
	} {
		if out := refused(t, nil, bin, tt.args...); !strings.Contains(out, tt.want) {
			t.Errorf("%v: %s; want it to say %q", tt.args, out, tt.want)
		}
	}
}

// TestAdminOnEveryFramework: on Gin and Echo too, an override set
// through the admin endpoints applies to the next request.
func TestAdminOnEveryFramework(t *testing.T) {
	bins := build(t)
	for _, framework := range frameworks {
		t.Run(framework, func(t *testing.T) {
			t.Parallel()
			server, out := startWith(t, nil, bins[framework], "-admin", "127.0.0.1:0", "-admin-token", adminToken, "-key-secret", "a shared secret of the test, 32b")
			adminAt := adminURL(t, out)
			if status, body := adminCall(t, "PUT", adminAt+"/overrides", `{"policy":"gen-rpm","key":"k9","quota":1}`); status != 204 {
				t.Fatalf("PUT overrides: %d %s", status, body)
			}
			for i, want := range []int{200, 429} {
				if r := generate(t, server, "k9", 1); r.StatusCode != want || !strings.Contains(r.Header.Get("RateLimit-Policy"), `"gen-rpm";q=1;`) {
					t.Errorf("request %d: %d, RateLimit-Policy %q; want %d under a quota of 1", i+1, r.StatusCode, r.Header.Get("RateLimit-Policy"), want)
				}
			}
		})
	}
}

// lineWith returns the first line of out that holds s, "" when none.
func lineWith(out, s string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// TestAdminRoundTripWithCurl: the admin API driven with curl from its own
// listings, as an operator does: each entry GET overrides lists, sent
// back unchanged with PUT, leaves the listing as it was; sent as the body
// of a DELETE, it deletes the override (204), and again, finds none
// (404); the listing ends empty.
func TestAdminRoundTripWithCurl(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on PATH: the operators' client this test drives the admin API with")
	}
	bin := build(t)["net/http"]
	srv := redistest.Require(t)
	_, out := startWith(t, nil, bin, "-redis", "redis://"+srv.Addr+"/0", "-key-secret", "a shared secret of the test, 32b",
		"-admin", "127.0.0.1:0", "-admin-token", adminToken)
	admin := adminURL(t, out)
	run := func(args ...string) (int, string) {
		t.Helper()
		args = append([]string{"-s", "-w", "\n%{http_code}", "-H", "Authorization: Bearer " + adminToken}, args...)
		b, err := exec.Command(curl, args...).Output()
		if err != nil {
			t.Fatalf("curl %q: %v", args, err)
		}
		i := strings.LastIndexByte(string(b), '\n') // -w put the status after the body
		status, _ := strconv.Atoi(string(b[i+1:]))
		return status, string(b[:i])
	}
	for _, body := range []string{
		`{"policy":"gen-tpm","key":"k1","quota":100000}`,
		`{"policy":"gen-tpm","key":"k2","unlimited":true}`,
		`{"policy":"home","key":"127.0.0.1","quota":3,"shadow":true}`,
	} {
		if status, out := run("-X", "PUT", "-d", body, admin+"/overrides"); status != 204 {
			t.Fatalf("PUT %s: %d %s", body, status, out)
		}
	}
	status, listed := run(admin + "/overrides")
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(listed), &entries); status != 200 || err != nil || len(entries) != 3 {
		t.Fatalf("GET overrides: %d %s (%v), want 3 entries", status, listed, err)
	}
	for _, e := range entries {
		if status, out := run("-X", "PUT", "-d", string(e), admin+"/overrides"); status != 204 {
			t.Errorf("PUT of the listed %s: %d %s", e, status, out)
		}
	}
	if _, again := run(admin + "/overrides"); again != listed {
		t.Errorf("after each listed entry was sent back, the listing is %s, want %s", again, listed)
	}
	for _, e := range entries {
		if status, out := run("-X", "DELETE", "-d", string(e), admin+"/overrides"); status != 204 {
			t.Errorf("DELETE of the listed %s: %d %s", e, status, out)
		}
		if status, _ := run("-X", "DELETE", "-d", string(e), admin+"/overrides"); status != 404 {
			t.Errorf("DELETE of %s again: %d, want 404", e, status)
		}
	}
	if _, left := run(admin + "/overrides"); strings.TrimSpace(left) != "[]" {
		t.Errorf("after every listed entry was deleted, the listing is %s, want []", left)
	}
}
