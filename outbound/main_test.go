package outbound_test

import (
	"os"
	"testing"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
