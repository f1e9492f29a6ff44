package redistest

import (
	"os"
	"testing"
	"time"
)

// FaultsEnv names the environment variable that enables the long tests:
// fault tests, which kill or pause servers and wait seconds for a
// failover, and tests that wait a minute or more of real time.
const FaultsEnv = "RATELIMIT_FAULTS"

// RequireFaults skips t, with the reason, unless FaultsEnv=1, so that the
// default test run stays fast.
func RequireFaults(t testing.TB) {
	t.Helper()
	if os.Getenv(FaultsEnv) != "1" {
		t.Skipf("redistest: skipping a fault test, which takes seconds; set %s=1 to run it", FaultsEnv)
	}
}

// RequireLong skips t, with the reason, unless FaultsEnv=1: it waits
// about d of real time, which the default test run cannot afford.
func RequireLong(t testing.TB, d time.Duration) {
	t.Helper()
	if os.Getenv(FaultsEnv) != "1" {
		t.Skipf("redistest: skipping a test that waits %v of real time; set %s=1 to run it", d, FaultsEnv)
	}
}
