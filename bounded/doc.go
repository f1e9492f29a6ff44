// Package bounded holds [Map], the one map of this repository that keeps
// a value per key of a set that could grow without end: route patterns,
// metric series, sets of limits, outbound budgets, throttled log lines.
package bounded
