package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestCalendarPeriodsFollowRedis checks, on a real server, that a calendar
// limit counts in the period that holds Redis's clock, whatever periods
// the store last worked out: each call below starts with the calendar's
// periods set years ahead, so the script must refuse them before writing
// anything and the store ask again with the periods around Redis's time.
// Decisions alone and batched, Peek, and a Fallback's backlog brought to
// Redis all go through it, by Functions and by scripts.
func TestCalendarPeriodsFollowRedis(t *testing.T) {
	srv := redistest.Shared(t)
	future := time.Date(2031, 7, 14, 12, 0, 0, 0, time.UTC).UnixMicro()
	for _, path := range []struct {
		name string
		path int32
	}{{"functions", pathFunctions}, {"scripts", pathScripts}} {
		t.Run(path.name, func(t *testing.T) {
			s := newStore(t, newClient(t, srv.Addr), RedisOptions{Prefix: uniquePrefix(), DenyCacheSize: noDenyCache})
			s.fn.pin(path.path)
			month := ratelimit.Limit{Algorithm: ratelimit.Monthly, Quota: 10, Zone: "Europe/Paris", Name: "month"}
			limits := limitsOf(t, month, ratelimit.PerMinute(100))
			set := limitset.Compile(limits)
			ahead := func() { set.Limits[0].Calendar.Refresh(future) }
			wantMonth := func(where string, d ratelimit.Decision, remaining int) {
				t.Helper()
				now := time.Now()
				loc, _ := time.LoadLocation("Europe/Paris")
				y, m, _ := now.In(loc).Date()
				left := time.Date(y, m+1, 1, 0, 0, 0, 0, loc).Sub(now)
				r := d.Results()[0]
				if r.Remaining != remaining || r.Window < left-2*time.Second || r.Window > left+2*time.Second {
					t.Fatalf("%s: got Remaining %d, Window %v; want %d and about %v, the time to the next 1st in Paris", where, r.Remaining, r.Window, remaining, left)
				}
			}
			ctx := context.Background()

			ahead()
			d, err := s.Allow(ctx, "alone", 3, limits)
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			wantMonth("Allow", d, 7)

			ahead()
			if d, err = s.Peek(ctx, "alone", 1, limits); err != nil {
				t.Fatalf("Peek: %v", err)
			}
			wantMonth("Peek", d, 7)

			// Requests that arrive together share a run: each is refused
			// alone, in its line of the reply, and asked again.
			ahead()
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 16 {
				wg.Go(func() {
					d, err := s.Allow(ctx, fmt.Sprintf("together-%d", i), 1, limits)
					if err == nil && d.Results()[0].Remaining != 9 {
						err = fmt.Errorf("together-%d: Remaining %d, want 9", i, d.Results()[0].Remaining)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}

			// A backlog: units admitted in process a second ago, charged to
			// the current month.
			ahead()
			charge := &fallback.Charge{Key: "alone", ID: strconv.FormatInt(time.Now().UnixNano(), 16), Limits: []fallback.ChargedLimit{{Limit: &set.Limits[0], Spent: []fallback.Spending{{At: time.Now().Add(-time.Second).UnixMicro(), Cost: 4}}}}}
			if (primary{s}).Charge(ctx, []*fallback.Charge{charge}, 0); charge.Err != nil {
				t.Fatalf("Charge: %v", charge.Err)
			}
			if d, err = s.Peek(ctx, "alone", 1, limits); err != nil {
				t.Fatalf("Peek after the backlog: %v", err)
			}
			wantMonth("Peek after the backlog", d, 3)
		})
	}
}
