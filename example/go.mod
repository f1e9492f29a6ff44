module github.com/ratelimit-go/ratelimit/example

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/prometheus/client_golang v1.24.1
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.70.1
	github.com/ratelimit-go/ratelimit v0.0.0
	github.com/ratelimit-go/ratelimit/extra/ratelimitprom v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

// Until the modules are released, they come from this repository.
replace (
	github.com/ratelimit-go/ratelimit => ../
	github.com/ratelimit-go/ratelimit/extra/ratelimitprom => ../extra/ratelimitprom
)
