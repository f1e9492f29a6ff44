// Package bounded holds [Map], the one map of this repository that keeps
// a value per key of a set that could grow without end: the adapters'
// route patterns (see package adapters/framework), the metrics modules'
// series (label sets of namespaces, routes and limit names), a Limiter's
// sets of limits from WithLimitsFunc and policies under overrides, the
// outbound client's budgets, and the Fallback's throttled log lines.
package bounded
