module github.com/ratelimit-go/ratelimit/example/echo

go 1.25.0

require github.com/ratelimit-go/ratelimit v0.0.0 // indirect

// Until the root module is released, it comes from this repository.
replace github.com/ratelimit-go/ratelimit => ../..

require (
	github.com/labstack/echo/v4 v4.16.0
	github.com/ratelimit-go/ratelimit/adapters/echolimit v0.0.0
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.24.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.1 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/ratelimit-go/ratelimit/extra/ratelimitprom v0.0.0 // indirect
	github.com/redis/go-redis/v9 v9.22.0 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/ratelimit-go/ratelimit/adapters/echolimit => ../../adapters/echolimit

require github.com/ratelimit-go/ratelimit/example v0.0.0

replace (
	github.com/ratelimit-go/ratelimit/example => ../
	github.com/ratelimit-go/ratelimit/extra/ratelimitprom => ../../extra/ratelimitprom
)
