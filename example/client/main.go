// Command client calls the example's POST /v1/generate from many workers
// in several processes, the way a service's instances call a model API,
// and counts what came back: once as they are, once through
// outbound.Transport, which shares what it learns of the API's limits
// through Redis and holds back what would be refused.
//
//	go run ./example &             # the example server, on 127.0.0.1:8080
//	go run ./example/client        # 32 workers in 2 processes, 20s each way
//	go run ./example/client -workers 64 -processes 4 -duration 1m -redis redis://localhost:6379/0
//
// Each way uses an API key of its own (-key, then "-raw" or "-client"),
// so that the second starts with a fresh budget. Without -redis the
// processes share an embedded Redis.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/outbound"
	"github.com/ratelimit-go/ratelimit/store"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the command line.
type config struct {
	url, key, redis, mode string
	workers, processes    int
	tokens, holdMS        int
	duration              time.Duration
	json, child, through  bool
}

// Counts are what a run counted.
type Counts struct {
	Sent     int64 `json:"sent"`      // requests that reached the server
	Admitted int64 `json:"admitted"`  // answered 2xx
	Refused  int64 `json:"refused"`   // answered 429
	HeldBack int64 `json:"held_back"` // not sent: the budget had no room before the run ended
	Failed   int64 `json:"failed"`    // other answers and errors
}

func (c *Counts) add(o Counts) {
	c.Sent += o.Sent
	c.Admitted += o.Admitted
	c.Refused += o.Refused
	c.HeldBack += o.HeldBack
	c.Failed += o.Failed
}

// RefusedShare is the share of the requests sent that were refused.
func (c Counts) RefusedShare() float64 {
	if c.Sent == 0 {
		return 0
	}
	return float64(c.Refused) / float64(c.Sent)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "the example server's base URL")
	fs.StringVar(&c.key, "key", "client", `the API key, to which each way adds "-raw" or "-client"`)
	fs.StringVar(&c.redis, "redis", "", "the Redis URL the processes share their budget through (default: an embedded one)")
	fs.StringVar(&c.mode, "mode", "both", `"without" the client, "with" it, or "both", one after the other`)
	fs.IntVar(&c.workers, "workers", 32, "workers in all, spread over the processes")
	fs.IntVar(&c.processes, "processes", 2, "processes")
	fs.IntVar(&c.tokens, "tokens", 10, "tokens each request generates (charged to gen-tpm)")
	fs.IntVar(&c.holdMS, "hold-ms", 0, "how long the server takes per request, in ms")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "how long each way runs")
	fs.BoolVar(&c.json, "json", false, "print the counts as JSON")
	fs.BoolVar(&c.child, "child", false, "run the workers of one process (the command runs itself so)")
	fs.BoolVar(&c.through, "through", false, "with -child: send through outbound.Transport")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if c.workers < 1 || c.processes < 1 || c.workers < c.processes || c.duration <= 0 {
		fmt.Fprintln(stderr, "client: want -workers at least -processes, both at least 1, and a -duration above 0")
		return 2
	}
	if c.child {
		counts, err := c.work()
		if err != nil {
			fmt.Fprintln(stderr, "client:", err)
			return 1
		}
		json.NewEncoder(stdout).Encode(counts)
		return 0
	}
	if c.redis == "" {
		m, err := miniredis.Run()
		if err != nil {
			fmt.Fprintln(stderr, "client: embedding a Redis:", err)
			return 1
		}
		defer m.Close()
		c.redis = "redis://" + m.Addr() + "/0"
	}
	ways := map[string][]bool{"both": {false, true}, "without": {false}, "with": {true}}[c.mode]
	if ways == nil {
		fmt.Fprintf(stderr, "client: -mode %q: want without, with or both\n", c.mode)
		return 2
	}
	results := map[string]Counts{}
	for _, through := range ways {
		counts, err := c.spawn(args, through)
		if err != nil {
			fmt.Fprintln(stderr, "client:", err)
			return 1
		}
		results[wayName(through)] = counts
	}
	if c.json {
		json.NewEncoder(stdout).Encode(results)
		return 0
	}
	fmt.Fprintf(stdout, "%d workers in %d processes, %v each way, POST %s/v1/generate\n\n", c.workers, c.processes, c.duration, c.url)
	fmt.Fprintf(stdout, "%-20s %8s %9s %9s %9s %10s %7s\n", "", "sent", "admitted", "refused", "share", "held back", "failed")
	for _, through := range ways {
		r := results[wayName(through)]
		fmt.Fprintf(stdout, "%-20s %8d %9d %9d %8.1f%% %10d %7d\n", wayName(through), r.Sent, r.Admitted, r.Refused, 100*r.RefusedShare(), r.HeldBack, r.Failed)
	}
	return 0
}

func wayName(through bool) string {
	if through {
		return "with the client"
	}
	return "without the client"
}

// spawn runs c's processes, each way, and adds up what they counted.
func (c config) spawn(args []string, through bool) (Counts, error) {
	self, err := os.Executable()
	if err != nil {
		return Counts{}, err
	}
	var mu sync.Mutex
	var sum Counts
	errs := make(chan error, c.processes)
	for p := range c.processes {
		workers := c.workers / c.processes
		if p < c.workers%c.processes {
			workers++
		}
		childArgs := append(append([]string(nil), args...), "-child", "-redis", c.redis, fmt.Sprintf("-workers=%d", workers), "-processes=1", fmt.Sprintf("-through=%v", through))
		go func() {
			cmd := exec.Command(self, childArgs...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				errs <- fmt.Errorf("a process: %v: %s", err, errOut.String())
				return
			}
			var counts Counts
			if err := json.Unmarshal(out.Bytes(), &counts); err != nil {
				errs <- fmt.Errorf("a process printed %q: %v", out.String(), err)
				return
			}
			mu.Lock()
			sum.add(counts)
			mu.Unlock()
			errs <- nil
		}()
	}
	for range c.processes {
		if err := <-errs; err != nil {
			return Counts{}, err
		}
	}
	return sum, nil
}

// work runs c.workers workers for c.duration and returns their counts.
func (c config) work() (Counts, error) {
	base := &http.Transport{MaxIdleConnsPerHost: c.workers}
	defer base.CloseIdleConnections()
	var rt http.RoundTripper = base
	key := c.key + "-raw"
	if c.through {
		key = c.key + "-client"
		opts, err := redis.ParseURL(c.redis)
		if err != nil {
			return Counts{}, fmt.Errorf("-redis: %w", err)
		}
		rc := redis.NewClient(opts)
		defer rc.Close()
		s, err := store.NewRedis(rc, store.RedisOptions{Prefix: "example-client:"})
		if err != nil {
			return Counts{}, err
		}
		if rt, err = outbound.New(base, s); err != nil {
			return Counts{}, err
		}
	}
	client := &http.Client{Transport: rt}
	u := fmt.Sprintf("%s/v1/generate?tokens=%d&hold_ms=%d", c.url, c.tokens, c.holdMS)
	ctx, cancel := context.WithTimeout(context.Background(), c.duration)
	defer cancel()
	var sent, admitted, refused, held, failed atomic.Int64
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", u, nil)
				req.Header.Set("X-API-Key", key)
				resp, err := client.Do(req)
				var e *outbound.Error
				switch {
				case errors.As(err, &e):
					held.Add(1)
					select { // not before the budget has room
					case <-time.After(e.RetryAfter):
					case <-ctx.Done():
					}
					continue
				case err != nil:
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent.Add(1)
				switch {
				case resp.StatusCode < 300:
					admitted.Add(1)
				case resp.StatusCode == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return Counts{Sent: sent.Load(), Admitted: admitted.Load(), Refused: refused.Load(), HeldBack: held.Load(), Failed: failed.Load()}, nil
}
