package main

import (
	"context"
	"errors"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/store"
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
		server, out := startWith(t, nil, bin, "-redis", tlsURL, "-redis-ca", srv.CAFile, "-limit", "2", "-window", "1m")
		limited(t, server)
		if want := "redis: Redis 7."; !strings.Contains(out(), want) || !strings.Contains(out(), "TLS on") {
			t.Errorf("startup lines:\n%s\nwant %q and TLS on", out(), want)
		}
	})
	t.Run("the authority and a client certificate from the environment", func(t *testing.T) {
		t.Parallel()
		env := []string{"REDIS_URL=rediss://" + certOnly.TLSAddr + "/0", "REDIS_CA_FILE=" + certOnly.CAFile, "REDIS_CERT_FILE=" + certOnly.CertFile, "REDIS_KEY_FILE=" + certOnly.KeyFile}
		server, _ := startWith(t, env, bin, "-limit", "2", "-window", "1m")
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
	server, out := startWith(t, nil, bin, "-redis-cluster", u, "-limit", "2", "-window", "1m")
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
	server, out := startWith(t, nil, bin, "-redis-sentinel", u, "-limit", "2", "-window", "1m")
	limited(t, server)
	if want := "master " + s.MasterName + " through Sentinel at " + strings.Join(addrs, ","); !strings.Contains(out(), want) {
		t.Errorf("startup lines:\n%s\nwant %q", out(), want)
	}
}

// TestFlagsWinOverEnvironment: a flag naming a server wins over
// $REDIS_URL, even when $REDIS_URL names nothing that answers.
func TestFlagsWinOverEnvironment(t *testing.T) {
	bin := build(t)["net/http"]
	c := redistest.RequireCluster(t, 3)
	env := []string{"REDIS_URL=redis://127.0.0.1:1/0"}
	server, out := startWith(t, env, bin, "-redis-cluster", strings.Join(c.Addrs(), ","), "-limit", "2", "-window", "1m")
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
