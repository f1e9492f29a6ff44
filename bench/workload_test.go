package main

import (
	"testing"
	"time"
)

// TestHistogram checks that every value falls in a bucket whose middle
// is within the promised relative error, and that quantiles come out in
// order.
func TestHistogram(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 12345, 1 << 20, 987654321, 1 << 40, 1<<63 - 1} {
		i := bucketOf(v)
		if i < 0 || i >= len(histogram{}.counts) {
			t.Fatalf("bucketOf(%d) = %d, out of range", v, i)
		}
		mid := bucketMid(i)
		diff := float64(mid) - float64(v)
		if diff < 0 {
			diff = -diff
		}
		if v >= 64 && diff/float64(v) > 1.0/64 {
			t.Errorf("value %d: bucket %d middle %d, error %.3f", v, i, mid, diff/float64(v))
		}
		if v < 64 && mid != v {
			t.Errorf("value %d: bucket middle %d, want exact", v, mid)
		}
	}
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	p50, p99 := h.quantile(0.5), h.quantile(0.99)
	if p50 < 490*time.Microsecond || p50 > 510*time.Microsecond {
		t.Errorf("p50 = %v, want about 500µs", p50)
	}
	if p99 < 975*time.Microsecond || p99 > 1005*time.Microsecond {
		t.Errorf("p99 = %v, want about 990µs", p99)
	}
}
