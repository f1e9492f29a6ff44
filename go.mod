module github.com/ratelimit-go/ratelimit

go 1.25

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/dunglas/httpsfv v1.1.2
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.1.11
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
