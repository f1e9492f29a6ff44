package override

import (
	"time"
)

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

// A Denial is a request that a policy denied.
type Denial struct {
	Policy string
	Key    string        // as the store is given it, after the namespace and route
	Shadow bool          // a Shadow limit would have denied it: it passed
	Banned time.Duration // the key is banned for this long yet (see ratelimit.Ban)
}
