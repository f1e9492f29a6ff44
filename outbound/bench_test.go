package outbound_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/outbound"
	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// BenchmarkTransport is the cost of a request the Transport lets
// through: GET to a loopback server that answers this library's draft-11
// fields of a quota never spent, through a bare http.Transport, then
// through a Transport over it keeping its budget in the Memory store, or
// in a real redis-server (a round trip to it on top).
func BenchmarkTransport(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Ratelimit-Policy"] = []string{`"api";q=1000000000;w=60`}
		h["Ratelimit"] = []string{`"api";r=999999999;t=60`}
	}))
	defer upstream.Close()
	bare := &http.Transport{MaxIdleConnsPerHost: 64}
	defer bare.CloseIdleConnections()
	memory, err := store.NewMemory(store.MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: redistest.Shared(b).Addr})
	defer client.Close()
	shared, err := store.NewRedis(client, store.RedisOptions{Prefix: "outbench:"})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store ratelimit.Store
	}{{"bare", nil}, {"memory", memory}, {"redis", shared}} {
		b.Run(tc.name, func(b *testing.B) {
			var rt http.RoundTripper = bare
			if tc.store != nil {
				if rt, err = outbound.New(bare, tc.store); err != nil {
					b.Fatal(err)
				}
			}
			c := &http.Client{Transport: rt}
			get := func() {
				resp, err := c.Get(upstream.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			get() // learns the policy
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				get()
			}
		})
	}
}
