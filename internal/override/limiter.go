package override

import (
	"net/http"
	"time"
)

// Hooks are what a ratelimit.Limiter calls of its overrides (see
// ratelimit.Overrides).
type Hooks struct {
	// Table returns the overrides in force, nil while none are known.
	Table func() *Table

	// Attach is called by ratelimit.New with what the Limiter tells of
	// itself. An implementation refuses an override that a Limiter
	// attached finds wrong.
	Attach func(Limiter)

	// Denied is told of each request that policy denied, or would have
	// denied for a Shadow limit, with its key as the store is given it
	// after the namespace and route. It must be quick and safe for
	// concurrent use.
	Denied func(policy, key string)
}

// A Limiter is what a ratelimit.Limiter tells its overrides of itself
// when it is built (Hooks.Attach).
type Limiter struct {
	Namespace string

	// Check reports whether o's policy may be one of the Limiter's, and
	// what is wrong with o for it, if anything.
	Check func(o Override) (known bool, err error)

	// Has reports whether policy is the name of one of the Limiter's
	// limits of WithLimits or WithRoutes.
	Has func(policy string) bool

	// Policies returns the Limiter's limits of WithLimits and WithRoutes,
	// as configured, by route.
	Policies func() []Policy

	// Store is the Limiter's store.
	Store any

	// Audit tells the Limiter's observer, if it has one, of a change an
	// operator made with the request r: who made it, what it changed,
	// and the override before and after, as JSON ("" for none).
	Audit func(r *http.Request, who, what, before, after string)
}

// A Policy is a limit of a Limiter as configured.
type Policy struct {
	Name      string
	Route     string // the route table's pattern; "" for WithLimits'
	Algorithm string
	Quota     int
	Window    time.Duration
	Shadow    bool
}
