package override

import (
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// Fixed returns overrides of t, which never change, for tests: as a Plane that read t.
func Fixed(t *Table) ratelimit.Overrides { return fixed{t} }

type fixed struct{ t *Table }

func (f fixed) Apply(limits []ratelimit.Limit, key string) ([]ratelimit.Limit, bool, bool) {
	return f.t.Apply(limits, key)
}

func (fixed) Attach(*ratelimit.Limiter, string, ratelimit.Store, func(ratelimit.Request, ratelimit.Event), map[string][]ratelimit.Limit) {
}

func (fixed) Denied(string, string, bool, time.Duration) {}
