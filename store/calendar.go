package store

import (
	"strconv"
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/spec"
)

// compiled is what the stores need of one limit (see limitset).
type compiled = spec.Limit

// calendarMiss reports whether err is a script's answer that Redis's
// clock lay outside the calendar periods it was given, and then moves
// set's calendars to Redis's time, so that the caller may ask again.
func calendarMiss(err error, set *spec.Set) bool {
	if !set.Calendar {
		return false
	}
	now, ok := calendarTime(err)
	for i := range set.Limits {
		if c := set.Limits[i].Calendar; c != nil && ok {
			c.Refresh(now)
		}
	}
	return ok
}

// calendarTime returns Redis's time from a calendar miss in err.
func calendarTime(err error) (int64, bool) {
	msg := err.Error()
	i := strings.Index(msg, spec.CalendarMiss)
	if i < 0 {
		return 0, false
	}
	digits := msg[i+len(spec.CalendarMiss):]
	if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		digits = digits[:end]
	}
	now, err := strconv.ParseInt(digits, 10, 64)
	return now, err == nil
}
