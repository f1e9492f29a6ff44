package memory

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// epoch is the pinned clocks' start.
var epoch = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is a pinned clock.
type fakeClock = testkit.Clock

func newMemory(t testing.TB, clock *fakeClock, opts Options) *Store {
	t.Helper()
	opts.Clock = clock.Now
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var limitsOf = testkit.LimitsOf

func TestMemoryOptions(t *testing.T) {
	if _, err := New(Options{MaxKeys: -1}); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("MaxKeys -1: got %v, want ErrInvalid", err)
	}
	// The zero options are every default: the store holds
	// defaultMaxKeys keys, on the machine's clock.
	m, err := New(Options{})
	if err != nil {
		t.Fatalf("Options{}: %v", err)
	}
	if got := m.MaxKeys(); got < defaultMaxKeys-len(m.shards) || got > defaultMaxKeys {
		t.Errorf("Options{}: holds up to %d keys, want about %d", got, defaultMaxKeys)
	}
	if now := m.now(); now < time.Now().Add(-time.Minute).UnixMicro() || now > time.Now().Add(time.Minute).UnixMicro() {
		t.Errorf("Options{}: the store's time is %v, want the machine's", time.UnixMicro(now))
	}
}

var withBan = testkit.WithBan

// traffic is n, the full size of some random traffic, with
// RATELIMIT_FAULTS=1, and a third of it otherwise.
func traffic(n int) int {
	if os.Getenv(redistest.FaultsEnv) == "1" {
		return n
	}
	return max(1, n/3)
}

var algorithmNamed = testkit.AlgorithmNamed
