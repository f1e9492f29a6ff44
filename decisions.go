package ratelimit

import (
	"context"
	"net/http"
)

// requestState is what the Limiters that see a request keep in its
// context: the route pattern and every decision, in the order the
// Limiters ran. It is the request's context itself, and holds the copy of
// the request that carries it and the header values the Limiters set, so
// that all of it costs one allocation; the first Limiter (or
// [RequestWithRoute]) puts it there, and the others add to it. Only the
// middleware writes it, before the handler runs.
type requestState struct {
	context.Context
	route    string // the pattern the router matched, if known
	matched  string // the pattern a Limiter's route table matched, if any
	verdicts []verdict
	first    [2]verdict   // verdicts' first array
	req      http.Request // the copy of the request that carries the state
	headers  headerArena  // the header values the Limiters set
}

// verdict is one Limiter's decision on a request.
type verdict struct {
	limiter  *Limiter
	policy   *policy
	decision Decision
	counted  bool   // the cost is spent already: Finish must not spend it again
	pk       string // the pk parameter of WithPartitionKey, an RFC 9651 Byte Sequence; "" without
}

// stateKey is the context key of a requestState.
var stateKey = new(int)

func (s *requestState) Value(key any) any {
	if key == stateKey {
		return s
	}
	return s.Context.Value(key)
}

// stateOf returns r's requestState, or nil.
func stateOf(r *http.Request) *requestState {
	s, _ := r.Context().Value(stateKey).(*requestState)
	return s
}

// withState returns r and its requestState, adding one to a copy of r
// when it has none.
func withState(r *http.Request) (*http.Request, *requestState) {
	if s := stateOf(r); s != nil {
		return r, s
	}
	s := &requestState{Context: r.Context()}
	s.verdicts = s.first[:0]
	// The copy lives in s, so that the state and the request that carries
	// it cost one allocation: WithContext's own copy does not escape.
	s.req = *r.WithContext(s)
	return &s.req, s
}

// add records l's decision d under p.
func (s *requestState) add(l *Limiter, p *policy, d Decision) *verdict {
	s.verdicts = append(s.verdicts, verdict{limiter: l, policy: p, decision: d})
	return &s.verdicts[len(s.verdicts)-1]
}

// Decisions returns the decisions of the Limiters that decided the
// request whose context is ctx, in the order they ran: with a global
// Limiter and a route's, two. A handler reads them, for example to tell
// the client what it has left:
//
//	for _, d := range ratelimit.Decisions(r.Context()) {
//		for _, res := range d.Results() {
//			fmt.Fprintf(w, "%s: %d left\n", res.Limit, res.Remaining)
//		}
//	}
//
// A dry-run Limiter's decision is there even when it would have denied; a
// Limiter that skipped the request, had no limits for it, or could not
// decide added none. With Gin and Echo, pass c.Request.Context() and
// c.Request().Context(): the adapters hand the handler the request that
// carries them. The slice is the caller's.
func Decisions(ctx context.Context) []Decision {
	s, _ := ctx.Value(stateKey).(*requestState)
	if s == nil || len(s.verdicts) == 0 {
		return nil
	}
	ds := make([]Decision, len(s.verdicts))
	for i, v := range s.verdicts {
		ds[i] = v.decision
	}
	return ds
}
