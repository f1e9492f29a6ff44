package outbound_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/outbound"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestSharedThroughRedis: two Transports, as two instances would have,
// each with its own client of one redis-server, 8 workers each, 100
// requests without waiting, to an upstream of 20 requests a minute: 20
// are served, the others refused before they are sent, but for at most
// one: the first request of the second Transport, which goes before it
// has learned the upstream's policy, and which it may send after the
// first has spent the budget, but before the first heard so.
func TestSharedThroughRedis(t *testing.T) {
	srv := redistest.Require(t)
	u := newUpstream(t, limited(t, ratelimit.PerMinute(20).Named("rpm")))
	var transports []*outbound.Transport
	for range 2 {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		s, err := store.NewRedis(c, store.RedisOptions{Prefix: "shared-" + t.Name() + ":"})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := outbound.New(nil, s, outbound.WithoutWaiting())
		if err != nil {
			t.Fatal(err)
		}
		transports = append(transports, tr)
	}
	type result struct{ ok, limited, refused int }
	results := make(chan result, 2)
	for _, tr := range transports {
		go func() {
			ok, limited, refused := send(t, &http.Client{Transport: tr}, u.URL, 8, 50, 10*time.Second)
			results <- result{ok, limited, refused}
		}()
	}
	var sum result
	for range 2 {
		r := <-results
		sum.ok, sum.limited, sum.refused = sum.ok+r.ok, sum.limited+r.limited, sum.refused+r.refused
	}
	if sum.ok != 20 || sum.limited > 1 || sum.ok+sum.limited+sum.refused != 100 {
		t.Errorf("got %d served, %d refused by the upstream, %d refused before sending; want 20, at most 1, the rest", sum.ok, sum.limited, sum.refused)
	}
}
