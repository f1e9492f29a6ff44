package store

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestTLS reaches a real redis-server's TLS port, with a certificate
// authority made by the test: with the authority the store decides; the
// usual mistakes fail Check with an ErrMisconfigured that says what is wrong.
// A handshake to a plain port gets no answer, so Check waits out its
// context before it finds why.
func TestTLS(t *testing.T) {
	t.Parallel()
	srv := redistest.RequireTLS(t)
	certOnly := redistest.RequireTLS(t, "--tls-auth-clients", "yes")
	trusted := &tls.Config{RootCAs: srv.CA}
	for _, tt := range []struct {
		name string
		addr string
		tls  *tls.Config
		want string // in the misconfiguration's problem; "" for none
	}{
		{"the right authority", srv.TLSAddr, trusted, ""},
		{"no authority", srv.TLSAddr, &tls.Config{}, "signed by an authority the client does not trust"},
		{"another host name", srv.TLSAddr, &tls.Config{RootCAs: srv.CA, ServerName: "redis.example"}, "does not name the host"},
		{"plain text to the TLS port", srv.TLSAddr, nil, "speaks TLS, and the client plain text"},
		{"TLS to the plain port", srv.Addr, trusted, "answered in plain text: it is not a TLS port"},
		{"no client certificate where one is required", certOnly.TLSAddr, &tls.Config{RootCAs: certOnly.CA}, "refused the TLS handshake"},
		{"a client certificate", certOnly.TLSAddr, &tls.Config{RootCAs: certOnly.CA, Certificates: []tls.Certificate{certOnly.Client}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := redis.NewClient(&redis.Options{Addr: tt.addr, TLSConfig: tt.tls, MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { client.Close() })
			s := newStore(t, client, RedisOptions{Prefix: uniquePrefix()})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := s.Check(ctx)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				d, err := s.Allow(ctx, "k", 1, limitsOf(t, ratelimit.PerMinute(1)))
				if err != nil || !d.Allowed {
					t.Fatalf("Allow: %+v, %v", d, err)
				}
				return
			}
			var ce *misconfiguration
			if !errors.As(err, &ce) || !strings.Contains(ce.problem, tt.want) || ce.fix == "" {
				t.Fatalf("Check: %v; want an ErrMisconfigured saying %q, and a fix", err, tt.want)
			}
			t.Logf("Check: %v", err)
		})
	}
}

// TestTLSFallback: through a Fallback, a client that does not trust the
// server's certificate gets decisions made in process, the limit held,
// and an ERROR that says why; Check at startup said so already.
func TestTLSFallback(t *testing.T) {
	t.Parallel()
	srv := redistest.RequireTLS(t)
	client := redis.NewClient(&redis.Options{Addr: srv.TLSAddr, TLSConfig: &tls.Config{}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	f, err := NewFallback(newStore(t, client, RedisOptions{Prefix: uniquePrefix(), Logger: logger}),
		FallbackOptions{ProbeInterval: faultInterval, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	limit := limitsOf(t, ratelimit.Limit{Quota: 3, Window: time.Hour})
	admitted := 0
	for range 10 {
		d, err := f.Allow(context.Background(), "k", 1, limit)
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 3 {
		t.Errorf("admitted %d of 10 under a limit of 3", admitted)
	}
	named := regexp.MustCompile(`level=ERROR .*problem="Redis's TLS certificate is signed by an authority the client does not trust"`)
	defer func() { t.Logf("logs:\n%s", logs.String()) }()
	waitFor(t, "an ERROR naming the certificate", func() bool { return named.MatchString(logs.String()) })
	if st := f.Health(); st.Decisions == "redis" || st.Misconfigured == 0 {
		t.Errorf("%+v: want down for a misconfiguration", st)
	}
}
