package ratelimit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// What a Limiter writes on a response: the rate-limit headers of every
// request it decided, the 429 of a denied one (deny429), and the answers
// to one it could not decide ([FailOpen], [FailClosed]), all from the
// request's responseState. Limiter.Allow calls down into this file;
// nothing here calls back.

// Headers selects the rate-limit headers a [Limiter] sets on every
// response it lets through or denies (see [WithHeaders]). The zero
// Headers, the default, sets both kinds below with no qu and no pk.
// Retry-After is set on every 429 whatever Headers says.
//
// The draft's fields (draft-ietf-httpapi-ratelimit-headers-11),
// RateLimit-Policy and RateLimit, list every limit of every Limiter that
// decided the request; X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (seconds from now) describe the limit closest to
// denying. Every second is rounded up, so that a client that waits as
// told is never early. See docs/headers.md.
type Headers struct {
	// NoDraft leaves out RateLimit-Policy and RateLimit.
	NoDraft bool

	// NoX leaves out X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset.
	NoX bool

	// QuotaUnit adds the draft's qu parameter to every item of
	// RateLimit-Policy: one of the draft's registered units,
	// "content-bytes" or "concurrent-requests"; "requests", what an absent
	// qu means, sends none. Empty, the default, sends no qu. See
	// docs/headers.md.
	QuotaUnit string

	// PartitionKey, when set, is the secret of the draft's pk parameter,
	// added to every item of RateLimit-Policy and RateLimit: a keyed hash
	// of the key the request counts under, so that two requests share a
	// pk exactly when they share a quota, and a pk never shows the
	// client's identifier. The secret is at least 16 bytes, the same on
	// every instance, and not that of [HeaderKey]. Empty, the default,
	// sends no pk; set, it costs an HMAC per request. See docs/headers.md.
	PartitionKey []byte

	// Shadow adds X-RateLimit-Shadow to a response that Shadow limits
	// alone would have denied (see [Limit]'s Shadow), naming them as
	// RateLimit-Policy does: X-RateLimit-Shadow: "login-strict". It tells
	// an operator, or a test client, what a shadow limit would do; off by
	// default, so that clients see nothing of limits that do not apply.
	Shadow bool
}

// check says what is wrong with h, naming the field, or returns "".
func (h Headers) check() string {
	switch h.QuotaUnit {
	case "", "requests", "content-bytes", "concurrent-requests":
	default:
		return fmt.Sprintf("Headers.QuotaUnit %q is not a quota unit of the draft; use \"requests\", \"content-bytes\" or \"concurrent-requests\"", h.QuotaUnit)
	}
	if h.PartitionKey != nil && len(h.PartitionKey) < minSecret {
		return fmt.Sprintf("Headers.PartitionKey is %d bytes long; at least %d are needed, the same on every instance", len(h.PartitionKey), minSecret)
	}
	return ""
}

// responseState is what a request's response is written from, part of
// its requestState: each Limiter's decision, in the order they ran, the
// buffer the request's keys and header values share, and an array for
// the fields' []string values. deny429 and FailClosed, which get only
// the request, find it with responseOf.
type responseState struct {
	decisions      []limiterDecision
	one            [1]limiterDecision // decisions' first array: one Limiter's; a second moves it
	responseHeader http.Header        // the response's header, which Finish and Charge write anew
	// undecided is the policy of the Limiter whose store failed to decide
	// the request, for FailClosed; nil when none failed.
	undecided *policy
	buf       strings.Builder
	values    [7]string // a denial's seven: enough that the state, which holds Request too, stays in 896 bytes with its allocation header
	nvals     int
}

// limiterDecision is one Limiter's decision on a request as its headers
// tell it: under which policy, and with which pk.
type limiterDecision struct {
	policy   *policy
	decision Decision // the store's; once the request's usage is known, what remains after it
	pk       string   // the pk parameter of Headers.PartitionKey; "" without
}

// responseKey is the context key of a responseState.
var responseKey = new(int)

// responseOf returns the responseState of a request's context, or nil.
func responseOf(ctx context.Context) *responseState {
	s, _ := ctx.Value(responseKey).(*responseState)
	return s
}

// headerValue returns a one-element []string holding v, from s's array
// while it lasts, for a header field's value.
func (s *responseState) headerValue(v string) []string {
	if s == nil || s.nvals == len(s.values) {
		return []string{v}
	}
	s.values[s.nvals] = v
	s.nvals++
	return s.values[s.nvals-1 : s.nvals : s.nvals]
}

// setHeaders writes the rate-limit headers of every decision taken on
// the request so far, as h says; X-RateLimit-* describe the limit closest
// to denying (see tighter). retryAfter is the Retry-After, in seconds, of
// a denial (0 for none); no denying limit's t exceeds it.
//
// The values that change per request are substrings of the request's
// buffer, where its keys are, and their []string values come from the
// state's array, so that the headers allocate nothing more (two more when
// several Limiters decided or one sets a pk).
func setHeaders(hdr http.Header, h Headers, s *responseState, retryAfter int64) {
	if h.NoDraft && h.NoX {
		return
	}
	b := &s.buf
	start := b.Len()
	var num [20]byte
	var tight Result
	var tightPolicy *policy
	tightAt, remStart, remEnd := -1, 0, 0
	for k := range s.decisions {
		v := &s.decisions[k] // not a copy: a Decision holds a Result
		for i, r := range v.decision.results() {
			if b.Len() > start {
				b.WriteString(", ")
			}
			b.WriteString(v.policy.names[i])
			b.WriteString(";r=")
			rs := b.Len()
			b.Write(strconv.AppendInt(num[:0], sfInt(int64(r.Remaining)), 10))
			re := b.Len()
			b.WriteString(";t=")
			b.Write(strconv.AppendInt(num[:0], resetParameter(r, retryAfter), 10))
			if v.pk != "" {
				b.WriteString(";pk=")
				b.WriteString(v.pk)
			}
			if tightAt < 0 || tighter(r, tight) {
				tight, tightPolicy, tightAt = r, v.policy, i
				remStart, remEnd = rs, re
			}
		}
	}
	if tightAt < 0 {
		return
	}
	fieldEnd := b.Len()
	b.Write(strconv.AppendInt(num[:0], xReset(tight, retryAfter), 10))
	all := b.String()
	if !h.NoDraft {
		hdr[wire.FieldPolicy] = policyHeader(s.decisions)
		hdr[wire.FieldRateLimit] = s.headerValue(all[start:fieldEnd])
	}
	if !h.NoX {
		hdr[wire.FieldXLimit] = tightPolicy.capacity[tightAt]
		hdr[wire.FieldXRemaining] = s.headerValue(all[remStart:remEnd])
		hdr[wire.FieldXReset] = s.headerValue(all[fieldEnd:])
	}
}

// resetsIn is the time until r's limit resets (see Headers): a fixed
// window's end, which its script reads to the millisecond and reports
// as ResetAfter, the latest it may be; the effective window otherwise.
func resetsIn(r Result) time.Duration {
	if r.Limit.Algorithm == FixedWindow {
		return r.ResetAfter
	}
	return r.Window
}

// resetParameter is the t of r's RateLimit item: resetsIn rounded up to
// whole seconds, at most retryAfter when that is not 0 and r denied. A
// limit that admitted the request keeps its own t: the Retry-After binds
// only the limits it waits for.
func resetParameter(r Result, retryAfter int64) int64 {
	t := sfInt(seconds(resetsIn(r)))
	if retryAfter > 0 && !r.Allowed {
		t = min(t, retryAfter)
	}
	return t
}

// xReset is the X-RateLimit-Reset of r, the result the X-RateLimit fields
// describe: its t; for a Concurrent limit that denied, which promises no
// t (a slot comes back when some request ends), the wait its RetryAfter
// asks for, at least a second, as Retry-After says.
func xReset(r Result, retryAfter int64) int64 {
	if r.Limit.Algorithm == Concurrent && !r.Allowed {
		return sfInt(max(seconds(r.RetryAfter), 1))
	}
	return resetParameter(r, retryAfter)
}

// tighter reports whether x is closer to denying than r, so that headers
// describe x rather than r, the limit a client should wait for: a result
// that denies beats one that allows; then a limit over time beats a
// Concurrent one, which has no time to wait for (its slots come back when
// requests end); of two that deny, the one that lets the request through
// last; of two that allow, the one with the fewest Remaining, ties going
// to the longest ResetAfter.
func tighter(x, r Result) bool {
	xc, rc := x.Limit.Algorithm == Concurrent, r.Limit.Algorithm == Concurrent
	switch {
	case x.Allowed != r.Allowed:
		return !x.Allowed
	case xc != rc:
		return rc
	case !x.Allowed:
		return x.RetryAfter > r.RetryAfter
	}
	return x.Remaining < r.Remaining || (x.Remaining == r.Remaining && x.ResetAfter > r.ResetAfter)
}

// policyHeader returns the RateLimit-Policy value of the Limiters'
// decisions ds, in order, every item with its Limiter's pk, if any.
func policyHeader(ds []limiterDecision) []string {
	if len(ds) == 1 && ds[0].pk == "" {
		return ds[0].policy.policyValue
	}
	n := 0
	for _, v := range ds {
		n += len(", ") + len(v.policy.policyValue[0])
		if v.pk != "" {
			n += len(v.policy.items) * (len(";pk=") + len(v.pk))
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i, v := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.pk == "" {
			b.WriteString(v.policy.policyValue[0])
			continue
		}
		for j, item := range v.policy.items {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(item)
			b.WriteString(";pk=")
			b.WriteString(v.pk)
		}
	}
	return []string{b.String()}
}

// retryAfterSeconds is the Retry-After of a denial, in seconds: d's RetryAfter
// rounded up, at least 1.
func retryAfterSeconds(d Decision) int64 { return max(seconds(d.RetryAfter), 1) }

// setRetryAfter sets Retry-After to secs seconds.
func setRetryAfter(w http.ResponseWriter, s *responseState, secs int64) {
	var v string
	if secs < 100 {
		v = strconv.FormatInt(secs, 10) // allocates nothing below 100
	} else {
		var num [20]byte
		start := s.buf.Len()
		s.buf.Write(strconv.AppendInt(num[:0], secs, 10))
		v = s.buf.String()[start:]
	}
	w.Header()[wire.FieldRetryAfter] = s.headerValue(v)
}

// partitionKeys makes the pk parameter of Headers.PartitionKey. A nil
// *partitionKeys makes none. It is safe for concurrent use.
type partitionKeys struct{ macs *hmacs }

func newPartitionKeys(secret []byte) *partitionKeys {
	return &partitionKeys{macs: newHMACs(secret)}
}

// of returns the pk of the quota counted under key, as an RFC 9651
// Byte Sequence: the first 16 bytes of its HMAC-SHA256, base64 with
// padding, between colons. It returns "" for a nil k.
func (k *partitionKeys) of(key string) string {
	if k == nil {
		return ""
	}
	sum := k.macs.sum16(key)
	var buf [32]byte // ':' + 24 base64 digits + ':'
	b := append(buf[:0], ':')
	b = base64.StdEncoding.AppendEncode(b, sum[:])
	return string(append(b, ':'))
}

// deny429 is the default deny handler, as [WithDenyHandler] describes it.
// "violated-policies" lists d's denied limits in d's order; an unnamed
// limit of a Decision made by hand gets the name a Limiter would make up
// for it (which two near-identical limits may share).
func deny429(w http.ResponseWriter, r *http.Request, d Decision) {
	p := problemDetails{
		status:   http.StatusTooManyRequests,
		typ:      wire.ProblemQuotaExceeded,
		title:    "Quota exceeded",
		detail:   "rate limit exceeded",
		retry:    retryAfterSeconds(d),
		policies: true,
	}
	if d.Banned > 0 {
		p.typ, p.title, p.detail = wire.ProblemAbnormalUsage, "Abnormal usage detected", "banned after repeated denials"
	}
	writeProblem(w, r, p, d.Results())
}

// FailOpen is the default error handler (see [WithErrorHandler]): when the
// store fails, the request is served, unlimited (the failure is logged),
// so that a Redis outage does not become an outage of the service. A
// request with no key, an invalid cost, or invalid limits from
// [WithLimitsFunc] gets 400 Bad Request: serving it would let clients
// escape the limit by leaving the key out.
func FailOpen(w http.ResponseWriter, r *http.Request, err error) bool {
	if errors.Is(err, ErrInvalid) {
		writeProblem(w, r, badRequest(err), nil)
		return false
	}
	return true
}

// FailClosed is an error handler that refuses requests while the store
// fails: 503 Service Unavailable with Retry-After: 1, whose problem JSON
// has the draft's type temporary-reduced-capacity and, as the draft
// defines for that type, the member "violated-policies": the names of the
// policies the store could not decide the request against, those of the
// Limiter whose store failed, as RateLimit-Policy would name them ([] when
// r went through no Limiter). Requests with no key or an invalid cost get
// 400, as with [FailOpen].
func FailClosed(w http.ResponseWriter, r *http.Request, err error) bool {
	if errors.Is(err, ErrInvalid) {
		return FailOpen(w, r, err)
	}
	s := responseOf(r.Context())
	w.Header()[wire.FieldRetryAfter] = s.headerValue("1")
	p := problemDetails{
		status:   http.StatusServiceUnavailable,
		typ:      wire.ProblemReducedCapacity,
		title:    "Capacity temporarily reduced",
		detail:   "rate limiting is unavailable",
		retry:    1,
		policies: true,
		names:    []Limit{},
	}
	if s != nil && s.undecided != nil {
		p.names = s.undecided.set.limits // named by newPolicy
	}
	writeProblem(w, r, p, nil)
	return false
}

// badRequest is the answer to a request that cannot be rate limited
// because of err, which wraps ErrInvalid: what the request lacks when a
// built-in KeyFunc said so (see requestError), never err's own text.
func badRequest(err error) problemDetails {
	p := problemDetails{status: http.StatusBadRequest, typ: "about:blank", title: "Bad Request", detail: "the request cannot be rate limited"}
	var re *requestError
	if errors.As(err, &re) {
		p.detail += ": " + re.detail
	}
	return p
}

// problemDetails is what writeProblem answers: RFC 9457 problem details.
// It holds no request data and no error text.
type problemDetails struct {
	status int
	typ    string // problem type URI
	title  string // of the type; the plain text says the status instead
	detail string
	retry  int64 // seconds, told after detail; 0: not told

	// policies adds the member "violated-policies", the names of the
	// denied results or, when names is not nil, of every limit in names.
	policies bool
	names    []Limit
}

// writeProblem answers with p: RFC 9457 problem JSON when the client
// accepts JSON, plain text otherwise. results (whose denied limits
// p.policies names) are not a field of p, so that the Decision holding
// them does not escape with p's strings.
func writeProblem(w http.ResponseWriter, r *http.Request, p problemDetails, results []Result) {
	h, s := w.Header(), responseOf(r.Context())
	h["X-Content-Type-Options"] = s.headerValue("nosniff")
	bp := bodies.Get().(*[]byte)
	b := (*bp)[:0]
	if acceptsJSON(r.Header.Values("Accept")) {
		h["Content-Type"] = s.headerValue("application/problem+json")
		b = p.appendJSON(b, results)
	} else {
		h["Content-Type"] = s.headerValue("text/plain; charset=utf-8")
		b = p.appendText(b)
	}
	w.WriteHeader(p.status)
	w.Write(b)
	if cap(b) <= maxPooledBody {
		*bp = b
		bodies.Put(bp)
	}
}

// bodies holds the buffers problem bodies are written in: a
// ResponseWriter's Write copies what it is given, or sends it, before it
// returns.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxPooledBody is the largest buffer bodies keeps, so that one long list
// of violated policies does not stay in the pool.
const maxPooledBody = 4 << 10

// appendText appends p as a line of plain text, for example
// "Too Many Requests: rate limit exceeded; retry in 28 s".
func (p *problemDetails) appendText(b []byte) []byte {
	b = append(b, http.StatusText(p.status)...)
	b = append(b, ": "...)
	b = p.appendRetry(append(b, p.detail...))
	return append(b, '\n')
}

// appendJSON appends p as a JSON object and a newline, naming the denied
// results when p.policies is set.
func (p *problemDetails) appendJSON(b []byte, results []Result) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, p.typ)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.status), 10)
	b = append(b, `,"detail":"`...)
	b = appendJSONText(b, p.detail) // our own words, but a header's name may be any
	b = p.appendRetry(b)
	b = append(b, '"')
	if p.policies {
		b = append(b, `,"violated-policies":[`...)
		n := 0
		for _, l := range p.names {
			b = appendName(b, n, l.Name)
			n++
		}
		for i, res := range results {
			if !res.Allowed {
				b = appendName(b, n, violatedName(results, i))
				n++
			}
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendName appends name as the nth member of a JSON array.
func appendName(b []byte, n int, name string) []byte {
	if n > 0 {
		b = append(b, ',')
	}
	return appendJSONString(b, name)
}

// appendRetry appends, if set, when to retry.
func (p *problemDetails) appendRetry(b []byte) []byte {
	if p.retry > 0 {
		b = append(b, "; retry in "...)
		b = strconv.AppendInt(b, p.retry, 10)
		b = append(b, " s"...)
	}
	return b
}

// violatedName is the name of results[i]'s limit as the headers give it:
// the Limiter sets it; a Decision made by hand may leave it empty.
func violatedName(results []Result, i int) string {
	if name := results[i].Limit.Name; name != "" {
		return name
	}
	all := make([]Limit, len(results))
	for j, res := range results {
		all[j] = res.Limit
	}
	return policyName(results[i].Limit, all)
}

// appendJSONString appends s as a JSON string. Names checked by a Limiter
// are printable ASCII, where only '"' and '\' need escaping; anything else
// (a Decision made by hand may hold any name) goes to encoding/json, which
// escapes control characters and replaces invalid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	return append(appendJSONText(append(b, '"'), s), '"')
}

// appendJSONText appends s escaped as the inside of a JSON string.
func appendJSONText(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q[1:len(q)-1]...)
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return b
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
