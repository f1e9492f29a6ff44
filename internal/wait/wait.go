// Package wait waits for a time or a context, whichever comes first.
package wait

import (
	"context"
	"time"
)

// For waits for d, or until ctx is done: then it returns ctx's error.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
