package ratelimit

import (
	"net/http"
	"strings"
)

// SetsKept returns how many sets of WithLimitsFunc l keeps checked, for
// tests.
func SetsKept(l *Limiter) int {
	n := 0
	l.sets.Range(func(setKey, checkedSet) bool { n++; return true })
	return n
}

// Deny is the default deny handler, for tests.
var Deny = deny429

// DefaultStoreKeys returns the store key of r under a policy whose keys
// start with prefix, built both ways a Limiter may build it: with the
// default key, appended in place, and from the zero IPKey's KeyFunc.
func DefaultStoreKeys(r *http.Request, prefix string) (inPlace string, err1 error, fromKeyFunc string, err2 error) {
	var b strings.Builder
	inPlace, err1 = storeKey(r, nil, prefix, &b)
	key, err := IPKey{}.KeyFunc()
	if err != nil {
		panic(err)
	}
	fromKeyFunc, err2 = storeKey(r, key, prefix, &b)
	return inPlace, err1, fromKeyFunc, err2
}
