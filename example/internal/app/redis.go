package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/store"
)

// Redis is where the example keeps its limits: at most one of URL,
// Cluster and Sentinel is set; none means an embedded Redis.
type Redis struct {
	// URL is one server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS.
	URL string
	// Cluster is a Redis Cluster: a URL as go-redis's ParseClusterURL
	// reads it (redis[s]://[user:password@]host:port?addr=host:port&...),
	// or seed addresses host:port,host:port,...
	Cluster string
	// Sentinel is a master watched by Sentinels, as go-redis's
	// ParseFailoverURL reads it:
	// redis[s]://[sentinel-user:sentinel-password@]host:port/db?addr=host:port&master_name=NAME&username=U&password=P
	Sentinel string
	// CAFile is a PEM file of the certificate authorities to trust for
	// TLS, in place of the system's; CertFile and KeyFile a client
	// certificate and its key, for servers that ask for one.
	CAFile, CertFile, KeyFile string
}

// redisFlags are the command line's names of Redis's fields, and the
// environment variables read when no flag names a server.
var redisFlags = []struct{ flag, env, usage string }{
	{"redis", "REDIS_URL", "one Redis server: redis://[user:password@]host:port/db, or rediss:// for TLS"},
	{"redis-cluster", "REDIS_CLUSTER_URL", "a Redis Cluster: redis[s]://[user:password@]host:port?addr=host2:port2&addr=..., or host:port,host:port,..."},
	{"redis-sentinel", "REDIS_SENTINEL_URL", "a Redis master behind Sentinel: redis[s]://[sentinel-user:sentinel-password@]sentinel:26379/db?addr=sentinel2:26379&master_name=NAME[&username=USER&password=PASSWORD]"},
}

// redisUsage is what -h says of Redis beyond each flag.
const redisUsage = `
Redis: give at most one of -redis, -redis-cluster and -redis-sentinel;
without any, $REDIS_URL, $REDIS_CLUSTER_URL or $REDIS_SENTINEL_URL is
read (a flag wins over them), and with none of them an embedded Redis is
used. A password holding any of : / ? # [ ] @ % or a space must be
URL-encoded (with url.QueryEscape, or percent signs by hand: p@ss is
p%40ss). rediss:// turns TLS on; -redis-ca (or $REDIS_CA_FILE) gives the
certificate authority of a private server certificate, and -redis-cert
with -redis-key (or $REDIS_CERT_FILE, $REDIS_KEY_FILE) a client
certificate. At startup the example checks that this Redis lets the
limiter do everything it needs, and exits saying what to fix if not.
`

// pickServer applies the environment to r when no flag named a server.
func (r *Redis) pickServer(given map[string]bool, getenv func(string) string) error {
	fields := []*string{&r.URL, &r.Cluster, &r.Sentinel}
	var flags, envs []string
	for _, f := range redisFlags {
		if given[f.flag] {
			flags = append(flags, "-"+f.flag)
		}
	}
	if len(flags) > 1 {
		return fmt.Errorf("give one of %s, not %s", "-redis, -redis-cluster and -redis-sentinel", strings.Join(flags, " and "))
	}
	if len(flags) == 1 {
		return nil // the command line wins over the environment
	}
	for i, f := range redisFlags {
		if v := getenv(f.env); v != "" {
			*fields[i] = v
			envs = append(envs, "$"+f.env)
		}
	}
	if len(envs) > 1 {
		return fmt.Errorf("%s are both set: keep one, or name the server with -redis, -redis-cluster or -redis-sentinel", strings.Join(envs, " and "))
	}
	return nil
}

// checkSchemes refuses a -redis or -redis-sentinel value without a
// scheme, such as 127.0.0.1:6379, saying how to write it; given holds the
// flags on the command line, which name the value's source (or else its
// environment variable). A value with an '@' may hold a password: it is
// not shown.
func (r *Redis) checkSchemes(given map[string]bool) error {
	for _, f := range []struct {
		flag, env, value, form string
	}{
		{"-redis", "$REDIS_URL", r.URL, "redis://[user:password@]host:port/db"},
		{"-redis-sentinel", "$REDIS_SENTINEL_URL", r.Sentinel, "redis://sentinel:26379/db?master_name=NAME"},
	} {
		if f.value == "" || strings.Contains(f.value, "://") {
			continue
		}
		source := f.flag
		if !given[strings.TrimPrefix(f.flag, "-")] {
			source = f.env
		}
		if strings.Contains(f.value, "@") {
			return fmt.Errorf("%s: not a URL: it has no scheme (the value is not shown, as it may hold a password); write %s, or rediss:// for TLS", source, f.form)
		}
		return fmt.Errorf("%s %s: not a URL: it has no scheme; write redis://%s (or rediss://%s for TLS)", source, f.value, f.value, f.value)
	}
	return nil
}

// check reports mistakes that need no server to find.
func (r *Redis) check() error {
	if (r.CertFile == "") != (r.KeyFile == "") {
		return errors.New("-redis-cert and -redis-key go together: give both, or neither")
	}
	if r.CAFile != "" || r.CertFile != "" {
		for _, u := range []string{r.URL, r.Cluster, r.Sentinel} {
			if strings.HasPrefix(u, "rediss://") {
				return nil
			}
		}
		return errors.New("-redis-ca, -redis-cert and -redis-key are for TLS: give a rediss:// URL")
	}
	return nil
}

// tlsConfig applies the CA and client certificate files to c, the TLS
// configuration a rediss:// URL turned on.
func (r *Redis) tlsConfig(c *tls.Config) error {
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return fmt.Errorf("-redis-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-redis-ca %s: no PEM certificate in the file", r.CAFile)
		}
	}
	if r.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
		if err != nil {
			return fmt.Errorf("-redis-cert, -redis-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// connection is a client of the configured Redis and what the startup
// line says of it.
type connection struct {
	client    redis.UniversalClient
	flag      string // the flag that names the server, for errors
	where     string // the server without its password
	kind      string // "", "Redis Cluster" or "Sentinel"
	tls       bool
	user      string
	db        int
	sentinels []string
}

// dial makes a client of the configured server; it talks to it only when
// used.
func (r *Redis) dial() (*connection, error) {
	redis.SetLogger(debugLog{})
	switch {
	case r.Cluster != "":
		return r.dialCluster()
	case r.Sentinel != "":
		return r.dialSentinel()
	}
	o, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, urlError("-redis", r.URL, err)
	}
	if o.TLSConfig != nil {
		if err := r.tlsConfig(o.TLSConfig); err != nil {
			return nil, err
		}
	}
	o.ContextTimeoutEnabled = true // lets the fallback's time budget cut slow calls short
	return &connection{client: redis.NewClient(o), flag: "-redis", where: o.Addr, tls: o.TLSConfig != nil, user: o.Username, db: o.DB}, nil
}

func (r *Redis) dialCluster() (*connection, error) {
	var o *redis.ClusterOptions
	if strings.Contains(r.Cluster, "://") {
		var err error
		if o, err = redis.ParseClusterURL(r.Cluster); err != nil {
			return nil, urlError("-redis-cluster", r.Cluster, err)
		}
		if strings.Contains(o.Addrs[0], ",") {
			return nil, errors.New("-redis-cluster: a URL names more seeds with ?addr=host:port&addr=host:port, not with commas")
		}
	} else {
		if strings.Contains(r.Cluster, "@") {
			return nil, errors.New("-redis-cluster: seed addresses are host:port,host:port,...; give a user or password in a URL: redis://user:password@host:port?addr=host2:port2")
		}
		o = &redis.ClusterOptions{Addrs: strings.Split(r.Cluster, ",")}
	}
	if o.TLSConfig != nil {
		if err := r.tlsConfig(o.TLSConfig); err != nil {
			return nil, err
		}
	}
	o.ContextTimeoutEnabled = true
	return &connection{client: redis.NewClusterClient(o), flag: "-redis-cluster", where: strings.Join(o.Addrs, ","), kind: "Redis Cluster", tls: o.TLSConfig != nil, user: o.Username}, nil
}

func (r *Redis) dialSentinel() (*connection, error) {
	o, err := redis.ParseFailoverURL(r.Sentinel)
	if err != nil {
		return nil, urlError("-redis-sentinel", r.Sentinel, err)
	}
	if o.MasterName == "" {
		return nil, errors.New("-redis-sentinel: the URL names no master: add ?master_name=NAME")
	}
	if o.TLSConfig != nil {
		if err := r.tlsConfig(o.TLSConfig); err != nil {
			return nil, err
		}
	}
	o.ContextTimeoutEnabled = true
	return &connection{client: redis.NewFailoverClient(o), flag: "-redis-sentinel", where: "master " + o.MasterName, kind: "Sentinel",
		tls: o.TLSConfig != nil, user: o.Username, db: o.DB, sentinels: o.SentinelAddrs}, nil
}

// urlError is a URL's parse error, without the URL's password: the URL
// is shown with its password masked when it parses cleanly, and the
// reason left out when an '@' outside its user:password part says that a
// password was not URL-encoded and may have been cut anywhere, since the
// reason could then quote part of it.
func urlError(flag, raw string, err error) error {
	const hint = "a password holding any of : / ? # [ ] @ % or a space must be URL-encoded"
	u, parseErr := url.Parse(raw)
	ats := 0
	if parseErr == nil && u.User != nil {
		ats = 1
	}
	switch {
	case strings.Count(raw, "@") > ats:
		return fmt.Errorf("%s: not a valid URL; the reason is not shown, as it could quote a password: %s", flag, hint)
	case parseErr != nil:
		return fmt.Errorf("%s: not a valid URL: %v; %s", flag, errors.Unwrap(parseErr), hint)
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return fmt.Errorf("%s %s: %v", flag, u.Redacted(), err)
}

// describe says what c is, from the server's INFO where it may be read:
// its kind and version, TLS, cluster or Sentinel, the user; never the
// password.
func (c *connection) describe(ctx context.Context) string {
	server := "Redis"
	if info, err := c.client.Info(ctx, "server").Result(); err == nil {
		fields := map[string]string{}
		for _, line := range strings.Split(info, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				fields[k] = v
			}
		}
		switch {
		case fields["valkey_version"] != "":
			server = "Valkey " + fields["valkey_version"]
		case fields["redis_version"] != "":
			server += " " + fields["redis_version"]
		}
	} else {
		server += " (version unknown: INFO is not permitted)"
	}
	var b strings.Builder
	switch c.kind {
	case "Redis Cluster":
		masters := 0
		if cc, ok := c.client.(*redis.ClusterClient); ok {
			_ = cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters++; return nil })
		}
		fmt.Fprintf(&b, "Redis Cluster of %d masters on %s, seeds %s", masters, server, c.where)
	case "Sentinel":
		fmt.Fprintf(&b, "%s, %s through Sentinel at %s, db %d", server, c.where, strings.Join(c.sentinels, ","), c.db)
	default:
		fmt.Fprintf(&b, "%s at %s, db %d", server, c.where, c.db)
	}
	b.WriteString(", TLS ")
	if c.tls {
		b.WriteString("on")
	} else {
		b.WriteString("off")
	}
	user := c.user
	if user == "" {
		user = "default"
	}
	fmt.Fprintf(&b, ", user %s", user)
	return b.String()
}

// checkError is what the startup check found, with the example's own
// way to fix what the library's message says in client options.
func (c *connection) checkError(err error) error {
	misconfigured := errors.Is(err, store.ErrMisconfigured)
	if misconfigured && strings.Contains(err.Error(), "tls.Config.RootCAs") {
		err = fmt.Errorf("%w\n(give the certificate authority with -redis-ca FILE or $REDIS_CA_FILE)", err)
	}
	if misconfigured && strings.Contains(err.Error(), "tls.Config.Certificates") {
		err = fmt.Errorf("%w\n(give a client certificate with -redis-cert and -redis-key)", err)
	}
	return fmt.Errorf("%s %s: %w", c.flag, c.where, err)
}

// advice says what to do about a Redis the startup check could not
// reach: start one, or leave the flag out for the embedded one.
func (c *connection) advice() string {
	fix := "check that it runs and that this machine can reach it"
	if host, port, err := net.SplitHostPort(c.where); err == nil && c.kind == "" && isLoopback(host) {
		fix = "start one with: redis-server --port " + port
	}
	leave := c.flag
	for _, f := range redisFlags {
		if "-"+f.flag == c.flag {
			leave += " (and $" + f.env + ")"
		}
	}
	return fix + ", or leave " + leave + " out to use the embedded Redis"
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// debugLog is go-redis's log, which reports each failed dial, at slog's
// DEBUG level: the startup check and the Fallback say what went wrong.
type debugLog struct{}

func (debugLog) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, fmt.Sprintf(format, v...))
}
