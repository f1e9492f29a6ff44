package ratelimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Problem types of draft-ietf-httpapi-ratelimit-headers, section 5, for
// RFC 9457 problem details.
const (
	problemQuotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	problemAbnormalUsage   = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	problemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// Deny is the default answer to a denied request (see [WithDenyHandler]):
// 429 Too Many Requests with a short body, plain text, or RFC 9457 problem
// JSON when the client accepts JSON. The rate-limit headers and
// Retry-After are set before it runs.
//
// The problem type is the draft's quota-exceeded, or abnormal-usage-detected
// for a banned key (see [Ban]), with the extension member
// "violated-policies": the names of d's denied limits, in d's order, as
// the RateLimit-Policy header names them. A Decision made by hand with an
// unnamed limit gets the name a [Limiter] would make up for it (which two
// near-identical limits may share); one with no denied result gets [].
func Deny(w http.ResponseWriter, r *http.Request, d Decision) {
	p := problem{
		status:   http.StatusTooManyRequests,
		typ:      problemQuotaExceeded,
		title:    "Quota exceeded",
		detail:   "rate limit exceeded",
		retry:    max(seconds(d.RetryAfter()), 1),
		policies: true,
	}
	if d.Banned > 0 {
		p.typ, p.title, p.detail = problemAbnormalUsage, "Abnormal usage detected", "banned after repeated denials"
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
	if isRequestError(err) {
		writeProblem(w, r, badRequest, nil)
		return false
	}
	return true
}

// FailClosed is an error handler that refuses requests while the store
// fails: 503 Service Unavailable with Retry-After: 1, whose problem JSON
// has the draft's type temporary-reduced-capacity. It lists no
// violated-policies: no limit was exceeded, and an error handler is not
// told which limits apply. Requests with no key or an invalid cost get
// 400, as with [FailOpen].
func FailClosed(w http.ResponseWriter, r *http.Request, err error) bool {
	if isRequestError(err) {
		writeProblem(w, r, badRequest, nil)
		return false
	}
	setHeader(w.Header(), arenaOf(r), headerRetryAfter, "1")
	writeProblem(w, r, problem{
		status: http.StatusServiceUnavailable,
		typ:    problemReducedCapacity,
		title:  "Capacity temporarily reduced",
		detail: "rate limiting is unavailable",
		retry:  1,
	}, nil)
	return false
}

// badRequest is the answer to a request that cannot be rate limited.
var badRequest = problem{status: http.StatusBadRequest, typ: "about:blank", title: "Bad Request", detail: "the request cannot be rate limited"}

// problem is what writeProblem answers. It holds no request data and no
// error text.
type problem struct {
	status int
	typ    string // problem type URI
	title  string // of the type; the plain text says the status instead
	detail string
	retry  int64 // seconds, told after detail; 0: not told

	// policies adds the member "violated-policies", the names of the
	// denied results.
	policies bool
}

// writeProblem answers with p: RFC 9457 problem JSON when the client
// accepts JSON, plain text otherwise; results are the Decision's whose
// denied limits p.policies names. They are not a field of p: escape
// analysis treats p's fields as one, p's strings leak, and the Decision
// holding the results would be moved to the heap.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, results []Result) {
	h, a := w.Header(), arenaOf(r)
	setHeader(h, a, "X-Content-Type-Options", "nosniff")
	setHeader(h, a, "Cache-Control", "no-store")
	bp := bodies.Get().(*[]byte)
	b := (*bp)[:0]
	if acceptsJSON(r.Header.Values("Accept")) {
		setHeader(h, a, "Content-Type", "application/problem+json")
		b = p.appendJSON(b, results)
	} else {
		setHeader(h, a, "Content-Type", "text/plain; charset=utf-8")
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
func (p *problem) appendText(b []byte) []byte {
	b = append(b, http.StatusText(p.status)...)
	b = append(b, ": "...)
	b = p.appendDetail(b)
	return append(b, '\n')
}

// appendJSON appends p as a JSON object and a newline, naming the denied
// results when p.policies is set.
func (p *problem) appendJSON(b []byte, results []Result) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, p.typ)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.status), 10)
	b = append(b, `,"detail":"`...)
	b = p.appendDetail(b) // our own words: nothing to escape
	b = append(b, '"')
	if p.policies {
		b = append(b, `,"violated-policies":[`...)
		first := true
		for i, res := range results {
			if res.Allowed {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, violatedName(results, i))
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendDetail appends p's detail and, if set, when to retry.
func (p *problem) appendDetail(b []byte) []byte {
	b = append(b, p.detail...)
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
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
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
