package outbound

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// An Option configures a [Transport] (see [New]).
type Option func(*Transport) error

// WithLimits declares the limits upstream publishes, as server-side
// limits (see [ratelimit.Limit]): each request takes its cost (see
// [WithCost]) from every limit, and one charged from usage (its Usage)
// what [WithUsage] reads from the response. upstream is a request URL's
// host, with its port when the URLs give one ("api.example.com",
// "localhost:8080"). The limits must make a valid set for
// [ratelimit.NewLimits], none named "hold". A declared limit wins over a
// published policy of its algorithm and window (see docs/outbound.md).
func WithLimits(upstream string, limits ...ratelimit.Limit) Option {
	return func(t *Transport) error {
		if upstream == "" {
			return fmt.Errorf("%w: outbound.WithLimits: the upstream is empty; give a host, as a request URL's", ratelimit.ErrInvalid)
		}
		if problem := upstreamProblem(upstream); problem != "" {
			return fmt.Errorf("%w: outbound.WithLimits(%q): %s", ratelimit.ErrInvalid, upstream, problem)
		}
		if _, dup := t.declared[lower(upstream)]; dup {
			return fmt.Errorf("%w: outbound.WithLimits: %s is declared twice", ratelimit.ErrInvalid, upstream)
		}
		if slices.ContainsFunc(limits, func(l ratelimit.Limit) bool { return l.Name == holdName }) {
			return fmt.Errorf("%w: outbound.WithLimits(%s): a limit is named %q, the name of the upstream's holds", ratelimit.ErrInvalid, upstream, holdName)
		}
		if _, err := ratelimit.NewLimits(append(limits[:len(limits):len(limits)], holdLimit)...); err != nil {
			return fmt.Errorf("outbound.WithLimits(%s): %w", upstream, err)
		}
		t.declared[lower(upstream)] = append([]ratelimit.Limit(nil), limits...)
		return nil
	}
}

// WithCost sets what a request costs, at least 1: the units it takes
// from each declared limit, or, for a limit charged from usage, the
// usage expected, which must fit before the request is sent. By default
// a request costs 1.
func WithCost(cost func(r *http.Request) int) Option {
	return nonNil("outbound.WithCost: the function", cost == nil, func(t *Transport) { t.cost = cost })
}

// WithUsage sets how a response reports what its request used (tokens,
// for a model API), charged to the declared limits charged from usage
// (see [ratelimit.Limit]'s Usage) once the response's header has come; a
// negative answer counts as 0. Usage in the body is the caller's to read
// and charge with a limit of its own. By default nothing is charged.
func WithUsage(usage func(resp *http.Response) int) Option {
	return nonNil("outbound.WithUsage: the function", usage == nil, func(t *Transport) { t.usage = usage })
}

// WithPartition sets which of the caller's budgets at its upstream a
// request spends, such as the API key it sends: requests of one upstream
// and partition share a budget. The partition is hashed, so that no key
// reaches the store. By default every request of an upstream shares one.
func WithPartition(partition func(r *http.Request) string) Option {
	return nonNil("outbound.WithPartition: the function", partition == nil, func(t *Transport) { t.partition = partition })
}

// WithMaxWait bounds how long a request waits for room in its budget,
// on top of its context's deadline: a request that would fit only later
// gets an [*Error] at once. By default only the context bounds the wait.
func WithMaxWait(d time.Duration) Option {
	return func(t *Transport) error {
		if d <= 0 {
			return fmt.Errorf("%w: outbound.WithMaxWait: %v; want more than 0, or WithoutWaiting", ratelimit.ErrInvalid, d)
		}
		t.maxWait = d
		return nil
	}
}

// WithoutWaiting makes a request whose budget has no room fail at once
// with an [*Error] saying when to retry, rather than wait.
func WithoutWaiting() Option {
	return func(t *Transport) error {
		t.noWait = true
		return nil
	}
}

// DefaultMaxRetryAfter is the longest an upstream can hold a budget back
// with a single response, unless [WithMaxRetryAfter] says otherwise: a
// Retry-After of a year holds it for an hour.
const DefaultMaxRetryAfter = time.Hour

// WithMaxRetryAfter sets the longest an upstream can hold a budget back
// with a single response (its Retry-After, or the reset of a spent
// quota): a longer time is capped, and counted (see [Stats]). The
// default is [DefaultMaxRetryAfter].
func WithMaxRetryAfter(d time.Duration) Option {
	return func(t *Transport) error {
		if d < time.Second || d > 24*time.Hour {
			return fmt.Errorf("%w: outbound.WithMaxRetryAfter: %v; want 1s to 24h", ratelimit.ErrInvalid, d)
		}
		t.maxDelay = d
		return nil
	}
}

// upstreamProblem says why upstream is not a request URL's host (with
// its port, if any), and what to give instead; or it returns "".
func upstreamProblem(upstream string) string {
	if u, err := url.Parse(upstream); err == nil && u.Scheme != "" && u.Host != "" {
		return fmt.Sprintf("the upstream is a URL; give its host, %q, which requests to it are matched by", u.Host)
	}
	if i := strings.IndexAny(upstream, "/?#@ \t"); i >= 0 {
		return fmt.Sprintf("%q is not a host: the upstream is a request URL's host, with its port when the URLs give one (\"api.example.com\", \"localhost:8080\")", upstream[i:i+1])
	}
	return ""
}

// nonNil returns an Option that refuses a nil value, named by what, or else sets it.
func nonNil(what string, isNil bool, set func(*Transport)) Option {
	return func(t *Transport) error {
		if isNil {
			return fmt.Errorf("%w: %s is nil", ratelimit.ErrInvalid, what)
		}
		set(t)
		return nil
	}
}
