// Command echo is the example service on Echo; see ../main.go.
package main

import (
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/ratelimit-go/ratelimit/adapters/echolimit"
	"github.com/ratelimit-go/ratelimit/example/internal/app"
)

func main() {
	os.Exit(app.Main("echo", os.Args[1:], func(a *app.App) http.Handler {
		e := echo.New()
		e.HideBanner, e.HidePort = true, true
		e.GET("/", echo.WrapHandler(http.HandlerFunc(app.Home)), echolimit.New(a.IP))
		e.POST("/login", echo.WrapHandler(http.HandlerFunc(a.Login)), echolimit.New(a.Logins))
		e.GET("/quota", echo.WrapHandler(http.HandlerFunc(a.Quota)))
		e.GET("/api/*", echo.WrapHandler(http.HandlerFunc(app.API)), echolimit.New(a.API))
		checked := func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if !app.CheckGenerate(c.Response(), c.Request()) {
					return nil
				}
				return next(c)
			}
		}
		e.POST("/v1/generate", echo.WrapHandler(http.HandlerFunc(app.Generate)), checked, echolimit.New(a.Gen))
		e.GET("/v1/quota", echo.WrapHandler(http.HandlerFunc(a.GenQuota)))
		e.GET("/metrics", echo.WrapHandler(a.MetricsHandler()))
		return e
	}))
}
