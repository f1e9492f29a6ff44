package fallback

import (
	"context"
	"log/slog"
	"time"
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
	last := f.logged.Get(what)
	if !last.at.IsZero() && now.Sub(last.at) < logEvery {
		last.held++
		return false, 0
	}
	held = last.held
	*last = loggedLine{at: now}
	return true, held
}

// logDown logs at WARN that Redis is unavailable because of err, unless
// the same cause was logged less than logEvery ago. probed, when not nil,
// is what the prober's first round met: when err only says that a
// deadline passed, probed may say why.
func (f *Fallback) logDown(err, probed error, now time.Time) {
	shown, cause := err, f.primary.Explain(context.Background(), err).Cause
	if probed != nil && cause == "timeout" {
		if c := f.primary.Explain(context.Background(), probed).Cause; c != "timeout" {
			shown, cause = probed, c
		}
	}
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

// logMisconfig logs at ERROR each misconfiguration in err: what is wrong
// and how to fix it, at once the first time, then once every logEvery
// while it lasts. It reports whether it logged one.
func (f *Fallback) logMisconfig(err error, now time.Time) bool {
	logged := false
	if err == nil {
		return false
	}
	for _, p := range f.primary.Explain(context.Background(), err).Problems {
		if ok, _ := f.logOnce("misconfigured: "+p.What, now); !ok {
			continue
		}
		logged = true
		f.logger.LogAttrs(context.Background(), slog.LevelError, "ratelimit: Redis is misconfigured; deciding in process until it is fixed",
			slog.String("problem", p.What), slog.String("fix", p.Fix), slog.String("error", p.Err.Error()))
	}
	return logged
}
