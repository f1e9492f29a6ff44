// Package framework holds what the adapters of web frameworks (ginlimit,
// echolimit) share: a [Syntax] writes a router's ":name" route patterns
// the ServeMux way, and a [StatusWriter] or [Finisher] tells a Limiter the
// status of each response. It is for writing an adapter; an application
// uses the adapters.
package framework
