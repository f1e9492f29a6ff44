// Package bounded holds [Map], a map that cannot grow without end, for
// the modules of this repository that keep a value per key of a set that
// comes from configuration but that a mistake could make large: the
// adapters' route patterns (see package adapters/framework) and the
// metrics modules' series (label sets of namespaces, routes and limit
// names).
package bounded
