// Package app is what the example servers (net/http, Gin, Echo) share:
// their flags, their Redis, their limiters and their handlers. Each server
// only wires these into its router.
package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/admin"
	"github.com/ratelimit-go/ratelimit/extra/ratelimitprom"
	"github.com/ratelimit-go/ratelimit/store"
)

// Config is the command line.
type Config struct {
	Addr           string
	Redis          Redis
	Algorithm      ratelimit.Algorithm
	Limit          int
	Window         time.Duration
	Burst          int
	TrustedProxies []string
	// KeySecret is the secret API keys are hashed with before they reach
	// Redis; empty: a random one, so API-key limits are per server.
	KeySecret string
	// FallbackBudget is how long a decision waits for a configured Redis
	// before it is made in process.
	FallbackBudget time.Duration
	// Admin is the address of the operators' listener; empty: none.
	// AdminToken is the token its requests must bear; empty: none, which
	// only a loopback Admin allows.
	Admin, AdminToken string
	// GRPC is the address of a gRPC listener serving GenerateMethod under
	// the limits of POST /v1/generate; empty: none.
	GRPC string
}

// ParseFlags reads the command line of the example server program on
// framework ("net/http", "Gin", "Echo"); getenv reads the environment
// (os.Getenv), which names Redis when no flag does.
func ParseFlags(program, framework string, args []string, getenv func(string) string) (Config, error) {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	var c Config
	var algorithm, proxies string
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	servers := []*string{&c.Redis.URL, &c.Redis.Cluster, &c.Redis.Sentinel}
	for i, f := range redisFlags {
		fs.StringVar(servers[i], f.flag, "", f.usage+" (default $"+f.env+")")
	}
	fs.StringVar(&c.Redis.CAFile, "redis-ca", getenv("REDIS_CA_FILE"), "PEM file of the certificate authorities that sign Redis's TLS certificate (default $REDIS_CA_FILE; empty: the system's)")
	fs.StringVar(&c.Redis.CertFile, "redis-cert", getenv("REDIS_CERT_FILE"), "PEM file of a TLS client certificate, for a Redis that asks for one (default $REDIS_CERT_FILE)")
	fs.StringVar(&c.Redis.KeyFile, "redis-key", getenv("REDIS_KEY_FILE"), "PEM file of the key of -redis-cert (default $REDIS_KEY_FILE)")
	fs.StringVar(&algorithm, "algorithm", "sliding-window", "algorithm of GET /: fixed-window, sliding-log, sliding-window or token-bucket")
	fs.IntVar(&c.Limit, "limit", 10, "requests per window for GET /")
	fs.DurationVar(&c.Window, "window", 10*time.Second, "window of GET /")
	fs.IntVar(&c.Burst, "burst", 0, "token bucket burst for GET / (0: the limit)")
	fs.DurationVar(&c.FallbackBudget, "fallback-budget", 50*time.Millisecond, "how long a decision waits for a configured Redis before it is made in process")
	fs.StringVar(&proxies, "trusted-proxies", "", "CIDRs of proxies whose X-Forwarded-For is believed, comma-separated")
	fs.StringVar(&c.KeySecret, "key-secret", getenv("RATELIMIT_KEY_SECRET"), "secret, at least 16 bytes and the same on every server, that API keys are hashed with before they reach Redis (default $RATELIMIT_KEY_SECRET; empty: a random one, so API-key limits are per server)")
	fs.StringVar(&c.GRPC, "grpc", "", "address of a gRPC listener serving "+GenerateMethod+", the twin of POST /v1/generate under its limits (empty: none)")
	fs.StringVar(&c.Admin, "admin", "", "address of a listener of its own serving the operators' endpoints under /admin/: overrides of the limits, shadow, the keys denied most (empty: none)")
	fs.StringVar(&c.AdminToken, "admin-token", getenv("RATELIMIT_ADMIN_TOKEN"), "token, at least 16 bytes, that every request to -admin must bear as \"Authorization: Bearer TOKEN\" (default $RATELIMIT_ADMIN_TOKEN; empty: none, and -admin must then be a loopback address)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\n%s serves a small HTTP API on %s, limited by ratelimit; without -redis it embeds a Redis.\n\nFlags:\n", program, program, framework)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), redisUsage)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if c.Algorithm, err = parseAlgorithm(algorithm); err != nil {
		return Config{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := c.Redis.pickServer(given, getenv); err != nil {
		return Config{}, err
	}
	if err := c.Redis.checkSchemes(given); err != nil {
		return Config{}, err
	}
	if err := c.Redis.check(); err != nil {
		return Config{}, err
	}
	if proxies != "" {
		c.TrustedProxies = strings.Split(proxies, ",")
	}
	if err := checkAdmin(c); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseAlgorithm returns the algorithm named s.
func parseAlgorithm(s string) (ratelimit.Algorithm, error) {
	for _, a := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket} {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("-algorithm: unknown algorithm %q (want fixed-window, sliding-log, sliding-window or token-bucket)", s)
}

// App holds the limiters and what they need.
type App struct {
	Config Config
	// IP limits GET / by client IP, as configured.
	IP *ratelimit.Limiter
	// Logins limits the failed attempts of POST /login by client IP: 5 per
	// minute.
	Logins *ratelimit.Limiter
	// API limits GET /api/ by X-API-Key, by plan: keys beginning "pro-"
	// get ProLimits, others APILimits.
	API *ratelimit.Limiter
	// Gen limits POST /v1/generate by X-API-Key, with GenLimits.
	Gen *ratelimit.Limiter
	// Metrics counts the three Limiters' decisions and watches the
	// Fallback, if any; MetricsHandler serves them.
	Metrics *ratelimitprom.Metrics
	// Plane holds the overrides of every Limiter's limits in Redis, which
	// operators change through AdminHandler, and counts the keys denied.
	Plane *admin.Plane

	registry  *prometheus.Registry
	redis     *store.Redis // the store in the Fallback, and the Plane's
	ipKey     ratelimit.KeyFunc
	apiKey    ratelimit.KeyFunc
	labels    labels // of the API keys seen, for the operators' page
	redisDesc string
	mini      *miniredis.Miniredis // the embedded Redis; nil with a Redis named
	closers   []func() error
}

// Limits of the example's routes.
var (
	LoginLimit = ratelimit.PerMinute(5).Using(ratelimit.SlidingLog).Named("login")
	// LoginBan bans a client that keeps trying once its failed logins are
	// spent: 3 denials within a minute ban it for a minute, then 2, 4, ...
	// up to an hour.
	LoginBan  = ratelimit.Ban{After: 3, Within: time.Minute, For: time.Minute, Max: time.Hour}
	APILimits = []ratelimit.Limit{
		ratelimit.PerSecond(10).Using(ratelimit.TokenBucket).Named("api-second"),
		ratelimit.Limit{Quota: 1000, Window: time.Hour}.Named("api-hour"),
	}
	ProLimits = []ratelimit.Limit{
		ratelimit.PerSecond(100).Using(ratelimit.TokenBucket).Named("pro-second"),
		ratelimit.Limit{Quota: 10_000, Window: time.Hour}.Named("pro-hour"),
	}
)

// Plan returns the limits of GET /api/ for r's API key: ProLimits for keys
// beginning "pro-", APILimits for the others. It reads the key over HTTP
// and gRPC alike.
func Plan(r ratelimit.Request) []ratelimit.Limit {
	if strings.HasPrefix(apiKeyOf(r), "pro-") {
		return ProLimits
	}
	return APILimits
}

// apiKeyOf returns the API key r sends: its header X-API-Key, or a gRPC
// call's metadata "x-api-key".
func apiKeyOf(r ratelimit.Request) string {
	var v []string
	switch r := r.(type) {
	case *http.Request:
		v = r.Header.Values("X-API-Key")
	case interface{ Header(string) []string }:
		v = r.Header("X-API-Key")
	}
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// New connects to Redis, or embeds one, and builds the limiters.
func New(c Config) (*App, error) {
	a := &App{Config: c, Metrics: ratelimitprom.New(), registry: prometheus.NewRegistry()}
	a.registry.MustRegister(a.Metrics)
	s, err := a.store(c.Redis)
	if err != nil {
		a.Close()
		return nil, err
	}
	key, err := ratelimit.IPKey{TrustedProxies: c.TrustedProxies}.KeyFunc()
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("-trusted-proxies: %w", err)
	}
	if a.Plane, err = admin.New(a.redis, "example", a.adminOptions()); err != nil {
		a.Close()
		return nil, err
	}
	a.closers = append(a.closers, a.Plane.Close)
	home := ratelimit.Limit{Algorithm: c.Algorithm, Quota: c.Limit, Window: c.Window, Burst: c.Burst, Name: "home"}
	observe := ratelimit.WithObserver(func(r ratelimit.Request, e ratelimit.Event) {
		a.Metrics.Observe(r, e)
		a.logChange(r, e)
	})
	overrides := ratelimit.WithOverrides(a.Plane)
	a.ipKey = key
	if a.IP, err = ratelimit.New(s, "ip", ratelimit.WithKey(key), ratelimit.WithLimits(home), observe, overrides); err != nil {
		a.Close()
		return nil, fmt.Errorf("GET / (-algorithm, -limit, -window, -burst): %w", err)
	}
	if a.Logins, err = ratelimit.New(s, "login", ratelimit.WithKey(key), ratelimit.WithLimits(LoginLimit),
		ratelimit.WithCountOnly(nil), // failed logins only
		ratelimit.WithBan(LoginBan),
		observe, overrides,
	); err != nil {
		a.Close()
		return nil, err
	}
	secret := []byte(c.KeySecret)
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	apiKey, err := ratelimit.HeaderKey("X-API-Key", secret)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("-key-secret: %w", err)
	}
	a.apiKey = apiKey
	apiKey = a.labels.labelling(apiKey)
	if a.API, err = ratelimit.New(s, "api",
		ratelimit.WithKey(apiKey),
		ratelimit.WithLimitsFunc(Plan),
		observe, overrides,
	); err != nil {
		a.Close()
		return nil, err
	}
	if a.Gen, err = ratelimit.New(s, "gen", ratelimit.WithKey(apiKey), ratelimit.WithLimits(GenLimits...), ratelimit.WithCost(GenCost), observe, overrides); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// startupTimeout bounds the startup check of a configured Redis.
const startupTimeout = 5 * time.Second

// store returns the store of the configured Redis, checked and wrapped
// in a Fallback, or of an embedded Redis.
func (a *App) store(r Redis) (ratelimit.Store, error) {
	if r.URL == "" && r.Cluster == "" && r.Sentinel == "" {
		return a.embed()
	}
	conn, err := r.dial()
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, conn.client.Close)
	redisStore, err := store.NewRedis(conn.client, store.RedisOptions{Prefix: "example:"})
	if err != nil {
		return nil, err
	}
	a.redis = redisStore
	// Refuse to start on a Redis that would refuse the limiter: an ACL
	// user missing a command, a cluster node behind a single server's
	// client, a TLS mistake, a policy that evicts counters. The error
	// says what to fix. A Redis that cannot decide now (down,
	// unreachable, loading) is the Fallback's to ride out: start.
	ctx, cancel := context.WithTimeout(context.Background(), startupTimeout)
	defer cancel()
	switch err := redisStore.Check(ctx); {
	case errors.Is(err, store.ErrMisconfigured):
		return nil, conn.checkError(err)
	case err != nil:
		a.redisDesc = fmt.Sprintf("%s %s does not answer now (%v); decisions are made in process until it does: %s", conn.flag, conn.where, err, conn.advice())
	default:
		a.redisDesc = conn.describe(ctx)
	}
	// A real Redis can fail: decide in process meanwhile.
	f, err := store.NewFallback(redisStore, store.FallbackOptions{Budget: a.Config.FallbackBudget})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, f.Close)
	a.Metrics.WatchFallback("redis", f)
	return f, nil
}

// MetricsHandler serves the Limiters' and the Fallback's metrics in
// Prometheus's text format, for GET /metrics. A real service would serve
// it on an internal port.
func (a *App) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{})
}

// embed starts an embedded Redis and returns its store.
func (a *App) embed() (ratelimit.Store, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("starting the embedded Redis: %w", err)
	}
	a.closers = append(a.closers, func() error { m.Close(); return nil })
	a.closers = append(a.closers, runClock(m, clockStep)) // stopped before m closes
	a.mini = m
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	a.closers = append(a.closers, client.Close)
	a.redisDesc = "embedded Redis (miniredis) at " + m.Addr() + "; give -redis redis://host:port/db to share limits between servers"
	a.redis, err = store.NewRedis(client, store.RedisOptions{Prefix: "example:"})
	return a.redis, err
}

// clockStep is how often the embedded Redis's TTLs catch up with the wall
// clock, and so how far from its due time a key may expire.
const clockStep = 50 * time.Millisecond

// runClock runs m's TTLs on the wall clock, as a real Redis's run: on its
// own, miniredis moves them only when FastForward is called, so keys would
// never expire, and a fixed window would deny forever once spent. Every step
// it moves them on by the time that passed, deleting the keys that are due,
// until the returned stop is called; stop waits for the goroutine to end.
//
// TIME, which the scripts read, needs nothing: miniredis answers it with
// time.Now() as long as SetTime is never called (calling it would make TIME
// move in steps too). FastForward takes m's lock, which a script holds while
// it runs, so no key expires in the middle of a script, as on Redis; with
// miniredis's ClockTTL, keys would expire between two calls of one script.
// Since TTLs move in steps, a key expires up to one step before or after
// its due time.
func runClock(m *miniredis.Miniredis, step time.Duration) (stop func() error) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(step)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			now := time.Now()
			m.FastForward(now.Sub(last))
			last = now
		}
	}()
	return func() error {
		close(done)
		<-exited
		return nil
	}
}

// Close releases Redis, and stops the embedded one's clock.
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// Describe writes where Redis is and each route with its limits.
func (a *App) Describe(w io.Writer) {
	c := a.Config
	fmt.Fprintf(w, "redis: %s\n", a.redisDesc)
	if a.mini == nil {
		fmt.Fprintf(w, "fallback: while Redis is down or slower than %v, decisions are made in process\n", c.FallbackBudget)
	}
	if len(c.TrustedProxies) == 0 {
		fmt.Fprintln(w, "client IP: the connection's peer (no -trusted-proxies)")
	} else {
		fmt.Fprintf(w, "client IP: X-Forwarded-For of trusted proxies %s\n", strings.Join(c.TrustedProxies, ","))
	}
	if c.KeySecret == "" {
		fmt.Fprintln(w, "API keys: hashed with a random secret, so their limits are this server's own; give every server the same -key-secret to share them")
	}
	fmt.Fprintln(w, "routes:")
	fmt.Fprintf(w, "  GET /        per client IP: %v\n", ratelimit.Limit{Algorithm: c.Algorithm, Quota: c.Limit, Window: c.Window, Burst: c.Burst, Name: "home"})
	fmt.Fprintf(w, "  POST /login  per client IP, failed attempts only: %v (a correct password, \"letmein\", never counts and clears them); %s\n", LoginLimit, describeBan(LoginBan))
	fmt.Fprintln(w, "  GET /quota   GET /'s quota left for the caller, without spending it")
	for _, plan := range []struct {
		name   string
		limits []ratelimit.Limit
	}{{"keys beginning \"pro-\"", ProLimits}, {"other keys", APILimits}} {
		var api []string
		for _, l := range plan.limits {
			api = append(api, l.String())
		}
		fmt.Fprintf(w, "  GET /api/    per X-API-Key, %s: %s\n", plan.name, strings.Join(api, " and "))
	}
	var gen []string
	for _, l := range GenLimits {
		gen = append(gen, l.String())
	}
	fmt.Fprintf(w, "  POST /v1/generate?tokens=N&hold_ms=M[&max_tokens=E][&stream=true]  per X-API-Key, E tokens reserved, N charged from the response (as streamed): %s\n", strings.Join(gen, "; "))
	fmt.Fprintln(w, "  GET /v1/quota  what each policy of POST /v1/generate has left for the caller's key")
}

// describeBan says what b does, for people: "3 denials within 1m ban
// for 1m, each ban twice the last, up to 1h".
func describeBan(b ratelimit.Ban) string {
	denials := "denials"
	if b.After == 1 {
		denials = "denial"
	}
	s := fmt.Sprintf("%d %s within %s ban for %s", b.After, denials, shortDuration(b.Within), shortDuration(b.For))
	if b.Max > b.For {
		s += ", each ban twice the last, up to " + shortDuration(b.Max)
	}
	return s
}

// shortDuration writes d without its zero units: 1m, not 1m0s; 1h, not
// 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Home answers GET /.
func Home(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintln(w, "hello")
}

// Login answers POST /login: the password "letmein" logs in and clears the
// client's failed attempts; any other fails, and only failures count
// against the limit.
func (a *App) Login(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("password") != "letmein" {
		http.Error(w, "wrong password", http.StatusUnauthorized)
		return
	}
	if err := a.Logins.Reset(r); err != nil {
		http.Error(w, "could not reset the login limit", http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "welcome")
}

// Quota answers GET /quota: the caller's quota of GET / as it is, without
// spending it, as JSON.
func (a *App) Quota(w http.ResponseWriter, r *http.Request) {
	d, err := a.IP.Peek(r)
	if err != nil || len(d.Results()) == 0 {
		quotaError(w, r, err)
		return
	}
	res := d.Results()[0]
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"limit":%d,"remaining":%d,"reset_ms":%d}`+"\n", res.Limit.Quota, res.Remaining, resetMS(res))
}

// resetMS is the reset_ms the quota endpoints report for res: the time
// until a unit beyond Remaining comes back (Result.Window), in
// milliseconds rounded up, the RateLimit field's t before it is rounded
// up to seconds (docs/headers.md, "What t promises").
func resetMS(res ratelimit.Result) int64 {
	return int64((res.Window + time.Millisecond - 1) / time.Millisecond)
}

// quotaError answers a quota endpoint whose Peek failed: 400 naming what
// the request lacks, as the Limiter's own answer does, when the request
// has no key; 503 when the store cannot answer.
func quotaError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ratelimit.ErrInvalid) {
		ratelimit.FailOpen(w, r, err) // writes the 400 of a request that cannot be limited
		return
	}
	http.Error(w, "the quota cannot be read now", http.StatusServiceUnavailable)
}

// API answers GET /api/ with what the caller's plan has left, which it
// reads from the decision its Limiter left in the request.
func API(w http.ResponseWriter, r *http.Request) {
	type left struct {
		Limit     string `json:"limit"`
		Remaining int    `json:"remaining"`
	}
	body := struct {
		Data string `json:"data"`
		Left []left `json:"left"`
	}{Data: "ok", Left: []left{}}
	for _, d := range ratelimit.Decisions(r.Context()) {
		for _, res := range d.Results() {
			body.Left = append(body.Left, left{res.Limit.Name, res.Remaining})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

// Run serves h on the configured address until SIGINT or SIGTERM, after
// printing where it listens and what it limits.
func (a *App) Run(framework string, h http.Handler) error {
	ln, err := net.Listen("tcp", a.Config.Addr)
	if err != nil {
		return err
	}
	servers := []*http.Server{{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ln}
	if a.Config.Admin != "" {
		aln, err := net.Listen("tcp", a.Config.Admin)
		if err != nil {
			ln.Close()
			return fmt.Errorf("-admin: %w", err)
		}
		servers = append(servers, &http.Server{Handler: a.AdminHandler(), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, aln)
	}
	var grpcServer *grpc.Server
	if a.Config.GRPC != "" {
		gln, err := net.Listen("tcp", a.Config.GRPC)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("-grpc: %w", err)
		}
		grpcServer = a.NewGRPCServer()
		go grpcServer.Serve(gln)
		defer grpcServer.GracefulStop()
		fmt.Printf("grpc: %s on %s, per x-api-key metadata, under the limits of POST /v1/generate\n", GenerateMethod, gln.Addr())
	}
	fmt.Printf("ratelimit example (%s) listening on http://%s\n", framework, ln.Addr())
	a.Describe(os.Stdout)
	if len(listeners) > 1 {
		token := "no token: this loopback address only"
		if a.Config.AdminToken != "" {
			token = "every request bearing -admin-token"
		}
		fmt.Printf("admin: http://%s/admin/ (%s): GET policies, overrides, top?policy=P; PUT overrides, shadow; DELETE overrides\n", listeners[1].Addr(), token)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	err = nil
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		if e := srv.Shutdown(shutdown); err == nil {
			err = e
		}
	}
	return err
}

// Main parses args, builds the app, and serves what route returns.
func Main(framework string, args []string, route func(*App) http.Handler) int {
	c, err := ParseFlags(filepath.Base(os.Args[0]), framework, args, os.Getenv)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a, err := New(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer a.Close()
	if err := a.Run(framework, route(a)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
