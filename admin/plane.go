package override

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/lua"
)

// A Store keeps a namespace's overrides in Redis, where every instance
// reads them, and the table it read last in process, where each decision
// finds its override without a call to Redis. A change is one script run
// that also raises the hash's version; an instance reads the overrides
// again, all of them in one run, when it sees the version move, and
// replaces its table whole: a decision sees the old overrides or the new.
// The table stays while Redis fails; an instance that has read nothing
// yet has no table (Table returns nil).
type Store struct {
	client redis.Scripter
	key    string
	life   time.Duration
	most   int

	mu      sync.Mutex // one read at a time
	version string     // of table; "" before the first read
	table   atomic.Pointer[Table]
}

// Life is how long the overrides stay in Redis after the last change or
// the last read that renewed them (a read renews them once half of it has
// passed): as long as any instance runs, and that long after.
const Life = 30 * 24 * time.Hour

// NewStore returns the store of namespace's overrides, at
// prefix + "overrides:{" + namespace + "}".
func NewStore(client redis.Scripter, prefix, namespace string) *Store {
	return &Store{client: client, key: prefix + "overrides:{" + namespace + "}", life: Life, most: MaxOverrides}
}

var script = redis.NewScript(lua.Source("override.lua"))

// Table returns the overrides read last, nil before the first read.
func (s *Store) Table() *Table { return s.table.Load() }

// Set stores o, checked first, in place of the override of its policy
// and key, then reads the overrides, so that this instance applies it at
// once.
func (s *Store) Set(ctx context.Context, o Override) error {
	if err := o.Check(); err != nil {
		return err
	}
	value, err := json.Marshal(stored{Quota: o.Quota, WindowMS: o.Window.Milliseconds(), Shadow: o.Shadow})
	if err != nil {
		return err
	}
	err = script.Run(ctx, s.client, []string{s.key}, "set", field(o.Policy, o.Key), value, s.life.Milliseconds(), s.most).Err()
	if err != nil && strings.Contains(err.Error(), "overrides full") {
		return fmt.Errorf("%w: %d overrides are set, the most a namespace holds: delete one first", ErrInvalid, s.most)
	}
	if err != nil {
		return fmt.Errorf("override: setting %s: %w", o.Policy, err)
	}
	return s.Sync(ctx)
}

// Delete removes the override of policy and key, if any, then reads the
// overrides.
func (s *Store) Delete(ctx context.Context, policy, key string) error {
	if err := script.Run(ctx, s.client, []string{s.key}, "del", field(policy, key), s.life.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("override: deleting from %s: %w", policy, err)
	}
	return s.Sync(ctx)
}

// Sync reads the overrides when their version is not the one read last:
// one script run, which carries them all when it moved. On an error the
// table read last stays.
func (s *Store) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply, err := script.Run(ctx, s.client, []string{s.key}, "read", s.version, s.life.Milliseconds()).StringSlice()
	if err != nil {
		return fmt.Errorf("override: reading: %w", err)
	}
	if len(reply) == 0 || len(reply)%2 != 1 {
		return errors.New("override: reading: a reply of the wrong shape")
	}
	if reply[0] == s.version {
		return nil
	}
	list := make([]Override, 0, len(reply)/2)
	for i := 1; i < len(reply); i += 2 {
		o, err := parse(reply[i], reply[i+1])
		if err != nil {
			return err
		}
		list = append(list, o)
	}
	t, err := NewTable(list)
	if err != nil {
		return fmt.Errorf("override: the overrides in Redis: %w", err)
	}
	s.table.Store(t)
	s.version = reply[0]
	return nil
}

// Run calls Sync every period until ctx ends, and reports each error to
// failed (nil: none); a table read stays through errors.
func (s *Store) Run(ctx context.Context, every time.Duration, failed func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := s.Sync(ctx); err != nil && failed != nil && ctx.Err() == nil {
			failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stored is an override's value in Redis.
type stored struct {
	Quota    int   `json:"quota"`
	WindowMS int64 `json:"window_ms,omitempty"`
	Shadow   bool  `json:"shadow,omitempty"`
}

// field is the hash field of policy and key: a limit's name has no
// newline, so the first one ends it.
func field(policy, key string) string { return policy + "\n" + key }

// parse returns the override of a hash field and its value.
func parse(f, value string) (Override, error) {
	policy, key, ok := strings.Cut(f, "\n")
	var v stored
	if !ok || json.Unmarshal([]byte(value), &v) != nil {
		return Override{}, fmt.Errorf("override: the overrides in Redis hold a field that is not one: %q", f)
	}
	return Override{Policy: policy, Key: key, Quota: v.Quota, Window: time.Duration(v.WindowMS) * time.Millisecond, Shadow: v.Shadow}, nil
}
