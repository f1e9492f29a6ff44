package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestMemoryKeysShareAHash puts keys of one hash in a shard, as 64-bit
// hashes that meet would: each keeps its own state, eviction drops each
// alone, wherever it is in the chain, and the count stays right.
func TestMemoryKeysShareAHash(t *testing.T) {
	t.Parallel()
	var sh memoryShard
	sh.keys = make(map[uint64]*memoryKey)
	const h = 42
	names := []string{"a", "b", "c"}
	states := map[string]*memoryKey{}
	for i, name := range names {
		k := sh.key(h, name, 0, 10)
		k.expires.Store(int64(10 * (i + 1))) // a at 10, b at 20, c at 30
		states[name] = k
	}
	sh.key(7, "d", 0, 10).expires.Store(100)
	for _, name := range names {
		if got := sh.key(h, name, 0, 10); got != states[name] {
			t.Fatalf("key %q: got another state than the first time", name)
		}
	}
	if sh.n != 4 || len(sh.keys) != 2 {
		t.Fatalf("got %d keys under %d hashes, want 4 under 2", sh.n, len(sh.keys))
	}
	// At 20, a and b have expired: eviction drops them, in the chain's
	// middle and end, and keeps c and d.
	sh.evict(20)
	for name, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if got := sh.find(h, name) != nil; got != want {
			t.Errorf("after evicting at 20: key %q held %v, want %v", name, got, want)
		}
	}
	if sh.find(7, "d") == nil || sh.find(7, "a") != nil {
		t.Errorf("after evicting at 20: got the wrong keys under another hash")
	}
	if sh.n != 2 {
		t.Errorf("after evicting at 20: got %d keys, want 2", sh.n)
	}
	// Nothing has expired at 25: the soonest, c, goes.
	sh.evict(25)
	if sh.find(h, "c") != nil || sh.find(7, "d") == nil || sh.n != 1 || len(sh.keys) != 1 {
		t.Errorf("after evicting at 25: got %d keys, c held %v, want d alone", sh.n, sh.find(h, "c") != nil)
	}
}

// TestMemoryHashFindsTheKey checks the hash that picks a key's shard finds
// it there: each decided key is held once, in the shard of its hash, and
// a later decision and a lookup find the same state.
func TestMemoryHashFindsTheKey(t *testing.T) {
	t.Parallel()
	clock := testkit.NewClock(epoch, nil)
	m := newMemory(t, clock, Options{MaxKeys: 1 << 16})
	l := limitsOf(t, ratelimit.PerMinute(10))
	ctx := context.Background()
	for i := range 5000 {
		key := fmt.Sprint("key-", i)
		if _, err := m.Allow(ctx, key, 1, l); err != nil {
			t.Fatal(err)
		}
		k := m.lookup(key)
		if k == nil || k.name != key {
			t.Fatalf("key %q: lookup found no state after a decision", key)
		}
		if got := m.key(key, m.now()); got != k {
			t.Fatalf("key %q: a decision found another state than the lookup", key)
		}
		h, home := m.shard(key)
		for j := range m.shards {
			sh := &m.shards[j]
			if got := sh.find(h, key) != nil; got != (sh == home) {
				t.Fatalf("key %q: held in shard %d: %v, want only in its hash's shard", key, j, got)
			}
		}
	}
	if n := m.Len(); n != 5000 {
		t.Errorf("got %d keys, want 5000", n)
	}
}

// TestMemoryCopiesTheKeysItHolds: a key the store keeps is a copy, not a
// substring of the caller's buffer, which through a Limiter holds the
// request's header values too: keeping it would pin the whole buffer per
// key.
func TestMemoryCopiesTheKeysItHolds(t *testing.T) {
	buf := strings.Repeat("x", 200) + "held-key" + strings.Repeat("y", 200)
	key := buf[200:208]
	m := newMemory(t, testkit.NewClock(epoch, nil), Options{})
	if _, err := m.Allow(context.Background(), key, 1, limitsOf(t, ratelimit.PerMinute(5))); err != nil {
		t.Fatal(err)
	}
	k := m.lookup(key)
	if k == nil {
		t.Fatal("the key was not kept")
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(k.name)))
	b := uintptr(unsafe.Pointer(unsafe.StringData(buf)))
	if p >= b && p < b+uintptr(len(buf)) {
		t.Error("the Memory store holds the caller's buffer as the key's name")
	}
}
