package ratelimitotel

import (
	"strconv"
	"sync"
	"testing"
)

func TestSeriesMapIsBounded(t *testing.T) {
	made := 0
	m := &seriesMap[string, int]{
		Max:      3,
		Make:     func(k string) int { made++; return len(k) },
		Overflow: func(string) string { return "other" },
	}
	for i := range 10 {
		m.Get("k" + strconv.Itoa(i))
		m.Get("k" + strconv.Itoa(i))
	}
	if got := len(m.m); got != 4 {
		t.Errorf("got %d label sets, want 3 and the overflow's", got)
	}
	if made != 4 {
		t.Errorf("made %d values, want 4: one per label set kept", made)
	}
	if got := m.Get("k9"); got != len("other") {
		t.Errorf("a label set past the bound got %d, want the overflow's value %d", got, len("other"))
	}
}

func TestSeriesMapConcurrent(t *testing.T) {
	var mu sync.Mutex
	made := map[int]int{}
	m := &seriesMap[int, int]{Max: 100, Make: func(k int) int { mu.Lock(); made[k]++; mu.Unlock(); return k * 2 }, Overflow: func(int) int { return -1 }}
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
