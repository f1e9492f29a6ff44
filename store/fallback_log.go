package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// What a Fallback logs: Redis going down, with the cause, at WARN, or a
// misconfiguration, with what to fix, at ERROR; Redis coming back, at
// INFO. A line that says what one logged less than logEvery ago said is
// held back, and the next one counts those held back.

// logEvery is how often one cause of an outage, or one misconfiguration,
// is logged again while it lasts or repeats.
const logEvery = time.Minute

// maxLoggedLines bounds the causes and misconfigurations whose last log
// time is kept.
const maxLoggedLines = 64

// A loggedLine is when a line was last logged, and how many like it were
// held back since.
type loggedLine struct {
	at   time.Time
	held int
}

// logOnce reports whether a line saying what is to be logged at now, and
// how many such lines were held back since the last one.
func (f *Fallback) logOnce(what string, now time.Time) (ok bool, held int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last, seen := f.logged[what]
	if seen && now.Sub(last.at) < logEvery {
		last.held++
		f.logged[what] = last
		return false, 0
	}
	if f.logged == nil || len(f.logged) >= maxLoggedLines {
		f.logged = make(map[string]loggedLine)
	}
	f.logged[what] = loggedLine{at: now}
	return true, last.held
}

// logDown logs at WARN that Redis is unavailable because of err, unless
// the same cause was logged less than logEvery ago. probed, when not nil,
// is what the prober's first round met: when err only says that a
// deadline passed, probed may say why.
func (f *Fallback) logDown(err, probed error, now time.Time) {
	shown := err
	if probed != nil && causeOf(err) == "timeout" && causeOf(probed) != "timeout" {
		shown = probed
	}
	cause := causeOf(shown)
	ok, held := f.logOnce("unavailable: "+cause, now)
	f.downLogged.Store(ok)
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("cause", cause), slog.String("error", shown.Error())}
	if shown != err {
		attrs = append(attrs, slog.String("first_error", err.Error()))
	}
	if held > 0 {
		attrs = append(attrs, slog.Int("outages_not_logged", held))
	}
	f.logger.LogAttrs(context.Background(), slog.LevelWarn, "ratelimit: Redis unavailable; deciding in process until it answers", attrs...)
}

// causeOf names in a few words why a call to Redis failed with err: what
// the network said ("connection refused", "connection reset by peer", "no
// such host", "connection closed"), "timeout", the first word of Redis's
// answer ("LOADING", "READONLY"), or the problem of a misconfiguration
// (see [ErrMisconfigured]). It holds no address, key or password.
func causeOf(err error) string {
	var (
		m     *misconfiguration
		reply redis.Error
		errno syscall.Errno
		dns   *net.DNSError
		ne    net.Error
	)
	switch {
	case errors.As(err, &m):
		return m.problem
	case errors.As(err, &reply):
		word, _, _ := strings.Cut(reply.Error(), " ")
		return "Redis answered " + word
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "no such host"
		}
		return "DNS failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, redis.ErrClosed):
		return "connection closed"
	}
	return "unavailable"
}

// logMisconfig logs at ERROR each misconfiguration in err: what is wrong
// and how to fix it, at once the first time, then once every logEvery
// while it lasts. It reports whether it logged one.
func (f *Fallback) logMisconfig(err error, now time.Time) bool {
	logged := false
	for _, ce := range misconfigurations(err) {
		if ok, _ := f.logOnce("misconfigured: "+ce.problem, now); !ok {
			continue
		}
		logged = true
		f.logger.LogAttrs(context.Background(), slog.LevelError, "ratelimit: Redis is misconfigured; deciding in process until it is fixed",
			slog.String("problem", ce.problem), slog.String("fix", ce.fix), slog.String("error", ce.err.Error()))
	}
	return logged
}

// misconfigurations returns the misconfigurations in err's tree.
func misconfigurations(err error) []*misconfiguration {
	if ce, ok := err.(*misconfiguration); ok {
		return []*misconfiguration{ce}
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return misconfigurations(e.Unwrap())
	case interface{ Unwrap() []error }:
		var all []*misconfiguration
		for _, err := range e.Unwrap() {
			all = append(all, misconfigurations(err)...)
		}
		return all
	}
	return nil
}
