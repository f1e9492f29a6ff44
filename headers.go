package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Response headers a [Limiter] sets.
const (
	HeaderRateLimitPolicy = "RateLimit-Policy"
	HeaderRateLimit       = "RateLimit"
	HeaderXLimit          = "X-RateLimit-Limit"
	HeaderXRemaining      = "X-RateLimit-Remaining"
	HeaderXReset          = "X-RateLimit-Reset"
	HeaderRetryAfter      = "Retry-After"
)

// HeaderStyle selects the rate-limit headers a [Limiter] sets on every
// response it lets through or denies. Retry-After is always set on a 429.
type HeaderStyle uint8

const (
	// HeadersDraft sets RateLimit-Policy and RateLimit, the fields of the
	// IETF draft "RateLimit header fields for HTTP"
	// (draft-ietf-httpapi-ratelimit-headers-11), as RFC 9651 structured
	// fields:
	//
	//	RateLimit-Policy: "api";q=100;w=60, "burst";q=10;w=1
	//	RateLimit: "api";r=42;t=17
	//
	// The policy lists every limit; RateLimit describes the one closest to
	// denying (see [Decision.Tightest]). q is the quota (a token bucket's
	// burst), w the window in seconds (the time a token bucket takes to
	// fill), r what remains, t the seconds until it is all back; all
	// rounded up to whole seconds.
	HeadersDraft HeaderStyle = 1 << iota

	// HeadersX sets the widespread X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset (seconds from now, not a
	// timestamp), for the limit closest to denying.
	HeadersX

	// HeadersNone sets none of them.
	HeadersNone HeaderStyle = 0

	// HeadersAll sets both kinds. It is the default.
	HeadersAll = HeadersDraft | HeadersX
)

// Canonical header keys, for direct assignment into http.Header. The
// values a Limiter assigns are shared, read-only slices: handlers may
// replace them (Set, Add, Del) but must not write into them.
var (
	keyPolicy     = http.CanonicalHeaderKey(HeaderRateLimitPolicy)
	keyRateLimit  = http.CanonicalHeaderKey(HeaderRateLimit)
	keyXLimit     = http.CanonicalHeaderKey(HeaderXLimit)
	keyXRemaining = http.CanonicalHeaderKey(HeaderXRemaining)
	keyXReset     = http.CanonicalHeaderKey(HeaderXReset)
)

// policyName is l.Name or, when empty, one made of its quota and window,
// with the algorithm added if another limit of the set has the same.
func policyName(l Limit, all []Limit) string {
	if l.Name != "" {
		return l.Name
	}
	short := strconv.Itoa(l.Quota) + "-per-" + FormatDuration(l.Window)
	for _, o := range all {
		if o != l && o.Name == "" && o.Quota == l.Quota && o.Window == l.Window {
			return short + "-" + l.Algorithm.String()
		}
	}
	return short
}

// policyWindow is the w of a limit: its window, or for a token bucket the
// time to refill a whole burst.
func policyWindow(l Limit) time.Duration {
	if l.Algorithm == TokenBucket {
		l = l.WithDefaults()
		return time.Duration(int64(l.Window) / int64(l.Quota) * int64(l.Burst))
	}
	return l.Window
}

// checkName reports why a limit name cannot appear in a header.
func checkName(name string) error {
	if len(name) > 64 {
		return fmt.Errorf("is %d bytes long; at most 64 are allowed", len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("%q has a byte (%#x) outside printable ASCII, which an RFC 9651 string cannot hold", name, name[i])
		}
	}
	return nil
}

// quoteString writes s, printable ASCII, as an RFC 9651 sf-string.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// seconds rounds d up to whole seconds, at least 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// setHeaders writes the rate-limit headers of a decision. On the warm
// path it allocates nothing: the values come from the policy's caches.
func (l *Limiter) setHeaders(w http.ResponseWriter, p *policy, d Decision) {
	if l.headers == HeadersNone || len(d.Results) == 0 {
		return
	}
	h := w.Header()
	i := d.tightest()
	r := d.Results[i]
	reset := seconds(r.ResetAfter)
	if l.headers&HeadersDraft != 0 {
		h[keyPolicy] = p.header
		h[keyRateLimit] = p.current[i].get(p.names[i], int64(r.Remaining), reset)
	}
	if l.headers&HeadersX != 0 {
		h[keyXLimit] = p.capacity[i]
		h[keyXRemaining] = intValue(int64(r.Remaining))
		h[keyXReset] = intValue(reset)
	}
}

// setRetryAfter sets Retry-After to d rounded up to whole seconds, at
// least 1.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set(HeaderRetryAfter, strconv.FormatInt(max(seconds(d), 1), 10))
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
