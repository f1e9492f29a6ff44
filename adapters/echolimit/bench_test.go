package echolimit_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit/testkits/adaptertest"
)

// BenchmarkNew is the request path through Echo (see adaptertest.Benchmark).
func BenchmarkNew(b *testing.B) { adaptertest.Benchmark(b, framework) }
