// Command gin is the example service on Gin; see ../main.go.
package main

import (
	"net/http"
	"os"

	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit/adapters/ginlimit"
	"github.com/ratelimit-go/ratelimit/example/internal/app"
)

func main() {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(app.Main("gin", os.Args[1:], func(a *app.App) http.Handler {
		router := gin.New()
		router.GET("/", ginlimit.New(a.IP), gin.WrapF(app.Home))
		router.POST("/login", ginlimit.New(a.Logins), gin.WrapF(a.Login))
		router.GET("/quota", gin.WrapF(a.Quota))
		router.GET("/api/*path", ginlimit.New(a.API), gin.WrapF(app.API))
		router.POST("/v1/generate", func(c *gin.Context) {
			if !app.CheckGenerate(c.Writer, c.Request) {
				c.Abort()
			}
		}, ginlimit.New(a.Gen), gin.WrapF(app.Generate))
		router.GET("/v1/quota", gin.WrapF(a.GenQuota))
		router.GET("/metrics", gin.WrapH(a.MetricsHandler()))
		return router
	}))
}
