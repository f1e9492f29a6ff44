// Package finish tells a Limiter the status of the response to a request
// it admitted, once, as the response's header is about to be written:
// what ratelimit.WithCountOnly counts by. The Limiter's middleware and the
// adapters of web frameworks share it.
package finish

import (
	"bufio"
	"context"
	"net"
	"net/http"
)

// A Limiter takes the status of the response to a request it admitted.
type Limiter interface {
	Finish(ctx context.Context, status int) error
}

// A Finisher tells Limiter the status of the response to Request, once:
// a writer calls Finish as the header is about to be written, and the
// middleware again when the handlers have returned, for a response left
// unwritten. Set both fields; it is not safe for concurrent use.
type Finisher struct {
	Limiter Limiter
	Request *http.Request // the request as Limiter.Allow returned it

	done bool
}

// Finish calls Limiter.Finish with status, the first time it is called.
func (f *Finisher) Finish(status int) {
	if !f.done {
		f.done = true
		f.Limiter.Finish(f.Request.Context(), status)
	}
}

// A Writer wraps the server's writer of a response while the handlers
// run, and calls Finish as the header is about to be written.
type Writer struct {
	http.ResponseWriter // the server's
	Finisher
}

// WriteHeader finishes with code, unless informational, and writes it.
func (w *Writer) WriteHeader(code int) {
	if code >= 200 {
		w.Finish(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write finishes with 200, if the header is unwritten, and writes b.
func (w *Writer) Write(b []byte) (int, error) {
	w.Finish(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush finishes with 200, if the header is unwritten, and flushes, when it can.
func (w *Writer) Flush() {
	w.Finish(http.StatusOK)
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hijacks the server's writer's connection, when it can.
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the server's writer, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
