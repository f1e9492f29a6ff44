package override

import (
	"math/rand/v2"
	"testing"
)

// TestKeyIndexMatchesMap: the index finds every key it holds, with its
// slot, short keys and keys longer than a cell holds alike, and finds no
// key it does not hold, however near one it holds: a key cut short,
// grown by a byte, or changed in its last byte.
func TestKeyIndexMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 100, MaxOverrides} {
		m := make(map[string]slot, n)
		for len(m) < n {
			b := make([]byte, 1+rng.IntN(120))
			for i := range b {
				b[i] = byte('a' + rng.IntN(4)) // few letters: many keys share a start
			}
			m[string(b)] = slot{int32(len(m)), int32(rng.IntN(50))}
		}
		x := newKeyIndex(m)
		for k, want := range m {
			if got, ok := x.find(k); !ok || got != want {
				t.Fatalf("%d keys: find(%q) = %v, %v; want %v", n, k, got, ok, want)
			}
			for _, near := range []string{k[:len(k)-1], k + "a", k[:len(k)-1] + "z"} {
				if _, held := m[near]; held {
					continue
				}
				if got, ok := x.find(near); ok {
					t.Fatalf("%d keys: find(%q), a key not held, = %v", n, near, got)
				}
			}
		}
		if n > 0 && len(x.ctrl) < n+n/3 {
			t.Errorf("%d keys in %d cells: more than 3/4 in use", n, len(x.ctrl))
		}
	}
}
