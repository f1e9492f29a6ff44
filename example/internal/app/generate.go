package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// GenLimits are the limits of POST /v1/generate, a model API's, per API
// key: requests a minute, tokens a minute charged from what each
// response generated, requests in flight, and tokens per calendar month.
var GenLimits = []ratelimit.Limit{
	{Quota: 20, Window: time.Minute, Cost: 1, Name: "gen-rpm"}, // one a request, whatever max_tokens
	{Quota: 40_000, Window: time.Minute, Usage: true, Name: "gen-tpm"},
	{Algorithm: ratelimit.Concurrent, Quota: 4, Name: "gen-concurrent"},
	{Algorithm: ratelimit.Monthly, Quota: 1_000_000, Usage: true, Name: "gen-month"},
}

// The bounds of POST /v1/generate's parameters.
const (
	maxTokens = 100_000
	maxHold   = 10_000 // ms
)

// generateParams returns r's tokens and hold_ms, and whether both are
// whole numbers within their bounds.
func generateParams(r *http.Request) (tokens, hold int, ok bool) {
	q := r.URL.Query()
	tokens, err1 := strconv.Atoi(q.Get("tokens"))
	hold, err2 := strconv.Atoi(q.Get("hold_ms"))
	return tokens, hold, err1 == nil && err2 == nil && tokens >= 0 && tokens <= maxTokens && hold >= 0 && hold <= maxHold
}

// estimate returns r's max_tokens, the tokens it may generate at most,
// which its limits charged from usage reserve until it ends: 1 when
// absent; ok is false when it is not a whole number from 1 to maxTokens.
func estimate(r *http.Request) (tokens int, ok bool) {
	v, given := r.URL.Query()["max_tokens"]
	if !given {
		return 1, true
	}
	tokens, err := strconv.Atoi(v[0])
	return tokens, err == nil && len(v) == 1 && tokens >= 1 && tokens <= maxTokens
}

// GenCost is the cost of a request of POST /v1/generate: its max_tokens
// (1 without), which gen-tpm and gen-month reserve until it ends. A gRPC
// call reserves 1.
func GenCost(r ratelimit.Request) int {
	if hr, ok := r.(*http.Request); ok {
		if n, ok := estimate(hr); ok {
			return n
		}
	}
	return 1
}

// CheckGenerate answers 400 to a POST /v1/generate whose tokens, hold_ms
// or max_tokens is missing or out of bounds, naming it, and reports
// whether r may go on: it runs before the Limiter, so that a bad request
// counts nowhere. A max_tokens past what a limit holds is the Limiter's
// to refuse, naming the limit.
func CheckGenerate(w http.ResponseWriter, r *http.Request) bool {
	if _, _, ok := generateParams(r); !ok {
		http.Error(w, "tokens must be 0 to 100000 and hold_ms 0 to 10000", http.StatusBadRequest)
		return false
	}
	if _, ok := estimate(r); !ok {
		http.Error(w, "max_tokens must be a whole number from 1 to 100000", http.StatusBadRequest)
		return false
	}
	if _, ok := streamed(r); !ok {
		http.Error(w, "stream must be true or false", http.StatusBadRequest)
		return false
	}
	return true
}

// streamed returns whether r asks for a stream (stream=true); ok is
// false when stream is given as anything but true or false.
func streamed(r *http.Request) (stream, ok bool) {
	v, given := r.URL.Query()["stream"]
	if !given {
		return false, true
	}
	return v[0] == "true", len(v) == 1 && (v[0] == "true" || v[0] == "false")
}

// chunks is how many events a stream of POST /v1/generate sends, at
// most: one a tenth of hold_ms.
const chunks = 10

// Checked runs CheckGenerate before next: POST /v1/generate on net/http.
func Checked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if CheckGenerate(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Generate answers POST /v1/generate?tokens=N&hold_ms=M, standing in for
// a model (max_tokens, the reservation, is the Limiter's: see GenCost):
// it works for M milliseconds (less if the client goes away),
// reports N tokens as the request's usage before it answers, so that the
// headers count them, and answers {"tokens": N}. With stream=true it
// streams instead (see generateStream).
func Generate(w http.ResponseWriter, r *http.Request) {
	tokens, hold, _ := generateParams(r)
	if stream, _ := streamed(r); stream {
		generateStream(w, r, tokens, hold)
		return
	}
	t := time.NewTimer(time.Duration(hold) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return // the client went away: nothing was generated
	}
	ratelimit.Charge(r.Context(), tokens)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Tokens int `json:"tokens"`
	}{tokens})
}

// generateStream streams the N tokens as server-sent events, up to
// chunks of them a tenth of M milliseconds apart, each
// `data: {"tokens": k}` and charged as it is sent (see ratelimit.Charge).
// When a limit has no room for more, it sends `event: limited` and
// stops; it ends with `event: done` and the tokens sent.
func generateStream(w http.ResponseWriter, r *http.Request, tokens, hold int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	flusher, _ := w.(http.Flusher)
	ratelimit.Charge(r.Context(), 0) // nothing generated yet: the usage is what is sent, not max_tokens
	t := time.NewTicker(max(time.Duration(hold)*time.Millisecond/chunks, time.Millisecond))
	defer t.Stop()
	sent := 0
	for i := range chunks {
		k := tokens/chunks + btoi(i < tokens%chunks) // N split as evenly as it goes
		if k == 0 {
			continue
		}
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the client went away: what was sent is charged
		}
		fmt.Fprintf(w, "data: {\"tokens\": %d}\n\n", k)
		sent += k
		if flusher != nil {
			flusher.Flush()
		}
		if !ratelimit.Charge(r.Context(), k) {
			fmt.Fprintf(w, "event: limited\ndata: {\"tokens\": %d}\n\n", sent)
			return
		}
	}
	fmt.Fprintf(w, "event: done\ndata: {\"tokens\": %d}\n\n", sent)
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// GenQuota answers GET /v1/quota: for the caller's API key, what each
// policy of POST /v1/generate has left, without spending anything.
func (a *App) GenQuota(w http.ResponseWriter, r *http.Request) {
	d, err := a.Gen.Peek(r)
	if err != nil {
		quotaError(w, r, err)
		return
	}
	type policy struct {
		Policy    string `json:"policy"`
		Limit     int    `json:"limit"`
		Remaining int    `json:"remaining"`
		ResetMS   int64  `json:"reset_ms"`
	}
	out := []policy{}
	for _, res := range d.Results() {
		out = append(out, policy{res.Limit.Name, res.Limit.Quota, res.Remaining, resetMS(res)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}
