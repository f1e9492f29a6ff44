package ratelimit

import (
	"context"
	"net/http"
	"net/netip"
)

// A Request is what a Limiter decides, whatever carries it: an
// *http.Request ([Limiter.Handler], [Limiter.Allow], the Gin and Echo
// adapters), a gRPC call (the grpclimit interceptors), or work done
// outside any transport, named by its key ([Key]). Key functions read it,
// and so do the functions of [WithCost], [WithSkip], [WithLimitsFunc],
// [WithDryRun] and [WithObserver]: over HTTP it is the *http.Request
// itself.
//
// A Request other than an *http.Request says what it carries through
// the methods it has of these, which grpclimit's calls have all of, and
// the built-in key functions read:
//
//	Header(name string) []string // the values of a field (gRPC metadata), named in canonical form ("X-Api-Key")
//	Peer() netip.AddrPort        // the address of the other end of the connection
//	Route() string               // what is asked: "/package.Service/Method"
//
// A key function of your own that reads a header over HTTP and gRPC
// alike asks for the method when the Request is not an *http.Request:
//
//	func tenant(r ratelimit.Request) (string, error) {
//		var v []string
//		switch r := r.(type) {
//		case *http.Request:
//			v = r.Header.Values("X-Tenant")
//		case interface{ Header(string) []string }:
//			v = r.Header("X-Tenant")
//		}
//		if len(v) == 0 || v[0] == "" {
//			return "", fmt.Errorf("%w: no tenant", ratelimit.ErrInvalid)
//		}
//		return "tenant:" + v[0], nil
//	}
type Request interface {
	Context() context.Context
}

// The methods a Request other than an *http.Request may have (see
// Request).
type (
	headerer interface{ Header(name string) []string }
	peerer   interface{ Peer() netip.AddrPort }
	router   interface{ Route() string }
)

// headerOf returns the values of r's field name, nil when none.
func headerOf(r Request, name string) []string {
	switch r := r.(type) {
	case *http.Request:
		return r.Header.Values(name)
	case headerer:
		return r.Header(name)
	}
	return nil
}

// firstValue returns the first value of r's field name, "" when none,
// and whether r has the field.
func firstValue(r Request, name string) (string, bool) {
	if v := headerOf(r, name); len(v) > 0 {
		return v[0], true
	}
	return "", false
}

// peerOf returns the address of the other end of r's connection; the
// zero AddrPort when there is none or it is not an IP address.
func peerOf(r Request) netip.AddrPort {
	switch r := r.(type) {
	case *http.Request:
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
		}
		if a, ok := parseAddr(r.RemoteAddr); ok {
			return netip.AddrPortFrom(a, 0)
		}
	case peerer:
		return r.Peer()
	}
	return netip.AddrPort{}
}

// routeOf returns what r asks, as a route table names it: over HTTP the
// method and the pattern a router matched ("GET /items/{id}"), "" when
// none did; otherwise what its Route says.
func routeOf(r Request) string {
	switch r := r.(type) {
	case *http.Request:
		p := r.Pattern
		if p == "" || hasMethod(p) {
			return p
		}
		return r.Method + " " + p
	case router:
		return r.Route()
	}
	return ""
}

// Key returns the Request of work done outside any transport, for
// [Limiter.Decide]: a message of a queue, a frame of a WebSocket, a job.
// It is counted under key, as the Limiter's key function would name a
// client (the key function is not called), under the limits of route (a
// pattern of [WithRoutes] as written, or "" for those of [WithLimits]),
// at cost (what [WithCost] would say; below 1, 1). Its context is ctx.
// [WithLimitsFunc], [WithSkip] and the observer read it as any Request:
// its Route is route, and it has no header and no peer.
func Key(ctx context.Context, route, key string, cost int) Request {
	return &keyRequest{ctx: ctx, route: route, key: key, cost: max(cost, 1)}
}

// keyRequest is the Request of Key.
type keyRequest struct {
	ctx   context.Context
	route string
	key   string
	cost  int
}

func (k *keyRequest) Context() context.Context { return k.ctx }
func (k *keyRequest) Route() string            { return k.route }
