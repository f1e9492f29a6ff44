// Command example is a small net/http service limited by ratelimit. It
// needs no setup: without -redis it embeds a Redis.
//
//	go run ./example
//	go run ./example -redis redis://localhost:6379/0 -algorithm token-bucket -limit 5 -window 1s
//	go run ./example -redis rediss://ratelimit:PASSWORD@redis.example:6380/0 -redis-ca ca.pem
//	go run ./example -redis-cluster 'redis://:PASSWORD@node-1:6379?addr=node-2:6379&addr=node-3:6379'
//	go run ./example -redis-sentinel 'redis://s1:26379/0?addr=s2:26379&master_name=mymaster'
//
// -h lists every flag and the environment variables that stand in for
// them. At startup it checks that Redis lets the limiter do all it needs,
// and exits saying what to fix if not.
//
// The same app runs on Gin (./example/gin) and Echo (./example/echo).
package main

import (
	"net/http"
	"os"

	"github.com/ratelimit-go/ratelimit/example/internal/app"
)

func main() {
	os.Exit(app.Main("net/http", os.Args[1:], func(a *app.App) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("GET /{$}", a.IP.Handler(http.HandlerFunc(app.Home)))
		mux.Handle("POST /login", a.Logins.Handler(http.HandlerFunc(a.Login)))
		mux.HandleFunc("GET /quota", a.Quota)
		mux.Handle("GET /api/", a.API.Handler(http.HandlerFunc(app.API)))
		mux.Handle("POST /v1/generate", app.Checked(a.Gen.Handler(http.HandlerFunc(app.Generate))))
		mux.HandleFunc("GET /v1/quota", a.GenQuota)
		mux.Handle("GET /metrics", a.MetricsHandler())
		return mux
	}))
}
