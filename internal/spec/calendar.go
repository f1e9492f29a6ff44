package spec

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	// The time-zone database, for a machine without one (scratch or
	// distroless): calendar limits name their zone. See docs/limits.md.
	_ "time/tzdata"
)

// Calendar algorithm codes, after the four of ratelimit.Algorithm.
const (
	Daily uint8 = iota + TokenBucket + 1
	Weekly
	Monthly
)

// IsCalendar reports whether algorithm counts in calendar periods.
func IsCalendar(algorithm uint8) bool { return algorithm >= Daily && algorithm <= Monthly }

// maxPeriodSeconds bounds a period's length in seconds, 31 days and an
// hour with room to spare: two are packed in one script argument.
const maxPeriodSeconds = 1 << 22

// Calendar is the calendar of a Daily, Weekly or Monthly limit: its
// periods, in a time zone, and the script arguments naming the periods
// around a time, kept for the last time asked about.
type Calendar struct {
	Algorithm uint8
	Location  *time.Location
	Weekday   time.Weekday // Weekly: the day weeks start on
	quota     string
	usage     bool   // charged from usage: the code is "C"
	cost      string // a fixed cost, after the code; "" without

	bounds atomic.Pointer[bounds]
}

// bounds are three consecutive period starts, in µs, and their args.
type bounds struct {
	b0, b1, b2 int64
	args       LimitArgs
}

// LoadLocation returns the time zone named zone ("" is UTC), from the
// system's database or, without one, the one embedded in the binary.
func LoadLocation(zone string) (*time.Location, error) { return time.LoadLocation(zone) }

// NewCalendar returns the calendar of a valid calendar limit.
func NewCalendar(algorithm uint8, quota int64, loc *time.Location, weekday time.Weekday) *Calendar {
	return &Calendar{Algorithm: algorithm, Location: loc, Weekday: weekday, quota: strconv.FormatInt(quota, 10)}
}

// Start returns the start of the period that holds t.
func (c *Calendar) Start(t time.Time) time.Time {
	t = t.In(c.Location)
	y, m, d := t.Date()
	back, days := 0, 1 // to the period's start, and a period's days
	switch c.Algorithm {
	case Monthly:
		return time.Date(y, m, 1, 0, 0, 0, 0, c.Location)
	case Weekly:
		back, days = (int(t.Weekday())-int(c.Weekday)+7)%7, 7
	}
	s := time.Date(y, m, d-back, 0, 0, 0, 0, c.Location)
	if s.After(t) { // midnight skipped by a clock change: a later start
		s = time.Date(y, m, d-back-days, 0, 0, 0, 0, c.Location)
	}
	return s
}

// Next returns the start of the period after the one starting at start.
func (c *Calendar) Next(start time.Time) time.Time {
	start = start.In(c.Location)
	y, m, d := start.Date()
	switch c.Algorithm {
	case Monthly:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, c.Location)
	case Weekly:
		return time.Date(y, m, d+7, 0, 0, 0, 0, c.Location)
	}
	return time.Date(y, m, d+1, 0, 0, 0, 0, c.Location)
}

// Period returns the start and end of the period holding now, in µs.
func (c *Calendar) Period(now int64) (start, end int64) {
	b := c.around(now)
	if now >= b.b1 {
		return b.b1, b.b2
	}
	return b.b0, b.b1
}

// around returns bounds whose periods hold now, the kept ones if so.
func (c *Calendar) around(now int64) *bounds {
	if b := c.bounds.Load(); b != nil && b.b0 <= now && now < b.b2 {
		return b
	}
	s := c.Start(time.UnixMicro(now))
	n := c.Next(s)
	b := &bounds{b0: s.UnixMicro(), b1: n.UnixMicro(), b2: c.Next(n).UnixMicro()}
	len0, len1 := (b.b1-b.b0)/1e6, (b.b2-b.b1)/1e6
	if (b.b1-b.b0)%1e6 != 0 || (b.b2-b.b1)%1e6 != 0 || len0 >= maxPeriodSeconds || len1 >= maxPeriodSeconds {
		// Zone offsets are whole seconds, so periods are too.
		panic(fmt.Sprintf("spec: calendar periods of %d and %d µs", b.b1-b.b0, b.b2-b.b1))
	}
	code := "c"
	if c.usage {
		code = "C"
	}
	code += c.cost
	b.args = LimitArgs{Code: code, A: c.quota, B: strconv.FormatInt(b.b1, 10), C: strconv.FormatInt(len0*maxPeriodSeconds+len1, 10)}
	c.bounds.Store(b)
	return b
}

// Args returns the limit's entries in its scripts' ARGV: its code, the
// quota and the two periods around the time last asked about (see Period
// and Refresh) or, the first time, the application's clock. calendar.lua
// picks the one that holds Redis's clock or, when neither does, fails with
// CalendarMiss and that time, for the store to Refresh and ask again.
func (c *Calendar) Args() LimitArgs {
	b := c.bounds.Load()
	if b == nil {
		b = c.around(time.Now().UnixMicro())
	}
	return b.args
}

// Refresh makes Args name the periods around now (µs).
func (c *Calendar) Refresh(now int64) { c.around(now) }

// CalendarMiss starts the error calendar.lua raises when Redis's clock
// lies outside the periods it was given; Redis's time in µs follows.
const CalendarMiss = "ratelimit: calendar: the periods given do not hold Redis's time "
