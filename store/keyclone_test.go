package store

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
)

// TestStoresCopyTheKeysTheyHold: a key the deny cache and the slices
// keep (the Memory store and the Fallback's backlog: see their
// TestMemoryCopiesTheKeysItHolds and TestBacklogCopiesItsKeys) is a copy, not a substring of
// the caller's buffer, which through a Limiter holds the request's
// header values too: keeping it would pin the whole buffer per key.
func TestStoresCopyTheKeysTheyHold(t *testing.T) {
	buf := strings.Repeat("x", 200) + "held-key" + strings.Repeat("y", 200)
	key := buf[200:208]
	in := func(held string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(held)))
		b := uintptr(unsafe.Pointer(unsafe.StringData(buf)))
		return p >= b && p < b+uintptr(len(buf))
	}

	c := newDenyCache(100)
	_, set, err := limitset.Check(key, 1, limitsOf(t, ratelimit.PerMinute(5)))
	if err != nil {
		t.Fatal(err)
	}
	d := ratelimit.MakeDecision(ratelimit.Result{Limit: ratelimit.PerMinute(5), RetryAfter: time.Second})
	for range 2 { // made, then replaced
		c.put(&request{key: key, cost: 1, set: set}, d, c.epoch(key))
		for held := range c.shard(key).m {
			if in(held) {
				t.Error("the deny cache holds the caller's buffer as a key")
			}
		}
	}

	var q sliceTable
	q.shard(key).add(key, 0)
	for i := range q.shards {
		for held := range q.shards[i].keys {
			if in(held) {
				t.Error("the slices hold the caller's buffer as a key")
			}
		}
	}
}
