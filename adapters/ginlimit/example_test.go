package ginlimit_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/adapters/ginlimit"
	"github.com/ratelimit-go/ratelimit/store"
)

// A route table in Gin's syntax, as FullPath names the routes; a
// ServeMux pattern such as "GET /users/{id}" would be refused by
// ratelimit.New.
func ExampleRoutes() {
	s, _ := store.NewMemory(store.MemoryOptions{})
	limiter, err := ratelimit.New(s, "api",
		ratelimit.WithLimits(ratelimit.PerMinute(100)),
		ginlimit.Routes(map[string][]ratelimit.Limit{
			"GET /users/:id": {ratelimit.PerMinute(2).Using(ratelimit.FixedWindow).Named("user")},
		}),
	)
	if err != nil {
		panic(err)
	}
	router := gin.New()
	router.Use(ginlimit.New(limiter))
	router.GET("/users/:id", func(c *gin.Context) {
		d := ratelimit.Decisions(c.Request.Context())[0]
		c.String(200, "%d left", d.Results()[0].Remaining)
	})
	for range 3 {
		w := httptest.NewRecorder()
		router.ServeHTTP(w, httptest.NewRequest("GET", "/users/7", nil))
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}
	_, err = ratelimit.New(s, "api", ginlimit.Routes(map[string][]ratelimit.Limit{"GET /users/{id}": {ratelimit.PerMinute(2)}}))
	fmt.Println(err)
	// Output:
	// 200 1 left
	// 200 0 left
	// 429 Too Many Requests: rate limit exceeded; retry in 60 s
	// ratelimit: invalid input: ginlimit.Routes: pattern "GET /users/{id}": "{id}" is ServeMux syntax; Gin writes a parameter ":id"
}
