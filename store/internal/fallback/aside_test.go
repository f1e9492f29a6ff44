package fallback

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// errWaited stands for the error of a request whose time ran out while
// it waited for another request's answer.
var errWaited = errors.New("waited for another request's answer")

// slowClock is a primary whose every decision comes too late for its
// request (Waited), whose clock is read only once clockRead closes, and
// which records the offset of each charge brought to it.
type slowClock struct {
	explained
	offset    int64
	clockRead chan struct{}
	mu        sync.Mutex
	charged   []int64 // the offsets charges came with
}

func (*slowClock) Decide(context.Context, Call) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errWaited
}

func (p *slowClock) Probe(ctx context.Context, _ Probe, _ func() int64) (int64, error) {
	select {
	case <-p.clockRead:
		return p.offset, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (p *slowClock) Charge(_ context.Context, charges []*Charge, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range charges {
		p.charged = append(p.charged, offset)
	}
}

func (*slowClock) Explain(_ context.Context, err error) Failure {
	if errors.Is(err, errWaited) {
		return Failure{Fault: Waited}
	}
	return Failure{Fault: Outage, Cause: "timeout"}
}

// TestAsideBeforeTheClockIsRead: a request decided aside before Redis's
// clock was ever read is brought to Redis at Redis's time. Brought on the
// unread clock (offset 0), its admission would look an age old, and Redis
// would not count it: the instance would have admitted past the limit.
func TestAsideBeforeTheClockIsRead(t *testing.T) {
	p := &slowClock{offset: 1_800_000_000_000_000, clockRead: make(chan struct{})}
	f, err := New(p, Options{Budget: time.Second, ProbeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	limits, err := ratelimit.NewLimits(ratelimit.Limit{Quota: 10, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Allow(context.Background(), "k", 1, limits)
	if err != nil || !d.Allowed || !d.Fallback {
		t.Fatalf("Allow: %+v, %v; want admitted in process", d, err)
	}
	if f.Aside() != 1 {
		t.Fatalf("decided aside: %d, want 1", f.Aside())
	}
	time.Sleep(10 * time.Millisecond) // time for a settle that does not wait for the clock to bring it
	close(p.clockRead)
	for f.Health().Waiting != 0 {
		time.Sleep(time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.charged) != 1 || p.charged[0] != p.offset {
		t.Errorf("charges brought with offsets %v, want one with Redis's clock's, %d", p.charged, p.offset)
	}
}
