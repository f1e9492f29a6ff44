package ratelimit_test

import (
	"os"
	"testing"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(instanceEnv) != "" {
		serveInstance() // a child of a test: an instance of a service
		return
	}
	redistest.Main(m)
}
