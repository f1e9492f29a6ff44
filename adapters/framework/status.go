package framework

import (
	"net/http"

	"github.com/ratelimit-go/ratelimit"
)

// A Finisher tells a Limiter the status of the response to a request it
// admitted, once (see [ratelimit.Limiter.Finish], which
// [ratelimit.WithCountOnly] counts by): an adapter's writer calls Finish
// as the response's header is about to be written, and the adapter once
// more when the handlers have returned, for a response they left
// unwritten. Set both fields; it is not safe for concurrent use.
type Finisher struct {
	Limiter *ratelimit.Limiter
	Request *http.Request // the request as Limiter.Allow returned it

	done bool
}

// Finish calls Limiter.Finish with status, the first time it is called.
func (f *Finisher) Finish(status int) {
	if !f.done {
		f.done = true
		f.Limiter.Finish(f.Request, status)
	}
}

// A StatusWriter wraps the server's writer of a response while the
// handlers run, and calls Finish as the header is about to be written:
// with the status WriteHeader writes (not an informational one), or 200
// at the first Write or Flush. Unwrap gives http.ResponseController the
// server's writer, for what the StatusWriter does not pass on itself.
type StatusWriter struct {
	http.ResponseWriter // the server's
	Finisher
}

// WriteHeader finishes with code, unless it is informational, and
// writes it.
func (w *StatusWriter) WriteHeader(code int) {
	if code >= 200 { // not an informational answer
		w.Finish(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write finishes with 200, if the header is not written yet, and writes
// b.
func (w *StatusWriter) Write(b []byte) (int, error) {
	w.Finish(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush finishes with 200, if the header is not written yet, and flushes
// the server's writer, when it can.
func (w *StatusWriter) Flush() {
	w.Finish(http.StatusOK)
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
