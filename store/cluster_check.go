package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/internal/clusterslot"
)

// slotOwner is a range of slots and the master serving it.
type slotOwner struct {
	start, end int
	id         string // the master's node ID; its address when Redis gave none
	addr       string // the master's address
}

// clusterOwners reloads cluster's map of the slots (through ForEachMaster,
// the one call of go-redis v9 that reloads it before it returns) and
// returns the owners of every slot, as all its masters agree: a later
// reload from any of them keeps the routing the probe checked.
func clusterOwners(ctx context.Context, cluster *redis.ClusterClient) ([]slotOwner, error) {
	var mu sync.Mutex
	var views [][]slotOwner
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
		//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; the store supports 5.0 and later.
		ranges, err := master.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER SLOTS on %s: %w", master.Options().Addr, err)
		}
		view, err := ownersOf(ranges)
		if err != nil {
			return fmt.Errorf("%s: %w", master.Options().Addr, err)
		}
		mu.Lock()
		views = append(views, view)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(views) == 0 {
		return nil, errors.New("the cluster has no master")
	}
	for _, v := range views[1:] {
		if !slices.Equal(v, views[0]) {
			return nil, errors.New("the masters disagree on who owns the slots")
		}
	}
	return views[0], nil
}

// ownersOf returns CLUSTER SLOTS's owners by slot; every slot must have one.
func ownersOf(ranges []redis.ClusterSlot) ([]slotOwner, error) {
	owners := make([]slotOwner, 0, len(ranges))
	for _, r := range ranges {
		if len(r.Nodes) == 0 {
			continue
		}
		n := r.Nodes[0]
		owners = append(owners, slotOwner{start: r.Start, end: r.End, id: cmp.Or(n.ID, n.Addr), addr: n.Addr})
	}
	slices.SortFunc(owners, func(a, b slotOwner) int { return a.start - b.start })
	next := 0
	for _, o := range owners {
		if o.start != next {
			break
		}
		next = o.end + 1
	}
	if next != clusterslot.Count {
		return nil, fmt.Errorf("slot %d has no master", next)
	}
	return owners, nil
}

// routesTo checks that cluster sends keys of o's slots, without a MOVED,
// to o's address or to the node that says it has o's node ID.
func routesTo(ctx context.Context, cluster *redis.ClusterClient, o slotOwner) error {
	master, err := cluster.MasterForKey(ctx, "{"+clusterslot.Tag(o.start)+"}")
	if err != nil {
		return err
	}
	addr := master.Options().Addr
	if addr == o.addr || addr == o.id {
		return nil
	}
	got, err := master.ClusterMyID(ctx).Result()
	if err != nil {
		return fmt.Errorf("the client sends slot %d to %s, and CLUSTER SLOTS names %s; CLUSTER MYID, which would tell whether they are one node: %w", o.start, addr, o.addr, err)
	}
	if got != o.id {
		return fmt.Errorf("the client sends slot %d to %s, not to its master %s", o.start, addr, o.addr)
	}
	return nil
}
