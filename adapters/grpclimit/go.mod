module github.com/ratelimit-go/ratelimit/adapters/grpclimit

go 1.25.0

require (
	github.com/ratelimit-go/ratelimit v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260226221140-a57be14db171
	google.golang.org/grpc v1.81.1
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/net v0.51.0 // indirect
	golang.org/x/sys v0.42.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)

// Until the root module is released, it comes from this repository.
replace github.com/ratelimit-go/ratelimit => ../..
