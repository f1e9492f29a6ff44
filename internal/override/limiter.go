package override

import "time"

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
