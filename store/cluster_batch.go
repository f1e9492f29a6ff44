package store

import (
	"context"
	"maps"
	"sync"

	"github.com/redis/go-redis/v9"
)

// clusterBatcher batches a Redis Cluster's decisions, with a batcher per
// master, so a slow or down master holds up and fails only its own. One
// run may not touch several slots, so a batch is a pipeline of each
// decision's own run; the client follows MOVED and ASK within it.
type clusterBatcher struct {
	client   *redis.ClusterClient
	fn       *functions
	maxRuns  int // per master
	maxBatch int

	mu sync.Mutex
	// masters holds a batcher per master's address. Adding one drops the
	// idle ones, so masters that left the cluster leave none behind.
	masters map[string]*batcher
}

// do is batcher.do for the batcher of the master that owns d's slot.
func (c *clusterBatcher) do(ctx context.Context, d *decision) error {
	master, err := c.client.MasterForKey(ctx, d.keys[0])
	if err != nil { // no map of the slots: d runs alone
		d.run(ctx, c.fn, c.client)
		return nil
	}
	return c.batcher(master.Options().Addr).do(ctx, d)
}

func (c *clusterBatcher) batcher(addr string) *batcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.masters[addr]; b != nil {
		return b
	}
	maps.DeleteFunc(c.masters, func(_ string, b *batcher) bool { return b.idle() })
	b := &batcher{client: c.client, fn: c.fn, maxRuns: c.maxRuns, maxBatch: c.maxBatch, pipeline: c.client.Pipeline}
	c.masters[addr] = b
	return b
}

// idle reports whether b has no run under way and nothing waiting. A
// batcher dropped from the map still works for a caller that holds it.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs == 0 && len(b.queue) == 0
}

// execPipeline sends batch as pipelines (FCALL, EVALSHA for the rest,
// EVAL where Redis lacked the script) as functions.run does for one,
// resending only what provably did not run. Each decision stays one atomic
// run and gets its own command's error.
func (b *batcher) execPipeline(ctx context.Context, batch []*decision) {
	cmds := make([]*redis.Cmd, len(batch))
	todo := make([]int, len(batch))
	for i := range todo {
		todo[i] = i
	}
	for again := 0; ; again++ {
		b.pipelineOnce(ctx, batch, todo, cmds)
		todo = failed(cmds, todo, notRun)
		if len(todo) == 0 || again == maxSendAgain || pause(ctx, again) != nil {
			break
		}
	}
	for i, d := range batch {
		if d.err = settle(ctx, cmds[i]).Err(); d.err == nil {
			d.line, _ = cmds[i].Val().(string) // decisions' answers are text, charges' a number
		}
		d.done <- struct{}{}
	}
}

// pipelineOnce sends the decisions of batch at todo once, into cmds.
func (b *batcher) pipelineOnce(ctx context.Context, batch []*decision, todo []int, cmds []*redis.Cmd) {
	if b.fn.useFunctions() {
		todo = b.fcallPipeline(ctx, batch, todo, cmds)
	}
	b.sendPipeline(ctx, evalShaVerb, batch, todo, cmds)
	b.sendPipeline(ctx, evalVerb, batch, failed(cmds, todo, noScript), cmds)
}

// fcallPipeline sends batch's decisions at todo as FCALL, again once the
// library is loaded where missing; it returns those to run as scripts.
func (b *batcher) fcallPipeline(ctx context.Context, batch []*decision, todo []int, cmds []*redis.Cmd) []int {
	b.sendPipeline(ctx, fcallVerb, batch, todo, cmds)
	if missing := failed(cmds, todo, functionMissing); len(missing) > 0 {
		if _, err := b.fn.loadShared(ctx, b.client); err == nil {
			b.sendPipeline(ctx, fcallVerb, batch, missing, cmds)
		}
	}
	var scripts []int
	for _, i := range todo {
		switch err := cmds[i].Err(); {
		case err == nil:
			b.fn.worked()
		case functionMissing(err), b.fn.refuse(err):
			scripts = append(scripts, i)
		}
	}
	return scripts
}

// sendPipeline sends the decisions of batch at todo as one pipeline of v.
func (b *batcher) sendPipeline(ctx context.Context, v verb, batch []*decision, todo []int, cmds []*redis.Cmd) {
	if len(todo) == 0 {
		return
	}
	pipe := b.pipeline()
	for _, i := range todo {
		cmds[i] = send(ctx, pipe, v, batch[i].programRun)
	}
	pipe.Exec(ctx)
}

// failed returns the indexes in todo whose commands failed as is says.
func failed(cmds []*redis.Cmd, todo []int, is func(error) bool) []int {
	var out []int
	for _, i := range todo {
		if is(cmds[i].Err()) {
			out = append(out, i)
		}
	}
	return out
}
