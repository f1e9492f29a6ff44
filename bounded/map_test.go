package bounded

import (
	"strconv"
	"sync"
	"testing"
)

// TestMapIsBounded: past Max, a new key gets the value of its overflow,
// kept once, or, without Overflow, the map starts afresh with it.
func TestMapIsBounded(t *testing.T) {
	for _, tt := range []struct {
		name     string
		overflow func(string) string
		kept     int // keys kept once 10 were asked for twice each
		made     int // values made
		past     int // the value of a key past the bound
	}{
		{"an overflow key", func(string) string { return "other" }, 4, 4, len("other")},
		{"no overflow", nil, 1, 10, len("k9")}, // afresh at k3, k6 and k9
	} {
		t.Run(tt.name, func(t *testing.T) {
			made := 0
			m := &Map[string, int]{
				Max:      3,
				Make:     func(k string) int { made++; return len(k) },
				Overflow: tt.overflow,
			}
			for i := range 10 {
				m.Get("k" + strconv.Itoa(i))
				m.Get("k" + strconv.Itoa(i))
			}
			kept := 0
			m.m.Range(func(any, any) bool { kept++; return true })
			if got := kept; got != tt.kept || int(m.n.Load()) != tt.kept {
				t.Errorf("got %d keys kept, want %d", got, tt.kept)
			}
			if got := m.Get("k9"); got != tt.past {
				t.Errorf("a key past the bound got %d, want %d", got, tt.past)
			}
			if made != tt.made {
				t.Errorf("made %d values, want %d", made, tt.made)
			}
		})
	}
}

func TestMapConcurrent(t *testing.T) {
	var mu sync.Mutex
	made := map[int]int{}
	m := &Map[int, int]{Max: 100, Make: func(k int) int { mu.Lock(); made[k]++; mu.Unlock(); return k * 2 }, Overflow: func(int) int { return -1 }}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if v := m.Get(i); v != i*2 {
					t.Errorf("goroutine %d: Get(%d) = %d, want %d", g, i, v, i*2)
				}
			}
		}()
	}
	wg.Wait()
	for k, n := range made {
		if n != 1 {
			t.Errorf("the value of %d was made %d times, want once", k, n)
		}
	}
}
