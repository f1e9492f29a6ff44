package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Deny is the default answer to a denied request (see [WithDenyHandler]):
// 429 Too Many Requests with a short body, RFC 9457 problem JSON when the
// client accepts JSON, plain text otherwise. The rate-limit headers and
// Retry-After are set before it runs. A banned key is told so (see
// [Ban]).
func Deny(w http.ResponseWriter, r *http.Request, d Decision) {
	why := "rate limit exceeded"
	if d.Banned > 0 {
		why = "banned after repeated denials"
	}
	writeStatus(w, r, http.StatusTooManyRequests, fmt.Sprintf("%s; retry in %d s", why, max(seconds(d.RetryAfter()), 1)))
}

// FailOpen is the default error handler (see [WithErrorHandler]): when the
// store fails, the request is served, unlimited (the failure is logged),
// so that a Redis outage does not become an outage of the service. A
// request with no key, an invalid cost, or invalid limits from
// [WithLimitsFunc] gets 400 Bad Request: serving it would let clients
// escape the limit by leaving the key out.
func FailOpen(w http.ResponseWriter, r *http.Request, err error) bool {
	if isRequestError(err) {
		writeStatus(w, r, http.StatusBadRequest, "the request cannot be rate limited")
		return false
	}
	return true
}

// FailClosed is an error handler that refuses requests while the store
// fails: 503 Service Unavailable with Retry-After: 1. Requests with no key
// or an invalid cost get 400, as with [FailOpen].
func FailClosed(w http.ResponseWriter, r *http.Request, err error) bool {
	if isRequestError(err) {
		writeStatus(w, r, http.StatusBadRequest, "the request cannot be rate limited")
		return false
	}
	w.Header().Set(headerRetryAfter, "1")
	writeStatus(w, r, http.StatusServiceUnavailable, "rate limiting is unavailable; retry in 1 s")
	return false
}

// writeStatus answers with status and a short body: RFC 9457 problem
// JSON when the client accepts JSON, plain text otherwise. The body holds
// no request data and no error text.
func writeStatus(w http.ResponseWriter, r *http.Request, status int, detail string) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	title := http.StatusText(status)
	if acceptsJSON(r.Header.Values("Accept")) {
		h.Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"about:blank","title":%q,"status":%d,"detail":%q}`+"\n", title, status, detail)
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "%s: %s\n", title, detail)
}

// acceptsJSON reports whether an Accept header names
// application/problem+json or application/json with a non-zero q.
func acceptsJSON(accept []string) bool {
	for _, line := range accept {
		for media := range strings.SplitSeq(line, ",") {
			typ, params, _ := strings.Cut(media, ";")
			typ = strings.ToLower(strings.TrimSpace(typ))
			if typ != "application/problem+json" && typ != "application/json" {
				continue
			}
			if !zeroQ(params) {
				return true
			}
		}
	}
	return false
}

// zeroQ reports whether media-range parameters set q to 0.
func zeroQ(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(name, "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return err == nil && q == 0
		}
	}
	return false
}
