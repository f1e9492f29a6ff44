package store

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// clusterBatcher batches the decisions of a Redis Cluster, with a batcher
// per master. A decision's keys share a hash tag, so it lives in one slot,
// but a function or script may not touch keys of several slots, so a batch
// is not one run, as on a single server, but one pipeline of each
// decision's own run, sent to the master that owns the batch's slots. The
// ClusterClient sends it: it follows MOVED and ASK, so a batch made
// before a resharding or a failover still reaches the masters that own
// its slots when it is sent.
//
// A batcher per master keeps the masters apart: a master that is slow or
// down holds only the run slots of its own batcher, so the decisions of
// other masters' slots neither wait for it nor fail with it.
type clusterBatcher struct {
	client   *redis.ClusterClient
	fn       *functions
	maxRuns  int // per master
	maxBatch int

	mu sync.Mutex
	// masters holds a batcher per master's address. When a master is
	// added, those with nothing under way are dropped, so masters that
	// left the cluster leave no batcher behind.
	masters map[string]*batcher
}

func newClusterBatcher(client *redis.ClusterClient, fn *functions, maxRuns, maxBatch int) *clusterBatcher {
	return &clusterBatcher{client: client, fn: fn, maxRuns: maxRuns, maxBatch: maxBatch, masters: make(map[string]*batcher)}
}

// do is batcher.do for the batcher of the master that owns d's slot, as
// the client's map of the slots says now.
func (c *clusterBatcher) do(ctx context.Context, d *decision) error {
	master, err := c.client.MasterForKey(ctx, d.keys[0])
	if err != nil {
		// The client has no map of the slots: d runs alone, with the
		// client's own retries.
		d.run(ctx, c.fn, c.client)
		return nil
	}
	return c.batcher(master.Options().Addr).do(ctx, d)
}

// batcher returns the batcher of the master at addr.
func (c *clusterBatcher) batcher(addr string) *batcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.masters[addr]; b != nil {
		return b
	}
	for a, b := range c.masters {
		if b.idle() {
			delete(c.masters, a)
		}
	}
	b := &batcher{client: c.client, fn: c.fn, maxRuns: c.maxRuns, maxBatch: c.maxBatch, pipeline: c.client.Pipeline}
	c.masters[addr] = b
	return b
}

// idle reports whether b has no run under way and nothing waiting. A
// caller that took b from the map just before it was dropped still uses
// it, alone: a batcher needs no map to work.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs == 0 && len(b.queue) == 0
}

// execPipeline sends batch as one pipeline, of FCALL while the store calls
// functions (see functions), then those that found the library missing
// again once it is loaded; and of EVALSHA, each of its decision's own
// script, for the rest (Redis refused FCALL, or the store runs scripts),
// then those Redis did not have the script for as a pipeline of EVAL:
// what functions.run and redis.Script.Run do for one. Each command sent
// again is one that did not run: the commands of the store's programs go
// at most once (see onceCmd), and those whose answers prove that they did
// not run go again, as functions.run sends one. A decision stays one run,
// atomic and all or nothing, and gets the error of its own command: a
// master that fails fails only the decisions of its slots.
func (b *batcher) execPipeline(ctx context.Context, batch []*decision) {
	cmds := b.pipelineOnce(ctx, batch)
	for again := 0; again < maxSendAgain; again++ {
		var unrun []*decision
		var at []int
		for i, cmd := range cmds {
			if notRun(cmd.Err()) {
				unrun, at = append(unrun, batch[i]), append(at, i)
			}
		}
		if len(unrun) == 0 || pause(ctx, again) != nil {
			break
		}
		for j, cmd := range b.pipelineOnce(ctx, unrun) {
			cmds[at[j]] = cmd
		}
	}
	for i, d := range batch {
		if d.err = settle(ctx, cmds[i]).Err(); d.err == nil {
			d.line, _ = cmds[i].Val().(string) // decisions' answers are text, charges' a number
		}
		d.done <- struct{}{}
	}
}

// pipelineOnce sends batch as execPipeline says, once, and returns each
// decision's command.
func (b *batcher) pipelineOnce(ctx context.Context, batch []*decision) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(batch))
	var scripts []int // the decisions to run as scripts
	if b.fn.useFunctions() {
		scripts = b.fcallPipeline(ctx, batch, cmds)
	} else {
		scripts = make([]int, len(batch))
		for i := range scripts {
			scripts[i] = i
		}
	}
	if len(scripts) > 0 {
		pipe := b.pipeline()
		for _, i := range scripts {
			d := batch[i]
			cmds[i] = evalSha(ctx, pipe, d.programRun)
		}
		pipe.Exec(ctx) // each command holds its own reply or error
		var missing []int
		for _, i := range scripts {
			if noScript(cmds[i].Err()) {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			pipe = b.pipeline()
			for _, i := range missing {
				d := batch[i]
				cmds[i] = eval(ctx, pipe, d.programRun)
			}
			pipe.Exec(ctx)
		}
	}
	return cmds
}

// fcallPipeline sends batch as one pipeline of FCALL into cmds; when a
// master lacked the library, it loads it and sends those calls again. It
// returns the decisions that did not run and are to run as scripts: those
// Redis refused FCALL for, and those that found the library missing when
// it could not be loaded, or again once loaded.
func (b *batcher) fcallPipeline(ctx context.Context, batch []*decision, cmds []*redis.Cmd) []int {
	pipe := b.pipeline()
	for i, d := range batch {
		cmds[i] = fcall(ctx, pipe, d.programRun)
	}
	pipe.Exec(ctx)
	var missing, scripts []int
	for i, cmd := range cmds {
		if functionMissing(cmd.Err()) {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		if _, err := b.fn.loadShared(ctx, b.client); err == nil {
			pipe = b.pipeline()
			for _, i := range missing {
				d := batch[i]
				cmds[i] = fcall(ctx, pipe, d.programRun)
			}
			pipe.Exec(ctx)
		}
	}
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case err == nil:
			b.fn.worked()
		case functionMissing(err), b.fn.refuse(err):
			scripts = append(scripts, i)
		}
	}
	return scripts
}
