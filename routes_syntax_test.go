package ratelimit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/routesyntax"
)

// TestRoutesInAnotherSyntax: a WithRoutes pattern in Gin's, Echo's or
// chi's syntax is an error at New that names the pattern and how ServeMux
// writes it, never a route that silently falls back to the default
// limits; and Handler refuses a table in Gin's syntax.
func TestRoutesInAnotherSyntax(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /users/:id": `"{id}"`,
		"/static/*":      `"{...}"`,
		"/files/*path":   `"{path...}"`,
	} {
		_, err := ratelimit.New(newMemory(t), "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{pattern: {ratelimit.PerMinute(1)}}))
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "WithRoutes: pattern "+`"`+pattern+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("WithRoutes(%q): got %v, want an ErrInvalid naming the pattern and %s", pattern, err, want)
		}
	}
	gin := routesyntax.WithRoutes(routesyntax.Gin, map[string][]ratelimit.Limit{"GET /users/:id": {ratelimit.PerMinute(1)}}).(ratelimit.Option)
	l := newLimiter(t, newMemory(t), "test", gin)
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "Gin's syntax") {
			t.Errorf("Handler with a Gin table: got panic %v, want one naming Gin's syntax", v)
		}
	}()
	l.Handler(nil)
}
