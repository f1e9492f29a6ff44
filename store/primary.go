package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/store/internal/fallback"
)

// primary is the Redis store as a Fallback's, where package fallback meets it.
type primary struct{ r *Redis }

var _ fallback.Primary = primary{}

// request returns c as the Redis store's decisions take it.
func (primary) request(c *fallback.Call) *request {
	return &request{key: c.Key, cost: c.Cost, limits: c.Limits, set: c.Set, deadline: c.Deadline, until: c.Until}
}

func (p primary) Decide(ctx context.Context, c fallback.Call) (ratelimit.Decision, error) {
	return p.r.decide(ctx, p.request(&c))
}

func (p primary) End(ctx context.Context, c fallback.Call, usage int, slot string) (ratelimit.Decision, error) {
	return p.r.end(ctx, p.request(&c), usage, slot)
}

func (p primary) Forget(slot string) {
	if id, err := strconv.ParseInt(slot, 10, 64); err == nil {
		p.r.slots.Drop(id)
		p.r.holds.Drop(id)
	}
}

func (p primary) Peek(ctx context.Context, c fallback.Call) (ratelimit.Decision, error) {
	return p.r.peek(ctx, p.request(&c))
}

func (p primary) Reset(ctx context.Context, key string, limits *ratelimit.Limits) error {
	return p.r.Reset(ctx, key, limits)
}

// Probe checks Redis, and reads its clock, through a probe client (see
// probeClient); Recover then readies the store's own client (Redis.warm).
func (p primary) Probe(ctx context.Context, what fallback.Probe, now func() int64) (int64, error) {
	if what == fallback.ReadClock {
		return p.offset(ctx, p.r.client, now)
	}
	c, end, err := probeClient(ctx, p.r.client)
	if err != nil {
		return 0, misconfigured(err, p.r.prefix, p.r.cluster) // a certificate the client rejects
	}
	var offset int64
	if err = p.r.checkThrough(ctx, c); err == nil && what != fallback.Check {
		offset, err = p.offset(ctx, c, now)
	}
	end()
	if err != nil || what == fallback.Check {
		return 0, err
	}
	return offset, p.r.warm(ctx)
}

// offset is Redis's clock, read through c, minus now's, read around it.
func (p primary) offset(ctx context.Context, c RedisClient, now func() int64) (int64, error) {
	before := now()
	redisNow, err := p.r.time(ctx, c)
	after := now()
	if err != nil {
		return 0, err
	}
	return redisNow - (before+after)/2, nil
}

// Charge brings keys' backlogs to Redis, each in one run of charge:
// resets first (deleting the key's ban too, as a Reset does), then the
// admissions since, at their times on Redis's clock; strikes and bans
// decided in process stay there. Where the client pipelines, the runs go
// in one pipeline (the client splits it by master); else one by one.
func (p primary) Charge(ctx context.Context, charges []*fallback.Charge, offset int64) {
	pl, pipelines := p.r.client.(interface{ Pipeline() redis.Pipeliner })
	todo := charges
	for range 2 { // again for those whose calendar periods did not hold Redis's clock
		runs := make([]*decision, len(todo))
		for i, c := range todo {
			keys, args := chargeArgs(p.r.prefix, c, offset)
			runs[i] = &decision{programRun: programRun{chargeProgram, keys, args}, done: make(chan struct{}, 1)}
		}
		if pipelines {
			(&batcher{client: p.r.client, fn: p.r.fn, pipeline: pl.Pipeline}).execPipeline(ctx, runs)
		} else {
			for _, d := range runs {
				d.err = p.r.fn.run(ctx, p.r.client, d.programRun).Err()
			}
		}
		var missed []*fallback.Charge
		for i, c := range todo {
			if c.Err = runs[i].err; c.Err == nil {
				continue
			}
			if now, miss := calendarTime(c.Err); miss {
				for _, e := range c.Limits {
					if e.Limit.Calendar != nil {
						e.Limit.Calendar.Refresh(now)
					}
				}
				missed = append(missed, c)
			}
		}
		if todo = missed; len(todo) == 0 {
			break
		}
	}
	for _, c := range charges {
		if p.r.denied != nil && slices.ContainsFunc(c.Limits, func(e fallback.ChargedLimit) bool { return e.Reset }) {
			p.r.denied.reset(c.Key)
		}
		if c.Err != nil {
			c.Err = fmt.Errorf("ratelimit: redis: bringing to Redis what was decided in process for %s: %w", keyRef(c.Key, nil), misconfigured(c.Err, p.r.prefix, p.r.cluster))
		}
	}
}

// Explain classifies err (see faultOf), naming its cause and problems.
func (primary) Explain(ctx context.Context, err error) fallback.Failure {
	why := fallback.Failure{Fault: faultOf(ctx, err), Cause: causeOf(err)}
	for _, m := range misconfigurations(err) {
		why.Problems = append(why.Problems, fallback.Problem{What: m.problem, Fix: m.fix, Err: m.err})
	}
	return why
}
