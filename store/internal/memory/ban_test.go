package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestMemoryKeepsBans: a banned key whose limits have expired is kept
// while its ban matters, ahead of keys that have nothing left to keep; and
// a flood of banned keys stays within the store's bound.
func TestMemoryKeepsBans(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(epoch, nil)
	m := newMemory(t, clock, Options{MaxKeys: 64})
	ctx := context.Background()
	short := ratelimit.Limit{Quota: 1, Window: 10 * time.Millisecond}.Using(ratelimit.FixedWindow)
	banned := withBan(t, ratelimit.Ban{After: 1, Within: time.Hour, For: time.Hour}, short)
	m.Allow(ctx, "banned", 1, banned)
	if d, _ := m.Allow(ctx, "banned", 1, banned); d.Banned != time.Hour {
		t.Fatalf("the first denial: got %+v, want a ban of 1h", d)
	}
	for i := 0; m.Len() < 64 && i < 10_000; i++ {
		m.Allow(ctx, fmt.Sprintf("short-%d", i), 1, limitsOf(t, short))
	}
	clock.Advance(20 * time.Millisecond)
	for i := range 40 {
		m.Allow(ctx, fmt.Sprintf("new-%d", i), 1, limitsOf(t, short))
	}
	if d, _ := m.Allow(ctx, "banned", 1, banned); d.Banned == 0 {
		t.Error("the banned key was evicted while expired keys were there to go")
	}
	for i := range 5000 {
		key := fmt.Sprintf("flood-%d", i)
		m.Allow(ctx, key, 1, banned)
		m.Allow(ctx, key, 1, banned)
		if n := m.Len(); n > m.MaxKeys() {
			t.Fatalf("after %d banned keys the store holds %d, want at most %d", i+1, n, m.MaxKeys())
		}
	}
}
