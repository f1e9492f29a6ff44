package store

import (
	"fmt"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// What the three stores do alike: check a request, shape its decision,
// and spread keys over shards.

// compiled is what the stores need of one limit, worked out when its
// ratelimit.Limits was built.
type compiled = spec.Limit

// maxKeyLength is the longest key a store accepts, in bytes.
const maxKeyLength = 1024

// checkRequest checks what a Limits cannot have checked already, the key
// and the cost, and returns the limits' compiled set.
func checkRequest(key string, cost int, limits *ratelimit.Limits) (*spec.Set, error) {
	set := spec.Of(limits)
	switch {
	case set == nil:
		return nil, fmt.Errorf("%w: the limits are nil or zero; build them with ratelimit.NewLimits", ratelimit.ErrInvalid)
	case key == "":
		return nil, fmt.Errorf("%w: key is empty", ratelimit.ErrInvalid)
	case len(key) > maxKeyLength:
		return nil, fmt.Errorf("%w: key is %d bytes long; at most %d are allowed", ratelimit.ErrInvalid, len(key), maxKeyLength)
	case cost < 1:
		return nil, fmt.Errorf("%w: cost must be at least 1, got %d", ratelimit.ErrInvalid, cost)
	case int64(cost) > set.MinCapacity:
		for i, c := range set.Limits {
			if int64(cost) > c.Capacity {
				return nil, fmt.Errorf("%w: cost %d exceeds the capacity %d of limits[%d] (%v), so the request could never pass", ratelimit.ErrInvalid, cost, c.Capacity, i, limits.At(i))
			}
		}
	}
	return set, nil
}

// maxInline is how many results a store builds on the stack before
// ratelimit.MakeDecision copies them: a Decision of up to maxInline limits
// costs at most the one allocation MakeDecision makes for several, and one
// of one limit none.
const maxInline = 4

// decisionFor returns a denial by limits, one Result each with only its
// Limit filled in, for the caller to complete through Results.
func decisionFor(limits *ratelimit.Limits) ratelimit.Decision {
	var buf [maxInline]ratelimit.Result
	rs := buf[:0]
	for i := range limits.Len() {
		rs = append(rs, ratelimit.Result{Limit: limits.At(i)})
	}
	return ratelimit.MakeDecision(rs...)
}

// keyHash is FNV-1a of key: it spreads keys over the shards of the
// deny cache and of the Fallback's backlog.
func keyHash(key string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return h
}
