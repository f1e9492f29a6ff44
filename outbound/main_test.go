package outbound_test

import (
	"os"
	"testing"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("OUTBOUND_CLIENT"); spec != "" {
		upstreamClient(spec) // a child process of TestRealUpstreams
	}
	os.Exit(redistest.Main(m))
}
