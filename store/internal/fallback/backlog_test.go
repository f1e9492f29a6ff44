package fallback

import (
	"strings"
	"testing"
	"unsafe"
)

// TestBacklogCopiesItsKeys: a key the backlog keeps is a copy, not a
// substring of the caller's buffer, which through a Limiter holds the
// request's header values too: keeping it would pin the whole buffer per
// key.
func TestBacklogCopiesItsKeys(t *testing.T) {
	buf := strings.Repeat("x", 200) + "held-key" + strings.Repeat("y", 200)
	key := buf[200:208]
	var b backlog
	b.max = 10
	sh := b.shard(key)
	if p, fresh := sh.get(&b, key); p == nil || !fresh {
		t.Fatalf("get: got %v, fresh %v; want a new backlog", p, fresh)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(buf)))
	for held := range sh.keys {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(held))); p >= start && p < start+uintptr(len(buf)) {
			t.Error("the backlog holds the caller's buffer as a key")
		}
	}
}
