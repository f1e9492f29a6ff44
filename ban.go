package ratelimit

import (
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// maxBan bounds every duration of a [Ban].
const maxBan = 366 * 24 * time.Hour

// A Ban blocks a key that keeps getting denied, for longer each time it
// comes back, like fail2ban: once a key has been denied After times within
// Within, it is banned for For, and everything it asks is denied until the
// ban ends, whatever its limits have left. A ban that starts less than Max
// after the previous one ended lasts twice as long as that one, up to Max;
// after Max without a ban, the next one lasts For again.
//
// The denials count from the first one: After of them within Within of
// it start a ban; a denial Within or more after it starts a new count.
// Requests denied by a ban do not count, and allowed requests change
// nothing. The store decides the ban in the same atomic step as the
// limits, and its state expires with the last of its periods.
//
// Give a Limiter a ban with [WithBan], or a set of limits with
// [Limits.WithBan]. A Ban is a plain value; the zero Ban is not valid.
type Ban struct {
	// After is how many denials start a ban: at least 1.
	After int

	// Within is the period After denials must fall in, counted from the
	// first.
	Within time.Duration

	// For is the first ban's length.
	For time.Duration

	// Max is the longest ban, and the quiet time after which a key's next
	// ban is For again. Zero means For: every ban lasts For.
	Max time.Duration
}

// String describes b, for example "ban after 3 denials in 1m: 1m,
// doubling up to 1h".
func (b Ban) String() string {
	s := fmt.Sprintf("ban after %d denials in %s: %s", b.After, formatDuration(b.Within), formatDuration(b.For))
	if b.Max > b.For {
		s += ", doubling up to " + formatDuration(b.Max)
	}
	return s
}

// check returns the first invalid field and what is wrong with it, or
// two empty strings.
func (b Ban) check() (field, problem string) {
	if b.After < 1 {
		return "After", fmt.Sprintf("must be at least 1, got %d", b.After)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Within", b.Within}, {"For", b.For}, {"Max", b.Max}} {
		switch {
		case f.name == "Max" && f.d == 0:
		case f.d < time.Millisecond || f.d > maxBan:
			return f.name, fmt.Sprintf("must be from 1ms to %s, got %v", formatDuration(maxBan), f.d)
		case f.d%time.Millisecond != 0:
			return f.name, fmt.Sprintf("must be a whole number of milliseconds, got %v", f.d)
		}
	}
	if b.Max != 0 && b.Max < b.For {
		return "Max", fmt.Sprintf("must not be shorter than For %v, got %v", b.For, b.Max)
	}
	return "", ""
}

// compile returns the integers the stores need of a valid b.
func (b Ban) compile() *spec.Ban {
	if b.Max == 0 {
		b.Max = b.For
	}
	return spec.NewBan(int64(b.After), int64(b.Within/time.Microsecond), int64(b.For/time.Microsecond), int64(b.Max/time.Microsecond))
}

// WithBan returns a copy of s whose keys are banned as b says (see
// [Ban]), replacing any ban s had. It reports an invalid field of b as an
// error wrapping [ErrInvalid].
func (s *Limits) WithBan(b Ban) (*Limits, error) {
	if s == nil || s.spec == nil {
		return nil, fmt.Errorf("%w: Limits.WithBan: the limits are nil or zero; build them with NewLimits", ErrInvalid)
	}
	if field, problem := b.check(); field != "" {
		return nil, fmt.Errorf("%w: Ban.%s %s", ErrInvalid, field, problem)
	}
	c := &Limits{limits: s.limits, ban: b}
	c.spec = s.spec.WithBan(b.compile())
	return c, nil
}

// Ban returns the ban of s, and whether it has one.
func (s *Limits) Ban() (Ban, bool) { return s.ban, s.ban != Ban{} }
