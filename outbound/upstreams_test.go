package outbound_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/outbound"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// The upstreams' limit: upstreamLimit requests per upstreamWindow, for
// upstreamWindows windows; clientProcesses processes of clientWorkers
// goroutines each, sharing one redis-server.
const (
	upstreamLimit   = 100
	upstreamWindow  = 3 * time.Second
	upstreamWindows = 4
	clientProcesses = 2
	clientWorkers   = 16
)

// upstreamStats is what server.mjs counted.
type upstreamStats struct {
	Admitted, Refused, SentInHold int
	SentAfterRefusal              int   // of SentInHold, those sent after the refusal, by their X-Sent-At
	FirstRefusedAt                int64 // ms since the epoch; 0: none
	RetryAfter                    int   // seconds, of the first refusal
	Start                         int64
	Windows                       []struct{ Admitted, Refused int }
}

// full returns what s's windows admitted but the last, which the
// clients' run ends within, and how many they are.
func (s upstreamStats) full() (admitted, windows int) {
	for _, w := range s.Windows[:max(len(s.Windows)-1, 0)] {
		admitted += w.Admitted
		windows++
	}
	return admitted, windows
}

// TestRealUpstreams: two processes of 16 goroutines each, with a
// Transport sharing a redis-server, call real rate-limited servers
// nobody here wrote (testdata/upstreams/server.mjs: express with
// express-rate-limit in each of its header forms, and
// rate-limiter-flexible's 429 with Retry-After alone), 100 requests per
// 3s, for 4 windows: at most 1% of what reaches a server that states
// its limit is refused (X-RateLimit-*'s window is taken from its reset);
// at least 95% of what the server allows is admitted in each form, in
// the server's windows that the run spans whole. The
// table logs each form's figures, with the requests that reached the
// 429-only server after its first refusal, before its Retry-After
// (those in flight when it came among them), and the same clients
// without the Transport beside. A long run: RATELIMIT_FAULTS=1.
func TestRealUpstreams(t *testing.T) {
	if os.Getenv("RATELIMIT_FAULTS") != "1" {
		t.Skip("a long run (about 30s): RATELIMIT_FAULTS=1 runs it")
	}
	node := lookNode(t)
	srv := redistest.Require(t)
	type row struct {
		form, client                                  string
		sent, admitted, refused, inHold, afterRefusal int
		learned                                       string // what the processes learned, as kept in the store
		full, allowed                                 int    // admitted and allowed in the windows the run spans whole
	}
	var mu sync.Mutex
	var rows []row
	for _, client := range []string{"outbound", "none"} {
		t.Run(client, func(t *testing.T) {
			for _, form := range []string{"draft-6", "draft-7", "draft-8", "legacy", "flexible"} {
				t.Run(form, func(t *testing.T) {
					t.Parallel()
					url, stats := startUpstream(t, node, form)
					env := fmt.Sprintf("OUTBOUND_CLIENT=%s|%s|%s|%s", client, url+"/api", srv.Addr, "up-"+form+":")
					var wg sync.WaitGroup
					for range clientProcesses {
						wg.Add(1)
						go func() {
							defer wg.Done()
							cmd, _ := testkit.StartChild(t, env)
							_ = cmd.Wait()
						}()
					}
					wg.Wait()
					s := stats()
					learned := ""
					if client == "outbound" {
						learned = learnedBy(t, srv.Addr, "up-"+form+":", url+"/api")
					}
					full, windows := s.full()
					r := row{form: form, client: client, sent: s.Admitted + s.Refused, admitted: s.Admitted, refused: s.Refused, inHold: s.SentInHold, afterRefusal: s.SentAfterRefusal, learned: learned,
						full: full, allowed: upstreamLimit * windows}
					mu.Lock()
					rows = append(rows, r)
					mu.Unlock()
					if client == "none" {
						return
					}
					// The forms that state a limit before refusing: at most
					// 1% refused. rate-limiter-flexible states nothing: what
					// it costs is in the table.
					share := float64(r.refused) / float64(max(r.sent, 1))
					if form != "flexible" && share > 0.01 {
						t.Errorf("%s: %d of %d sent refused (%.1f%%), want at most 1%%", form, r.refused, r.sent, 100*share)
					}
					if r.allowed < 3*upstreamLimit || float64(r.full) < 0.95*float64(r.allowed) {
						t.Errorf("%s: %d admitted of the %d the server allowed in the windows the run spans whole, want at least 95%%", form, r.full, r.allowed)
					}
				})
			}
		})
	}
	t.Logf("%-9s %-8s %6s %8s %7s %6s %8s %7s %7s %s", "form", "client", "sent", "admitted", "refused", "share", "adm/allw", "in hold", "sent so", "learned")
	for _, r := range rows {
		t.Logf("%-9s %-8s %6d %8d %7d %5.1f%% %7.2f %7d %7d %s", r.form, r.client, r.sent, r.admitted, r.refused,
			100*float64(r.refused)/float64(max(r.sent, 1)), float64(r.full)/float64(max(r.allowed, 1)), r.inHold, r.afterRefusal, r.learned)
	}
}

// lookNode returns node's path, with the upstreams' packages installed,
// or skips t saying what is missing (fails it under
// RATELIMIT_REQUIRE_NODE=1, as CI runs).
func lookNode(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("RATELIMIT_REQUIRE_NODE") == "1" {
			t.Fatalf("%s, and RATELIMIT_REQUIRE_NODE=1", what)
		}
		t.Skip(what + "; the real upstreams are not run")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed (Debian's nodejs package)")
	}
	if _, err := os.Stat("testdata/upstreams/node_modules/express-rate-limit"); err != nil {
		missing("the upstreams' packages are not installed: npm ci --prefix outbound/testdata/upstreams")
	}
	return node
}

// startUpstream starts server.mjs of form, and returns its URL and a
// function that reads its counts.
func startUpstream(t *testing.T, node, form string) (string, func() upstreamStats) {
	t.Helper()
	cmd := exec.Command(node, "server.mjs", form, strconv.Itoa(upstreamLimit), strconv.Itoa(int(upstreamWindow/time.Millisecond)))
	cmd.Dir = "testdata/upstreams"
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("server.mjs %s said nothing: %v", form, err)
	}
	url := "http://127.0.0.1:" + strings.TrimSpace(port)
	return url, func() upstreamStats {
		resp, err := http.Get(url + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s upstreamStats
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// upstreamClient is a child process of TestRealUpstreams: with the
// Transport ("outbound") or without ("none"), clientWorkers goroutines
// call url for upstreamWindows windows and a half.
func upstreamClient(spec string) {
	f := strings.Split(spec, "|")
	client, url, addr, prefix := f[0], f[1], f[2], f[3]
	fmt.Println("started")
	var rt http.RoundTripper = stampSent{}
	if client == "outbound" {
		c := redis.NewClient(&redis.Options{Addr: addr})
		s, err := store.NewRedis(c, store.RedisOptions{Prefix: prefix})
		if err != nil {
			panic(err)
		}
		if rt, err = outbound.New(stampSent{}, s); err != nil {
			panic(err)
		}
	}
	hc := &http.Client{Transport: rt}
	ctx, cancel := context.WithTimeout(context.Background(), upstreamWindows*upstreamWindow+upstreamWindow/2)
	defer cancel()
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range clientWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				resp, err := hc.Do(req)
				var refused *outbound.Error
				switch {
				case errors.As(err, &refused):
					// Not sent: its room comes after the run's end. A
					// caller waits as told.
					select {
					case <-ctx.Done():
					case <-time.After(max(refused.RetryAfter, 10*time.Millisecond)):
					}
					continue
				case err != nil:
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		fmt.Fprintln(os.Stderr, "upstream client:", failed.Load(), "requests failed")
		os.Exit(1)
	}
	os.Exit(0)
}

// stampSent sends through http.DefaultTransport, with the time it sends
// in X-Sent-At (ms since the epoch), so that the server tells requests
// sent after its refusal from those in flight when it came.
type stampSent struct{}

func (stampSent) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Sent-At", strconv.FormatInt(time.Now().UnixMilli(), 10))
	return http.DefaultTransport.RoundTrip(req)
}

// learnedBy returns the limits the clients of url learned, as a new
// process reads them from the store under prefix.
func learnedBy(t *testing.T, addr, prefix, url string) string {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	s, err := store.NewRedis(c, store.RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := outbound.New(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", url, nil)
	b, err := tr.Budget(context.Background(), req)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(b.Limits)
}
