package redistest

import (
	"os"
	"testing"
)

// FaultsEnv names the environment variable that enables fault tests:
// tests that kill or pause servers and wait seconds for a failover.
const FaultsEnv = "RATELIMIT_FAULTS"

// RequireFaults skips t, with the reason, unless FaultsEnv=1, so that the
// default test run stays fast.
func RequireFaults(t testing.TB) {
	t.Helper()
	if os.Getenv(FaultsEnv) != "1" {
		t.Skipf("redistest: skipping a fault test, which takes seconds; set %s=1 to run it", FaultsEnv)
	}
}
