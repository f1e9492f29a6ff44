package framework

import "github.com/ratelimit-go/ratelimit/internal/finish"

// A Finisher tells a Limiter the status of the response to a request it
// admitted, once (see [ratelimit.Limiter.Finish]): an adapter's writer
// calls Finish as the header is about to be written, and the adapter again
// when the handlers have returned, for a response left unwritten. Set both
// fields; it is not safe for concurrent use.
type Finisher = finish.Finisher

// A StatusWriter wraps the server's writer while the handlers run, and
// calls Finish as the header is about to be written: with the status
// WriteHeader writes (not an informational one), or 200 at the first Write
// or Flush. Unwrap gives http.ResponseController the server's writer. The
// Limiter's own middleware writes through the same writer.
type StatusWriter = finish.Writer
