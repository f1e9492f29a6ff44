// Package framework holds what the adapters of web frameworks
// (ginlimit, echolimit) share, so that each is only the translation of
// its framework's context: a [Syntax] writes the route patterns of a
// router that names parameters ":name", as Gin and Echo do, the way
// ServeMux writes them, for a route table and for each request's route;
// a [StatusWriter], or a framework's own writer built on a [Finisher],
// tells a Limiter the status of each response.
//
// It is for writing an adapter; an application uses the adapters.
package framework
