//go:build race

package store

// raceDetector tells whether the tests run with the race detector, under
// which sync.Pool drops a quarter of what is put back: a pooled value is
// then made anew, so allocation counts of paths through a pool rise.
const raceDetector = true
