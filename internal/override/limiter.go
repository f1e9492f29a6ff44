package override

import (
	"net/http"
	"time"
)

// A Source is what a ratelimit.Limiter given overrides (WithOverrides)
// asks of them: the package admin's Plane.
type Source interface {
	// Table returns the overrides in force, nil while none are known.
	Table() *Table

	// Attach is called by ratelimit.New with the Limiter. An
	// implementation refuses an override an attached Limiter finds wrong.
	Attach(Limiter)

	// Denied is told of each request a policy denied, or would have for
	// a Shadow limit. It must be quick and safe for concurrent use.
	Denied(d Denial)
}

// A Denial is a request that a policy denied.
type Denial struct {
	Policy string
	Key    string        // as the store is given it, after the namespace and route
	Shadow bool          // a Shadow limit would have denied it: it passed
	Banned time.Duration // the key is banned for this long yet (see ratelimit.Ban)
}

// A Limiter is what a ratelimit.Limiter tells its overrides of itself
// (Source.Attach). It also has a method Store() ratelimit.Store, which
// this package cannot name.
type Limiter interface {
	Namespace() string

	// Check reports whether o's policy may be one of the Limiter's, and
	// what is wrong with o for it, if anything.
	Check(o Override) (known bool, err error)

	// Policies returns the Limiter's limits of WithLimits and WithRoutes,
	// as configured, and of the sets WithLimitsFunc returned so far, by
	// route.
	Policies() []Policy

	// Audit tells the Limiter's observer, if it has one, of a change an
	// operator made with the request r: who made it, what it changed,
	// and the override before and after, as JSON ("" for none).
	Audit(r *http.Request, who, what, before, after string)
}

// A Policy is a limit of a Limiter as configured.
type Policy struct {
	Name       string
	Route      string // the route table's pattern; "" for WithLimits'
	Algorithm  string
	Quota      int
	Window     time.Duration
	Shadow     bool
	PerRequest bool // of a set WithLimitsFunc returned
}
