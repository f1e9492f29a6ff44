package override

import (
	"context"
	"time"
)

// A Keeper is the store's door to what the package admin keeps in Redis
// beside the counters: a namespace's overrides, and the keys its
// Limiters denied most (see store.Redis.Overrides). It runs the
// library's programs override.lua and top.lua as the store runs its
// own, and reports a misconfigured Redis as the store does.
type Keeper interface {
	// Read returns the overrides' version and, when it is not known, each
	// override's hash field and stored value, in turn. It renews their
	// life when less than half of it is left.
	Read(ctx context.Context, known string, life time.Duration) (version string, fields []string, err error)

	// Change stores value at field (op "set"); sets the shadow of the
	// override at field to value, "shadow", "enforced" or "own" (op
	// "mode"); or deletes it (op "del", value ""). A new field past most
	// fails with FullReply.
	Change(ctx context.Context, op, field, value string, life time.Duration, most int) error

	// PutTop replaces this instance's fields of the keys denied most,
	// field and summary in turn, and drops every field older than age.
	PutTop(ctx context.Context, life, age time.Duration, fields []string) error

	// GetTop returns each instance and its summary, in turn, of window
	// and policy, not older than age.
	GetTop(ctx context.Context, age time.Duration, window, policy string) ([]string, error)
}

// FullReply is the error of a change beyond the overrides a namespace holds.
const FullReply = "ratelimit: overrides full"
