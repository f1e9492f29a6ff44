package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestOverridesDoor: the package admin's programs run through the store
// as its own do, on each path (Redis Functions and scripts, each pinned)
// and on miniredis: a change is read back, a shadow set on the override
// of before this form rewrites it, an unlimited one refuses a shadow,
// the most a namespace holds is kept, and the keys denied most go in and
// come out; every key under the store's prefix, with a TTL.
func TestOverridesDoor(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	mini := miniredis.RunT(t)
	for _, tc := range []struct {
		name string
		addr string
		path int32
	}{{"functions", srv.Addr, pathFunctions}, {"scripts", srv.Addr, pathScripts}, {"miniredis", mini.Addr(), -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := redis.NewClient(&redis.Options{Addr: tc.addr})
			t.Cleanup(func() { client.Close() })
			prefix := uniquePrefix()
			s := newStore(t, client, RedisOptions{Prefix: prefix})
			if tc.path >= 0 {
				s.fn.pin(tc.path)
			}
			k := s.Overrides("ns")
			ctx := context.Background()
			life := time.Hour
			version, fields, err := k.Read(ctx, "", life)
			if err != nil || len(fields) != 0 {
				t.Fatalf("Read of none: %q, %q, %v", version, fields, err)
			}
			if err := k.Change(ctx, "set", "api\nk1", `{"quota":5}`, life, 2); err != nil {
				t.Fatal(err)
			}
			// A value of before this form, as an older instance wrote it.
			if err := client.HSet(ctx, prefix+"overrides:{ns}", "api\n", `{"quota":0,"enforce":true}`).Err(); err != nil {
				t.Fatal(err)
			}
			if err := k.Change(ctx, "mode", "api\n", "shadow", life, 2); err != nil {
				t.Fatal(err)
			}
			if err := k.Change(ctx, "set", "api\nk3", `{"quota":1}`, life, 2); err == nil || !strings.Contains(err.Error(), override.FullReply) {
				t.Errorf("a third override where 2 is the most: %v, want %q", err, override.FullReply)
			}
			v2, fields, err := k.Read(ctx, version, life)
			if err != nil || v2 == version {
				t.Fatalf("Read after changes: version %q (was %q), %v", v2, version, err)
			}
			got := map[string]string{}
			for i := 0; i+1 < len(fields); i += 2 {
				got[fields[i]] = fields[i+1]
			}
			if want := map[string]string{"api\nk1": `{"quota":5}`, "api\n": `{"shadow":true}`}; len(got) != 2 || got["api\nk1"] != want["api\nk1"] || got["api\n"] != want["api\n"] {
				t.Errorf("Read: %q, want %q", got, want)
			}
			if _, again, err := k.Read(ctx, v2, life); err != nil || len(again) != 0 {
				t.Errorf("Read of the version known: %q, %v; want the version alone", again, err)
			}
			if err := k.Change(ctx, "set", "api\nk1", `{"unlimited":true}`, life, 2); err != nil {
				t.Fatal(err)
			}
			if err := k.Change(ctx, "mode", "api\nk1", "shadow", life, 2); err == nil || !strings.Contains(err.Error(), "unlimited or blocked") {
				t.Errorf("shadow of an unlimited override: %v, want it refused", err)
			}
			if err := k.Change(ctx, "del", "api\nk1", "", life, 2); err != nil {
				t.Fatal(err)
			}
			if err := k.PutTop(ctx, life, time.Minute, []string{"i1\n1m\napi", "summary-1"}); err != nil {
				t.Fatal(err)
			}
			top, err := k.GetTop(ctx, time.Minute, "1m", "api")
			if err != nil || !slices.Equal(top, []string{"i1", "summary-1"}) {
				t.Errorf("GetTop: %q, %v; want i1's summary", top, err)
			}
			for _, key := range []string{prefix + "overrides:{ns}", prefix + "top:{ns}"} {
				if ttl := client.PTTL(ctx, key).Val(); ttl <= 0 {
					t.Errorf("%s: TTL %v, want one", key, ttl)
				}
			}
		})
	}
}
