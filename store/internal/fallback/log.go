package fallback

import (
	"context"
	"log/slog"
	"time"
)

// logEvery is how often one cause of an outage, or one misconfiguration,
// is logged again while it lasts or repeats; those held back meanwhile are
// counted on the next line.
const logEvery = time.Minute

const maxLoggedLines = 64 // whose last log time is kept

// A loggedLine is when a line was last logged, and how many held back since.
type loggedLine struct {
	at   time.Time
	held int
}

// logOnce reports whether a line saying what is logged at now, and how
// many were held back since the last.
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
// the cause was logged less than logEvery ago. probed, when not nil, is
// what the prober's first round met: it may say why err's deadline passed.
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

// logMisconfig logs at ERROR each misconfiguration in err, with its fix,
// at most once every logEvery. It reports whether it logged one.
func (f *Fallback) logMisconfig(err error, now time.Time) bool {
	if err == nil {
		return false
	}
	logged := false
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
