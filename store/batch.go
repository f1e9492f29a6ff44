package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A decision is one request's part of a run of decide: its KEYS and ARGV,
// and, once the run is over, its reply line or the run's error.
type decision struct {
	programRun       // the run of it alone
	deadline   int64 // its ARGV entry, by reference
	line       string
	err        error
	done       chan struct{}   // receives once the line or error is set
	until      time.Time       // when the caller stops waiting; zero: never
	gone       <-chan struct{} // closed when the caller gives up; nil: never
}

var decisions = sync.Pool{New: func() any {
	return &decision{programRun: programRun{keys: make([]string, 0, 4), args: make([]any, 0, 18)}, done: make(chan struct{}, 1)}
}}

// release returns d to the pool once its caller got the answer (a run may
// still hold d of a caller that gave up).
func (d *decision) release() {
	clear(d.keys)
	clear(d.args)
	d.keys, d.args, d.deadline, d.line, d.err, d.until, d.gone, d.program = d.keys[:0], d.args[:0], 0, "", nil, time.Time{}, nil, nil
	decisions.Put(d)
}

// batcher runs concurrent decisions together. A decision that finds fewer
// than maxRuns runs under way runs at once, in its caller's goroutine;
// else it waits, and when a run ends those that waited go together, up to
// maxBatch, in one run of decideAny or, with pipeline, one pipeline. No
// goroutine outlives the runs of the decisions that waited for it.
type batcher struct {
	client   RedisClient
	fn       *functions // the store's: functions or scripts
	maxRuns  int
	maxBatch int
	pipeline func() redis.Pipeliner // when set, a batch is a pipeline of runs

	mu    sync.Mutex
	runs  int
	queue []*decision

	// late counts the decisions whose until passed while they waited.
	late atomic.Int64
}

// run runs d alone through c, cut short at d.until. When d.until comes
// before ctx's deadline, a caller giving up mid-run still waits for it,
// until d.until: abandoning a sent request's answer costs the connection.
func (d *decision) run(ctx context.Context, fn *functions, c RedisClient) {
	if dl, ok := ctx.Deadline(); !d.until.IsZero() && (!ok || d.until.Before(dl)) {
		if d.err = ctx.Err(); d.err != nil {
			return // not sent
		}
		rc := newRunCtx(ctx, d.until)
		defer rc.release()
		ctx = rc
	}
	d.line, d.err = fn.run(ctx, c, d.programRun).Text()
}

// do has d decided and returns when its line or error is set, or ctx is
// done (then a run may still hold d: do not release it). A waiting
// decision needs no timer for d.until: runs end by their latest until, and
// one already past is not sent.
func (b *batcher) do(ctx context.Context, d *decision) error {
	d.gone = ctx.Done()
	b.mu.Lock()
	if b.runs < b.maxRuns {
		b.runs++ // nothing waits while a run slot is free: run alone, now
		b.mu.Unlock()
		d.run(ctx, b.fn, b.client)
		b.next()
		return nil
	}
	b.queue = append(b.queue, d)
	b.mu.Unlock()
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next hands the run slot to the decisions that waited, or frees it.
func (b *batcher) next() {
	if batch := b.take(); batch != nil {
		go b.drain(batch)
	}
}

// drain runs batch, then the batches that waited meanwhile, until none
// waits. (A closure over batch would move it to the heap at every next.)
func (b *batcher) drain(batch []*decision) {
	for ; batch != nil; batch = b.take() {
		b.exec(batch)
	}
}

// take returns the decisions that waited, keeping the run slot; nil frees it.
func (b *batcher) take() []*decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.runs--
		return nil
	}
	n := min(len(b.queue), b.maxBatch)
	batch := slices.Clone(b.queue[:n])
	clear(b.queue[:n])
	if b.queue = b.queue[n:]; len(b.queue) == 0 {
		b.queue = b.queue[:0:0] // let the backing array go
	}
	return batch
}

// latestUntil returns the latest until of batch, zero if one has none.
func latestUntil(batch []*decision) time.Time {
	var until time.Time
	for _, d := range batch {
		if d.until.IsZero() {
			return time.Time{}
		}
		if d.until.After(until) {
			until = d.until
		}
	}
	return until
}

// exec runs a batch, as one run or one pipeline, until its latest until,
// and hands each decision its line. Decisions whose callers gave up, or
// whose until has passed, are left out: nothing of theirs reaches Redis.
func (b *batcher) exec(batch []*decision) {
	live := batch[:0]
	now := time.Now()
	for _, d := range batch {
		select {
		case <-d.gone:
			d.err = context.Canceled // nobody reads it: the caller returned
		default:
			if d.until.IsZero() || now.Before(d.until) {
				live = append(live, d)
				continue
			}
			b.late.Add(1)
			d.err = context.DeadlineExceeded
		}
		d.done <- struct{}{}
	}
	if batch = live; len(batch) == 0 {
		return
	}
	ctx := context.Background()
	if until := latestUntil(batch); !until.IsZero() {
		rc := newRunCtx(ctx, until)
		defer rc.release()
		ctx = rc
	}
	if b.pipeline != nil {
		b.execPipeline(ctx, batch)
		return
	}
	var keys []string
	var args []any
	for _, d := range batch {
		keys = append(keys, d.keys...)
		args = append(args, d.args...)
	}
	reply, err := b.fn.run(ctx, b.client, programRun{decideAny, keys, args}).Text()
	lines := strings.Split(reply, "\n")
	if err == nil && len(lines) != len(batch) {
		err = fmt.Errorf("got %d reply lines for %d requests", len(lines), len(batch))
	}
	for i, d := range batch {
		if d.err = err; err == nil {
			d.line = lines[i]
		}
		d.done <- struct{}{}
	}
}

// A runCtx is a context that ends at a deadline and carries its parent's
// values but not its cancellation: pooled, it spares each run the
// context, channel and timer of context.WithDeadline.
type runCtx struct {
	parent   context.Context // for its values
	deadline time.Time
	timer    *time.Timer
	done     chan struct{} // closed when the deadline passes
	expired  atomic.Bool
}

var runCtxs sync.Pool

func newRunCtx(parent context.Context, deadline time.Time) *runCtx {
	c, _ := runCtxs.Get().(*runCtx)
	if c == nil {
		c = &runCtx{parent: parent, deadline: deadline, done: make(chan struct{})}
		c.timer = time.AfterFunc(time.Until(deadline), c.timeout)
		return c
	}
	c.parent, c.deadline = parent, deadline
	c.timer.Reset(time.Until(deadline))
	return c
}

func (c *runCtx) timeout() {
	c.expired.Store(true)
	close(c.done)
}

// release ends the use of c; it is reused if its deadline has not passed.
func (c *runCtx) release() {
	if c.timer.Stop() {
		c.parent = nil
		runCtxs.Put(c)
	}
}

func (c *runCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *runCtx) Done() <-chan struct{}       { return c.done }
func (c *runCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *runCtx) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}
