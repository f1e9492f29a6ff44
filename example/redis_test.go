package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/example/internal/app"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// refused runs an example server that must refuse to start (exit status
// 2 for a bad command line, 1 for a Redis it cannot use), and returns
// what it wrote.
func refused(t *testing.T, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(testEnv(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("%v: %v, want it to exit with an error; output:\n%s", args, err, out)
	}
	return string(out)
}

// limited checks that server, run with -limit 2, admits a client's first
// two requests to GET / and denies the third.
func limited(t *testing.T, server string) {
	t.Helper()
	for i, want := range []int{200, 200, 429} {
		if got := send(t, "GET", server+"/", nil, nil).StatusCode; got != want {
			t.Fatalf("GET / #%d: got %d, want %d", i, got, want)
		}
	}
}

// TestTLS runs the example on a real redis-server's TLS port, with a
// certificate authority made by the test, given by flag or environment,
// and makes the usual mistakes: each refuses to start with a message
// saying what to change.
func TestTLS(t *testing.T) {
	bin := build(t)["net/http"]
	srv := redistest.RequireTLS(t)
	certOnly := redistest.RequireTLS(t, "--tls-auth-clients", "yes")
	tlsURL, plainURL := "rediss://"+srv.TLSAddr+"/0", "redis://"+srv.Addr+"/0"
	t.Run("the authority by flag", func(t *testing.T) {
		t.Parallel()
		server, out := startWith(t, nil, bin, "-redis", tlsURL, "-redis-ca", srv.CAFile, "-limit", "2", "-window", "1m", "-fallback-budget", steadyBudget)
		limited(t, server)
		if want := "redis: Redis 7."; !strings.Contains(out(), want) || !strings.Contains(out(), "TLS on") {
			t.Errorf("startup lines:\n%s\nwant %q and TLS on", out(), want)
		}
	})
	t.Run("the authority and a client certificate from the environment", func(t *testing.T) {
		t.Parallel()
		env := []string{"REDIS_URL=rediss://" + certOnly.TLSAddr + "/0", "REDIS_CA_FILE=" + certOnly.CAFile, "REDIS_CERT_FILE=" + certOnly.CertFile, "REDIS_KEY_FILE=" + certOnly.KeyFile}
		server, _ := startWith(t, env, bin, "-limit", "2", "-window", "1m", "-fallback-budget", steadyBudget)
		limited(t, server)
	})
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"no authority", nil, []string{"-redis", tlsURL},
			[]string{"signed by an authority the client does not trust", "-redis-ca FILE"}},
		{"plain text to the TLS port", nil, []string{"-redis", "redis://" + srv.TLSAddr + "/0"},
			[]string{"speaks TLS, and the client plain text", "use rediss://"}},
		{"TLS to the plain port", nil, []string{"-redis", "rediss://" + srv.Addr + "/0", "-redis-ca", srv.CAFile},
			[]string{"answered in plain text: it is not a TLS port", "use redis://"}},
		{"no client certificate", []string{"REDIS_CA_FILE=" + certOnly.CAFile}, []string{"-redis", "rediss://" + certOnly.TLSAddr + "/0"},
			[]string{"refused the TLS handshake", "-redis-cert and -redis-key"}},
		{"an authority without TLS", nil, []string{"-redis", plainURL, "-redis-ca", srv.CAFile},
			[]string{"are for TLS: give a rediss:// URL"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := refused(t, tt.env, bin, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output:\n%s\nwant %q", out, w)
				}
			}
		})
	}
}

// TestClusterWithPassword reaches a real 3-master cluster whose nodes
// require a password, from the example's flags: a URL with the password
// URL-encoded and the other seeds as addr parameters.
func TestClusterWithPassword(t *testing.T) {
	bin := build(t)["net/http"]
	c := redistest.RequireCluster(t, 3)
	const password = "clu/ster#pw"
	for _, m := range c.Masters {
		admin := redis.NewClient(&redis.Options{Addr: m.Addr})
		err := admin.ConfigSet(context.Background(), "requirepass", password).Err()
		admin.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	addrs := c.Addrs()
	u := "redis://:" + url.QueryEscape(password) + "@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	server, out := startWith(t, nil, bin, "-redis-cluster", u, "-limit", "2", "-window", "1m", "-fallback-budget", steadyBudget)
	limited(t, server)
	if want := "Redis Cluster of 3 masters"; !strings.Contains(out(), want) {
		t.Errorf("startup lines:\n%s\nwant %q", out(), want)
	}
	if strings.Contains(out(), "clu/ster") {
		t.Errorf("the password was printed:\n%s", out())
	}
	// Without the password: NOAUTH, said at startup.
	got := refused(t, nil, bin, "-redis-cluster", strings.Join(addrs, ","))
	if want := "Redis requires a password and the client gave none"; !strings.Contains(got, want) {
		t.Errorf("without the password:\n%s\nwant %q", got, want)
	}
}

// TestSentinel names a master behind real Sentinels from the example's
// flags.
func TestSentinel(t *testing.T) {
	bin := build(t)["net/http"]
	s := redistest.RequireSentinel(t)
	addrs := s.SentinelAddrs()
	u := "redis://" + addrs[0] + "/0?addr=" + addrs[1] + "&addr=" + addrs[2] + "&master_name=" + s.MasterName
	server, out := startWith(t, nil, bin, "-redis-sentinel", u, "-limit", "2", "-window", "1m", "-fallback-budget", steadyBudget)
	limited(t, server)
	if want := "master " + s.MasterName + " through Sentinel at " + strings.Join(addrs, ","); !strings.Contains(out(), want) {
		t.Errorf("startup lines:\n%s\nwant %q", out(), want)
	}
}

// TestStartsWhileRedisIsDown: a Redis that does not answer at startup
// is an outage, not a misconfiguration; the example starts, says so, and
// limits in process.
func TestStartsWhileRedisIsDown(t *testing.T) {
	bin := build(t)["net/http"]
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing answers there now
	server, out := startWith(t, nil, bin, "-redis", "redis://"+addr+"/0", "-limit", "2", "-window", "1m")
	limited(t, server)
	_, port, _ := net.SplitHostPort(addr)
	for _, want := range []string{
		"does not answer now (ratelimit: redis: Redis cannot decide now (connection refused)",
		"decisions are made in process until it does: start one with: redis-server --port " + port + ", or leave -redis (and $REDIS_URL) out to use the embedded Redis",
	} {
		if !strings.Contains(out(), want) {
			t.Errorf("startup lines:\n%s\nwant %q", out(), want)
		}
	}
}

// TestFlagsWinOverEnvironment: a flag naming a server wins over
// $REDIS_URL, even when $REDIS_URL names nothing that answers.
func TestFlagsWinOverEnvironment(t *testing.T) {
	bin := build(t)["net/http"]
	c := redistest.RequireCluster(t, 3)
	env := []string{"REDIS_URL=redis://127.0.0.1:1/0"}
	server, out := startWith(t, env, bin, "-redis-cluster", strings.Join(c.Addrs(), ","), "-limit", "2", "-window", "1m", "-fallback-budget", steadyBudget)
	limited(t, server)
	if !strings.Contains(out(), "Redis Cluster of 3 masters") {
		t.Errorf("startup lines:\n%s\nwant the cluster", out())
	}
}

// TestSecretsStayOut feeds a password and an API key through every error
// path the example can meet: URLs that do not parse, a rejected password,
// and at run time a command taken from the ACL user, its password
// rotated and Redis killed, while requests carry the API key. No line
// the example writes holds either.
func TestSecretsStayOut(t *testing.T) {
	bin := build(t)["net/http"]
	const (
		password = "QZXpw1/QZXpw2#QZXpw3@QZXpw4%"
		apiKey   = "QZXapikey-0123456789"
	)
	srv := redistest.Require(t)
	setUser := func(pw, rule string) {
		t.Helper()
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer admin.Close()
		var args []any
		for _, f := range strings.Fields("ACL SETUSER limiter reset on >" + pw + " " + rule) {
			args = append(args, f)
		}
		if err := admin.Do(context.Background(), args...).Err(); err != nil {
			t.Fatal(err)
		}
		admin.Do(context.Background(), "CLIENT", "KILL", "USER", "limiter")
	}
	rule := store.ACLRule("example:")
	setUser(password, rule)
	encoded := url.QueryEscape(password)
	var outputs []string
	for _, args := range [][]string{
		{"-redis", "redis://limiter:" + password + "@" + srv.Addr + "/0"},
		{"-redis", "redis://limiter:" + encoded + "@" + srv.Addr + "/0?bad_option=1"},
		{"-redis", "redis://limiter:" + encoded + "x@" + srv.Addr + "/0"},
		{"-redis-cluster", "redis://limiter:" + password + "@" + srv.Addr},
		{"-redis-cluster", "limiter:" + password + "@" + srv.Addr},
		{"-redis-sentinel", "redis://limiter:" + password + "@" + srv.Addr + "?master_name=m&password=" + encoded},
		{"-redis-sentinel", "redis://127.0.0.1:1?master_name=m&password=" + encoded + "&bad_option=1"},
	} {
		outputs = append(outputs, refused(t, nil, bin, args...))
	}
	if !strings.Contains(strings.Join(outputs, ""), "rejected the client's username or password") {
		t.Errorf("the wrong password was not reported:\n%s", strings.Join(outputs, "\n"))
	}

	server, out := startWith(t, nil, bin, "-redis", "redis://limiter:"+encoded+"@"+srv.Addr+"/0")
	api := func(n int) {
		for range n {
			send(t, "GET", server+"/api/x", map[string]string{"X-API-Key": apiKey}, nil)
			time.Sleep(5 * time.Millisecond)
		}
	}
	api(5)
	srv.Pause() // an outage: the fallback's WARN names the key that failed
	api(20)
	srv.Resume()
	waitLog(t, out, "Redis answers again", 1)
	setUser(password, strings.Replace(rule, " +hgetall", "", 1)) // a command the API's sliding window needs
	api(20)
	waitLog(t, out, "may not run hgetall", 1)
	setUser(password, rule)
	waitLog(t, out, "Redis answers again", 2)
	setUser("QZXrotated", rule)
	api(20)
	waitLog(t, out, "rejected the client's username or password", 1)
	srv.Kill()
	api(20)
	outputs = append(outputs, out())
	all := strings.Join(outputs, "\n")
	for _, want := range []string{"ERROR", "WARN", "key #"} {
		if !strings.Contains(all, want) {
			t.Errorf("want %q in the output, which shows that errors went through:\n%s", want, all)
		}
	}
	if strings.Contains(all, "QZX") || strings.Contains(all, encoded) {
		t.Errorf("a password or the API key was printed:\n%s", all)
	}
	t.Logf("what the example wrote:\n%s", all)
}

// waitLog waits until out holds want n times.
func waitLog(t *testing.T, out func() string, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q not %d times in the output within 10s:\n%s", want, n, out())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAPIKeySecret runs two example servers on one real Redis, one given
// the secret by -key-secret and the other by $RATELIMIT_KEY_SECRET, and
// sends them a distinctive X-API-Key: no key in Redis holds the raw API
// key, both servers count it in the same keys, named by its HMAC under the
// secret, and its requests are still limited. A secret too short is
// refused, and without one the startup lines say that API-key limits are
// each server's own.
func TestAPIKeySecret(t *testing.T) {
	bin := build(t)["net/http"]
	srv := redistest.Require(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	const (
		secret = "QZXsecret-0123456789abcdef"
		apiKey = "QZXapikey-raw-4f2a9c"
	)
	redisURL := "redis://" + srv.Addr + "/0"
	byFlag, outFlag := startWith(t, nil, bin, "-redis", redisURL, "-key-secret", secret, "-fallback-budget", steadyBudget)
	byEnv, outEnv := startWith(t, []string{"RATELIMIT_KEY_SECRET=" + secret}, bin, "-redis", redisURL, "-fallback-budget", steadyBudget)
	for _, lines := range []func() string{outFlag, outEnv} {
		waitLog(t, lines, "per X-API-Key", 1) // the last startup line
		out := lines()
		if strings.Contains(out, "random secret") {
			t.Errorf("startup lines with a secret:\n%s\nsay it is random", out)
		}
		if strings.Contains(out, "QZX") {
			t.Errorf("the secret was printed:\n%s", out)
		}
	}

	// The token bucket holds 10 and refills 10 per second: the first 10
	// quick requests pass, and a 429 comes soon after.
	header := map[string]string{"X-API-Key": apiKey}
	codes := map[int]int{}
	for i := 0; codes[429] == 0; i++ {
		code := send(t, "GET", byFlag+"/api/things", header, nil).StatusCode
		if i < 10 && code != 200 {
			t.Fatalf("GET /api/ #%d: got %d, want 200", i, code)
		}
		if code != 200 && code != 429 {
			t.Fatalf("GET /api/ #%d: got %d, want 200 or 429", i, code)
		}
		codes[code]++
		if i == 40 {
			t.Fatalf("41 quick API requests: %v, want a 429 after the first 10", codes)
		}
	}
	before := scanAll(t, client)
	if code := send(t, "GET", byEnv+"/api/things", header, nil).StatusCode; code != 200 && code != 429 {
		t.Fatalf("GET /api/ on the second server: got %d, want 200 or 429", code)
	}
	after := scanAll(t, client)

	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(apiKey))
	prefix := "example:{api|*|header:X-Api-Key:" + hex.EncodeToString(mac.Sum(nil)[:16]) + "}:"
	var api []string
	for _, k := range after {
		if strings.Contains(k, "QZX") {
			t.Errorf("Redis key %q holds the raw API key or the secret", k)
		}
		if strings.HasPrefix(k, "example:{api|") {
			api = append(api, k)
			if !strings.HasPrefix(k, prefix) {
				t.Errorf("Redis key %q, want one beginning %q", k, prefix)
			}
		}
	}
	if len(api) != len(app.APILimits) {
		t.Errorf("Redis holds API keys %q, want one for each of the %d limits", api, len(app.APILimits))
	}
	if strings.Join(before, " ") != strings.Join(after, " ") {
		t.Errorf("Redis keys after the first server %q, after the second %q; want the same: one secret, one count", before, after)
	}

	t.Run("too short", func(t *testing.T) {
		out := refused(t, nil, bin, "-key-secret", "QZXshort")
		if !strings.Contains(out, "-key-secret") || !strings.Contains(out, "at least 16") {
			t.Errorf("output:\n%s\nwant -key-secret and at least 16", out)
		}
		if strings.Contains(out, "QZX") {
			t.Errorf("the secret was printed:\n%s", out)
		}
	})
	t.Run("none", func(t *testing.T) {
		_, out := startWith(t, nil, bin)
		waitLog(t, out, "API keys: hashed with a random secret, so their limits are this server's own", 1)
	})
}

// scanAll returns every key of client, sorted, read with SCAN.
func scanAll(t *testing.T, client *redis.Client) []string {
	t.Helper()
	var all []string
	iter := client.Scan(context.Background(), 0, "*", 100).Iterator()
	for iter.Next(context.Background()) {
		all = append(all, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	return all
}
