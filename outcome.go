package ratelimit

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
)

// WithCountOnly counts a request only when its response's status passes
// count, for example the failed attempts of a login: nil counts failures,
// status >= 400, and func(s int) bool { return s < 400 } successes.
//
// Before the handler, the Limiter denies a request only when the quota is
// already spent: it peeks (see [Store.Peek]), and the headers describe the
// quota as it was before the request. After the handler, a request whose
// status passes count spends its cost. So requests in flight together when
// the quota runs out were all let through: the limit can be overshot by at
// most the number of requests in flight at once, while the counters
// themselves never pass it.
//
// With [Limiter.Handler] the handler writes through a ResponseWriter that
// records the status; it is an [http.Flusher] and an [http.Hijacker]
// (failing with [http.ErrNotSupported] when the server's writer is not),
// and [http.ResponseController] reaches the server's writer through its
// Unwrap method. The Gin and Echo adapters report the status with
// [Limiter.Finish].
func WithCountOnly(count func(status int) bool) Option {
	return func(l *Limiter) error {
		if count == nil {
			count = func(status int) bool { return status >= 400 }
		}
		l.countOnly = count
		return nil
	}
}

// Finish reports the status of r's response to a Limiter built with
// [WithCountOnly], which then spends r's cost if the status passes its
// count function; otherwise it does nothing. [Limiter.Handler] calls it;
// framework adapters call it after the handler. A store failure is logged
// and returned: the response is gone, so no error handler runs.
func (l *Limiter) Finish(r *http.Request, status int) error {
	if l.countOnly == nil || !l.countOnly(status) || l.skip != nil && l.skip(r) || l.spent(r) {
		return nil
	}
	p, err := l.policyFor(r)
	if p == nil || err != nil {
		return err
	}
	key, err := l.storeKey(r, p)
	if err != nil {
		return err
	}
	if _, err := l.store.Allow(r.Context(), key, l.costOf(r), p.limits); err != nil {
		l.counts.storeErrors.Add(1)
		if ok, dropped := l.logs.allow(logStoreError); ok {
			l.logger.LogAttrs(r.Context(), slog.LevelError, "ratelimit: store failed counting a response", slog.String("error", err.Error()),
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status), slog.Int64("suppressed", dropped))
		}
		return fmt.Errorf("ratelimit: counting the response: %w", err)
	}
	return nil
}

// spent reports whether l's decision on r already took r's cost (see
// Allow).
func (l *Limiter) spent(r *http.Request) bool {
	if s := stateOf(r); s != nil {
		for i := len(s.verdicts) - 1; i >= 0; i-- {
			if s.verdicts[i].limiter == l {
				return s.verdicts[i].counted
			}
		}
	}
	return false
}

// statusWriter records the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// status is the response's status: 200 when the handler wrote nothing.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Flush flushes the server's writer, when it can.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hijacks the server's writer's connection, when it can.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
