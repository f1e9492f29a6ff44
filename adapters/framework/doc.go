// Package framework holds what the adapters of web frameworks
// (ginlimit, echolimit) share, so that each only translates its
// framework's context: a [Syntax] writes a router's ":name" route
// patterns the ServeMux way, for a route table and each request's route;
// a [StatusWriter], or a framework's own writer built on a [Finisher],
// tells a Limiter the status of each response.
//
// It is for writing an adapter; an application uses the adapters.
package framework
