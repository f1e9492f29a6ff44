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
		ip := router.Group("/", ginlimit.New(a.IP))
		ip.GET("/", gin.WrapF(app.Home))
		ip.POST("/login", gin.WrapF(a.Login))
		router.GET("/api/*path", ginlimit.New(a.API), gin.WrapF(app.API))
		return router
	}))
}
